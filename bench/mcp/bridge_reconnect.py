#!/usr/bin/env python3
"""Reconnect time of a bridged server whose process dies: from the call that kills it (a test
server's `crash` tool) to the first successful call after Talon restarted it, through `talon mcp`.

Usage: bridge_reconnect.py [--rounds N]
Needs `cargo build --release -p talon` and python3 (the test server is
crates/talon-bridge/tests/fixtures/changing_server.py).
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import Mcp  # noqa: E402

SCRIPT = os.path.join(ROOT, "crates", "talon-bridge", "tests", "fixtures", "changing_server.py")



def workspace(work):
    """The agent's workspace: a directory of its own inside `work`, because Talon refuses to start
    with its configuration file or data directory inside the workspace."""
    path = os.path.join(work, "ws")
    os.makedirs(path, exist_ok=True)
    return path

def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    talon = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "talon")
    work = tempfile.mkdtemp(prefix="talon-bridge-reconnect-")
    path = os.path.join(work, "talon.toml")
    with open(path, "w") as f:
        f.write(f'[tools]\nrate_limit_per_hour = 0\npermission_mode = "bypassPermissions"\n'
                f'[mcp_servers.crashy]\ncommand = "python3"\nargs = ["{SCRIPT}"]\nenv = {{ CRASHY = "1" }}\n')
    server = Mcp([talon, "--data-dir", os.path.join(work, "data"), "mcp", "--workspace", workspace(work)],
                 dict(os.environ, TALON_CONFIG=path))
    while not any(t["name"] == "mcp__crashy__crash" for t in server.request("tools/list", {})["result"]["tools"]):
        time.sleep(0.01)
    times = []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        server.request("tools/call", {"name": "mcp__crashy__crash", "arguments": {}})
        while True:
            reply = server.request("tools/call", {"name": "mcp__crashy__alpha", "arguments": {}})
            if not reply.get("result", {}).get("isError"):
                break
            time.sleep(0.01)
        times.append((time.perf_counter() - t0) * 1000)
        # The restarted server swapped alpha for beta; put it back for the next round.
        server.request("tools/call", {"name": "mcp__crashy__crash", "arguments": {}})
        while server.request("tools/call", {"name": "mcp__crashy__alpha", "arguments": {}}).get("result", {}).get("isError"):
            time.sleep(0.01)
    server.stop()
    print(f"{args.rounds} crashes; ms from the crash to the first successful call")
    print(f"median {statistics.median(times):.0f}, min {min(times):.0f}, max {max(times):.0f}")


main()
