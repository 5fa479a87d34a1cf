#!/usr/bin/env python3
"""Per-call wall time of `exec {"command": "true"}` through `talon mcp`, sandboxed and not,
against spawning the same command directly from this script, in the same run, as ratios.

Usage: exec_calls.py [--calls N]
Needs `cargo build --release -p talon` (CARGO_TARGET_DIR is honoured) and bubblewrap.
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
BWRAP = ["bwrap", "--new-session", "--die-with-parent", "--unshare-all", "--cap-drop", "ALL",
         "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]


def interleaved(fns, calls):
    """Median wall time (ms) of each function, called in turn so that drifting machine load
    falls on all of them alike."""
    for fn in fns.values():
        for _ in range(10):
            fn()
    times = {name: [] for name in fns}
    for _ in range(calls):
        for name, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) * 1000 for name, t in times.items()}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    talon = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "talon")
    if not os.path.exists(talon):
        sys.exit(f"missing {talon}: run `cargo build --release -p talon` first")
    ws = os.path.realpath(tempfile.mkdtemp(prefix="talon-exec-bench-"))
    data = tempfile.mkdtemp(prefix="talon-exec-bench-data-")
    base = dict(os.environ, TALON_TOOLS__PERMISSION_MODE="bypassPermissions",
                TALON_TOOLS__RATE_LIMIT_PER_HOUR="0")
    servers = {mode: Mcp([talon, "--data-dir", data, "mcp", "--workspace", ws],
                         dict(base, TALON_EXEC__SANDBOX=mode))
               for mode in ("off", "all")}

    def call(server):
        def run():
            reply = server.request("tools/call", {"name": "exec", "arguments": {"command": "true"}})
            if reply["result"].get("isError"):
                raise RuntimeError(reply)
        return run
    fns = {
        "talon mcp exec true (sandbox off)": call(servers["off"]),
        "talon mcp exec true (sandbox all)": call(servers["all"]),
        "sh -c true (spawned directly)": lambda: subprocess.run(["sh", "-c", "true"], check=True),
        "bwrap … sh -c true (spawned directly)":
            lambda: subprocess.run(BWRAP + ["--", "sh", "-c", "true"], check=True),
    }
    t = interleaved(fns, args.calls)
    for server in servers.values():
        server.close()
    rows = list(t.items())
    print(f"{args.calls} rounds, each command once per round in turn; median wall time per call")
    print("| command | ms per call |")
    print("| --- | --- |")
    for name, ms in rows:
        print(f"| {name} | {ms:.2f} |")
    off, on = t["talon mcp exec true (sandbox off)"], t["talon mcp exec true (sandbox all)"]
    sh, bw = t["sh -c true (spawned directly)"], t["bwrap … sh -c true (spawned directly)"]
    print(f"\nunsandboxed / sh -c: {off / sh:.2f}; sandboxed / unsandboxed: {on / off:.2f}; "
          f"sandboxed / bare bwrap: {on / bw:.2f}")


main()
