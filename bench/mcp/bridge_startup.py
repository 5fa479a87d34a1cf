#!/usr/bin/env python3
"""`talon mcp` start-up with bridged stdio servers, with and without one that never answers:
time to the first `tools/list` reply, and time until every live server's tools are listed.
Target: the dead server changes neither.

Usage: bridge_startup.py [--rounds N]
Needs `cargo build --release -p talon`, node and npm (server-everything, as bridge_calls.py).
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
sys.path.insert(0, HERE)
from mcp_client import Mcp  # noqa: E402
from bridge_calls import server_everything  # noqa: E402

LIVE = 4



def workspace(work):
    """The agent's workspace: a directory of its own inside `work`, because Talon refuses to start
    with its configuration file or data directory inside the workspace."""
    path = os.path.join(work, "ws")
    os.makedirs(path, exist_ok=True)
    return path

def config(entry, dead):
    # Every tool listed inline (5 servers' tools are above the default search threshold).
    text = "[tools]\nrate_limit_per_hour = 0\n[mcp]\nsearch_threshold = 1000\n"
    for i in range(LIVE):
        text += f'[mcp_servers.live{i}]\ncommand = "node"\nargs = ["{entry}", "stdio"]\n'
    if dead:
        text += '[mcp_servers.dead]\ncommand = "sleep"\nargs = ["600"]\nstartup_timeout_secs = 30\n'
    return text


def one_run(talon, entry, dead):
    work = tempfile.mkdtemp(prefix="talon-bridge-startup-")
    path = os.path.join(work, "talon.toml")
    with open(path, "w") as f:
        f.write(config(entry, dead))
    env = dict(os.environ, TALON_CONFIG=path)
    t0 = time.perf_counter()
    server = Mcp([talon, "--data-dir", os.path.join(work, "data"), "mcp", "--workspace", workspace(work)], env)
    first, complete = None, None
    while complete is None:
        tools = server.request("tools/list", {})["result"]["tools"]
        now = time.perf_counter() - t0
        first = first if first is not None else now
        names = {t["name"] for t in tools}
        if all(f"mcp__live{i}__echo" in names for i in range(LIVE)):
            complete = now
        elif now > 60:
            raise RuntimeError("the live servers' tools never appeared")
        else:
            time.sleep(0.01)
    server.stop()
    return first * 1000, complete * 1000


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=10)
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    talon = os.path.join(target, "release", "talon")
    entry = server_everything(target)
    results = {False: [], True: []}
    for _ in range(args.rounds):
        for dead in (False, True):
            results[dead].append(one_run(talon, entry, dead))
    print(f"{args.rounds} starts each, alternating; median ms")
    print("| configuration | first tools/list answered | all live servers' tools listed |")
    print("| --- | --- | --- |")
    for dead, label in ((False, f"{LIVE} live servers"), (True, f"{LIVE} live + 1 that never answers")):
        firsts = [r[0] for r in results[dead]]
        completes = [r[1] for r in results[dead]]
        print(f"| {label} | {statistics.median(firsts):.0f} | {statistics.median(completes):.0f} |")


main()
