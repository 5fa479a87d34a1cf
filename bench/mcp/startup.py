#!/usr/bin/env python3
"""Time from process start to the first `tools/list` answer, and idle RSS, for MCP servers over
stdio, measured in the same run and reported as medians and ratios.

Usage: startup.py [--runs N] [--idle SECONDS]
Compares `target/release/talon mcp` with @modelcontextprotocol/server-filesystem (installed with
`npm ci` in this directory), both started the same way: spawned directly with pipes, sent
initialize, notifications/initialized and tools/list.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def send(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()


def read_response(proc, want_id):
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError("server closed stdout: " + proc.stderr.read().decode(errors="replace")[-2000:])
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            continue
        if message.get("id") == want_id:
            return message


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def one_run(command, idle):
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        send(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "talon-bench", "version": "1"}}})
        read_response(proc, 1)
        send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        listed = read_response(proc, 2)
        elapsed = time.perf_counter() - start
        tools = len(listed["result"]["tools"])
        time.sleep(idle)
        rss = rss_kib(proc.pid)
        return elapsed, rss, tools
    finally:
        proc.kill()
        proc.wait()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--idle", type=float, default=1.0)
    args = parser.parse_args()
    talon = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "talon")
    node_server = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
    for path in (talon, node_server):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: run `cargo build --release` and `npm ci` in bench/mcp first")
    workspace = tempfile.mkdtemp(prefix="talon-bench-")
    # Talon opens its store on every start (created by the first run, reused by the rest, as for
    # a user); a data directory of its own keeps the bench out of the user's.
    data_dir = tempfile.mkdtemp(prefix="talon-bench-data-")
    servers = {
        "talon mcp": [talon, "--data-dir", data_dir, "mcp", "--workspace", workspace],
        "server-filesystem (node)": ["node", node_server, workspace],
    }
    results = {name: [] for name in servers}
    # Interleave runs so both servers see the same machine conditions.
    for _ in range(args.runs):
        for name, command in servers.items():
            results[name].append(one_run(command, args.idle))
    rows = {}
    for name, runs in results.items():
        times = [r[0] * 1000 for r in runs]
        rss = [r[1] / 1024 for r in runs]
        rows[name] = (statistics.median(times), statistics.median(rss), runs[0][2])
    print(f"runs per server: {args.runs}, idle before RSS: {args.idle}s")
    print("| server | tools | start → first tools/list (median ms) | idle RSS (median MiB) |")
    print("| --- | --- | --- | --- |")
    for name, (t, r, n) in rows.items():
        print(f"| {name} | {n} | {t:.1f} | {r:.1f} |")
    talon_row, node_row = rows["talon mcp"], rows["server-filesystem (node)"]
    print(f"\nratio talon/node: time {talon_row[0] / node_row[0]:.3f}, RSS {talon_row[1] / node_row[1]:.3f}")


main()
