#!/usr/bin/env python3
"""A bridged call against the same call made directly, same client, same run: server-everything's
`echo` called through `talon mcp` (Talon's MCP client → Talon's pipeline → server-everything →
back) and called on server-everything itself, interleaved. Prints the median wall time per call
and the overhead (target: <= 10 % or <= 100 µs, whichever is larger).

Usage: bridge_calls.py [--calls N] [--rounds R] [--compare-talon PATH]
Each round starts every process afresh (which core each lands on, and each node instance's state,
move a round's figures by tens of µs), so the overhead is reported per round and as the median
over rounds.
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



def workspace(work):
    """The agent's workspace: a directory of its own inside `work`, because Talon refuses to start
    with its configuration file or data directory inside the workspace."""
    path = os.path.join(work, "ws")
    os.makedirs(path, exist_ok=True)
    return path

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
    parser.add_argument("--rounds", type=int, default=5)
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
    rounds = [one_round(args, talon, relay, entry, r) for r in range(args.rounds)]
    names = list(rounds[0])
    print(f"{args.rounds} round(s) of {args.calls} calls per path, interleaved; median wall time per call (µs)")
    print("| round | " + " | ".join(names) + " | overhead | Talon beyond the relay |")
    print("| --- " * (len(names) + 3) + "|")
    overheads = []
    for r, med in enumerate(rounds, 1):
        b, d, rel = (med[n] for n in names[:3])
        overheads.append(b - d)
        print(f"| {r} | " + " | ".join(f"{med[n]:.0f}" for n in names) + f" | {b - d:.0f} | {b - rel:.0f} |")
    overall = statistics.median(overheads)
    direct = statistics.median(med[names[1]] for med in rounds)
    print(f"\noverhead, median over rounds: {overall:.0f} µs ({overall / direct:.0%} of the direct call); "
          f"per round {min(overheads):.0f}-{max(overheads):.0f} µs; "
          "target <= 10 % or <= 100 µs, whichever is larger")
    if args.compare_talon:
        compared = statistics.median(med[names[3]] - med[names[1]] for med in rounds)
        print(f"the compared talon's overhead, median over rounds: {compared:.0f} µs")


def one_round(args, talon, relay, entry, index):
    """Starts the servers, interleaves the calls, and returns each path's median in µs."""
    work = tempfile.mkdtemp(prefix="talon-bridge-bench-")
    config = os.path.join(work, "talon.toml")
    with open(config, "w") as f:
        f.write(f'[tools]\nrate_limit_per_hour = 0\n[mcp_servers.everything]\ncommand = "node"\n'
                f'args = ["{entry}", "stdio"]\n')
    env = dict(os.environ, TALON_CONFIG=config)
    bridged = Mcp([talon, "--data-dir", os.path.join(work, "data"), "mcp", "--workspace", workspace(work)], env)
    compared = None
    if args.compare_talon:
        compared = Mcp([args.compare_talon, "--data-dir", os.path.join(work, "data-compared"), "mcp",
                        "--workspace", workspace(work)], env)
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
        "through talon mcp": lambda i: bridged.call("mcp__everything__echo", {"message": f"m{i}"}),
        "direct": lambda i: direct.call("echo", {"message": f"m{i}"}),
        "through the naive relay": lambda i: relayed.call("echo", {"message": f"m{i}"}),
    }
    if compared:
        calls["through the compared talon"] = \
            lambda i: compared.call("mcp__everything__echo", {"message": f"m{i}"})
    for i in range(50):
        for fn in calls.values():
            fn(i)
    times = {name: [] for name in calls}
    for i in range(args.calls):
        # Rotate the order so that no path always follows the same one.
        names = list(calls)
        names = names[i % len(names):] + names[:i % len(names)]
        for name in names:
            t0 = time.perf_counter()
            calls[name](i)
            times[name].append(time.perf_counter() - t0)
    for client in filter(None, (bridged, direct, relayed, compared)):
        client.stop()
    return {name: statistics.median(t) * 1e6 for name, t in times.items()}


if __name__ == "__main__":
    main()
