#!/usr/bin/env python3
"""Server CPU per call and calls per second for sequential small-file reads over MCP stdio.

Usage: read_calls.py [--calls N] [--files F]
Compares `talon mcp` (tool read_file) with @modelcontextprotocol/server-filesystem (tool
read_text_file) from one client in the same run. CPU is the server process's user+sys time
(/proc/<pid>/stat) over the calls only, so the client's own cost drops out.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import Mcp, cpu_seconds  # noqa: E402


def run(name, server, tool, path_of, calls, files):
    # Warm up (first calls compile validators, fill caches).
    for i in range(50):
        server.request("tools/call", {"name": tool, "arguments": {"path": path_of(i % files)}})
    cpu0, t0 = cpu_seconds(server.proc.pid), time.perf_counter()
    for i in range(calls):
        reply = server.request("tools/call", {"name": tool, "arguments": {"path": path_of(i % files)}})
        result = reply.get("result", {})
        if result.get("isError") or "error" in reply:
            raise RuntimeError(f"{name}: call failed: {reply}")
    wall = time.perf_counter() - t0
    cpu = cpu_seconds(server.proc.pid) - cpu0
    server.stop()
    return {"name": name, "cpu_us_per_call": cpu / calls * 1e6, "calls_per_s": calls / wall}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=10000)
    parser.add_argument("--files", type=int, default=100)
    args = parser.parse_args()
    talon = os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")), "release", "talon")
    node_server = os.path.join(HERE, "node_modules", "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
    for path in (talon, node_server):
        if not os.path.exists(path):
            sys.exit(f"missing {path}: run `cargo build --release` and `npm ci` in bench/mcp first")
    ws = os.path.realpath(tempfile.mkdtemp(prefix="talon-read-bench-"))
    for i in range(args.files):
        with open(os.path.join(ws, f"file{i:03}.txt"), "w") as f:
            f.write("".join(f"line {n} of a small file used to measure per-call overhead\n" for n in range(16)))
    env = dict(os.environ, TALON_TOOLS__RATE_LIMIT_PER_HOUR="0")
    # Every call is audited into the store, as in production; a data directory of its own keeps
    # the bench out of the user's.
    data_dir = tempfile.mkdtemp(prefix="talon-read-bench-data-")
    results = [
        run("talon mcp (read_file)", Mcp([talon, "--data-dir", data_dir, "mcp", "--workspace", ws], env), "read_file",
            lambda i: f"file{i:03}.txt", args.calls, args.files),
        run("server-filesystem (read_text_file)", Mcp(["node", node_server, ws]), "read_text_file",
            lambda i: os.path.join(ws, f"file{i:03}.txt"), args.calls, args.files),
    ]
    print(f"{args.calls} sequential calls, {args.files} files of ~1 KiB")
    print("| server | server CPU per call (µs) | calls/s |")
    print("| --- | --- | --- |")
    for r in results:
        print(f"| {r['name']} | {r['cpu_us_per_call']:.1f} | {r['calls_per_s']:.0f} |")
    t, n = results
    print(f"\nCPU per call, node/talon: {n['cpu_us_per_call'] / t['cpu_us_per_call']:.1f}x; calls/s talon/node: {t['calls_per_s'] / n['calls_per_s']:.2f}")


main()
