#!/usr/bin/env python3
"""A bridged call against the same call made directly, same client, same run: server-everything's
`echo` called through `talon mcp` (Talon's MCP client → Talon's pipeline → server-everything →
back) and called on server-everything itself, interleaved. Prints the median wall time per call
and the overhead (target: <= 10 % or <= 100 µs, whichever is larger).

Usage: bridge_calls.py [--calls N] [--compare-talon PATH]
--compare-talon adds a fourth path: the same bridged call through another `talon` binary (an
earlier build, say), for a same-run comparison.
A third path, the naive baseline, sends the same direct call through `stdio_relay` (a process that
only copies bytes both ways): what it adds is the price of one extra process hop by itself.

Needs `cargo build --release -p talon && cargo build --release -p talon-bridge --example stdio_relay`
(CARGO_TARGET_DIR is
honoured), node and npm; the server is the one the bridge tests install into the target directory
(installed here if missing).
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import Mcp  # noqa: E402

EVERYTHING = "@modelcontextprotocol/server-everything@2026.8.31"


def server_everything(target):
    root = os.path.join(target, "tmp", "npm-peers")
    entry = os.path.join(root, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
    if not os.path.exists(entry):
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "--prefix", root, EVERYTHING],
                       check=True)
    return entry


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--compare-talon", default=None)
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    talon = os.path.join(target, "release", "talon")
    relay = os.path.join(target, "release", "examples", "stdio_relay")
    for binary in (talon, relay):
        if not os.path.exists(binary):
            sys.exit(f"missing {binary}: run `cargo build --release -p talon && cargo build "
                     "--release -p talon-bridge --example stdio_relay` first")
    entry = server_everything(target)
    work = tempfile.mkdtemp(prefix="talon-bridge-bench-")
    config = os.path.join(work, "talon.toml")
    with open(config, "w") as f:
        f.write(f'[tools]\nrate_limit_per_hour = 0\n[mcp_servers.everything]\ncommand = "node"\n'
                f'args = ["{entry}", "stdio"]\n')
    env = dict(os.environ, TALON_CONFIG=config)
    bridged = Mcp([talon, "--data-dir", os.path.join(work, "data"), "mcp", "--workspace", work], env)
    compared = None
    if args.compare_talon:
        compared = Mcp([args.compare_talon, "--data-dir", os.path.join(work, "data-compared"), "mcp",
                        "--workspace", work], env)
    direct = Mcp(["node", entry, "stdio"])
    relayed = Mcp([relay, "node", entry, "stdio"])
    # `talon mcp` answers at once and gains the server's tools when it has connected.
    deadline = time.time() + 60
    for client in filter(None, (bridged, compared)):
        while not any(t["name"] == "mcp__everything__echo"
                      for t in client.request("tools/list", {})["result"]["tools"]):
            if time.time() > deadline:
                sys.exit("the bridged server's tools did not appear within 60 s")
            time.sleep(0.05)
    calls = {
        "through talon mcp (mcp__everything__echo)": lambda i: bridged.call("mcp__everything__echo", {"message": f"m{i}"}),
        "direct to server-everything (echo)": lambda i: direct.call("echo", {"message": f"m{i}"}),
        "through the naive relay (echo)": lambda i: relayed.call("echo", {"message": f"m{i}"}),
    }
    if compared:
        calls[f"through {args.compare_talon} mcp"] = \
            lambda i: compared.call("mcp__everything__echo", {"message": f"m{i}"})
    for i in range(50):
        for fn in calls.values():
            fn(i)
    times = {name: [] for name in calls}
    for i in range(args.calls):
        for name, fn in calls.items():
            t0 = time.perf_counter()
            fn(i)
            times[name].append(time.perf_counter() - t0)
    bridged.stop()
    direct.stop()
    relayed.stop()
    if compared:
        compared.stop()
    med = {name: statistics.median(t) * 1e6 for name, t in times.items()}
    print(f"{args.calls} calls each, interleaved; median wall time per call")
    print("| path | µs per call |")
    print("| --- | --- |")
    for name, us in med.items():
        print(f"| {name} | {us:.0f} |")
    b, d, r = list(med.values())[:3]
    print(f"\noverhead: {b - d:.0f} µs ({(b - d) / d:.0%}); target <= 10 % or <= 100 µs, whichever is larger")
    print(f"the naive relay's own overhead (one extra hop, nothing parsed): {r - d:.0f} µs; "
          f"Talon's beyond it: {b - r:.0f} µs")
    if compared:
        c = list(med.values())[3]
        print(f"the compared talon's overhead: {c - d:.0f} µs; this build's is {b - d:.0f} µs")


if __name__ == "__main__":
    main()
