#!/usr/bin/env python3
"""200 concurrent sessions on one gateway, each running 10 tool-calling turns.

`talon mock-provider` answers instantly: each prompt with one `datetime` call, each tool result
with a short answer, so every turn is two model requests and one tool call through the pipeline.
Every turn is `POST /v1/sessions/{key}/messages` (history from the store, the turn saved whole).
Prints throughput, p50/p99 turn latency and the gateway's peak RSS (target <= 200 MiB).

Usage: concurrent_sessions.py [--sessions 200] [--turns 10]
Needs `cargo build --release -p talon`.
"""

import argparse
import http.client
import json
import statistics
import threading
import time

from common import peak_rss_mib, start_gateway, start_mock, talon_binary, workdir


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    talon = talon_binary()
    work = workdir()
    mock, url = start_mock(talon, work, {
        "repeat_last": True,
        "turns": [{"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}]}],
        "after_tool_results": {"text": "It is now."},
    })
    gateway, addr = start_gateway(talon, work, f"""
[providers.mock]
kind = "openai"
base_url = "{url}/v1"
model = "mock"
""")
    host, port = addr.rsplit(":", 1)
    latencies = []
    failures = []
    lock = threading.Lock()
    start_line = threading.Barrier(args.sessions + 1)

    def session(i):
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        start_line.wait()
        for t in range(args.turns):
            body = json.dumps({"text": f"turn {t}: what time is it?"})
            t0 = time.perf_counter()
            conn.request("POST", f"/v1/sessions/load-{i}/messages", body,
                         {"content-type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
            elapsed = time.perf_counter() - t0
            reply = json.loads(data)
            with lock:
                if resp.status != 200 or reply.get("text") != "It is now.":
                    failures.append((resp.status, data[:200]))
                latencies.append(elapsed)
        conn.close()

    threads = [threading.Thread(target=session, args=(i,)) for i in range(args.sessions)]
    for t in threads:
        t.start()
    start_line.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    rss = peak_rss_mib(gateway.pid)
    gateway.terminate()
    mock.terminate()
    latencies.sort()
    n = len(latencies)
    print(f"{args.sessions} sessions x {args.turns} turns = {n} turns "
          f"(each: 2 model requests, 1 tool call), {len(failures)} failed")
    if failures:
        print("first failure:", failures[0])
    print("| figure | value |")
    print("| --- | --- |")
    print(f"| throughput | {n / wall:.0f} turns/s |")
    print(f"| turn latency p50 | {statistics.median(latencies) * 1000:.1f} ms |")
    print(f"| turn latency p99 | {latencies[min(n - 1, int(n * 0.99))] * 1000:.1f} ms |")
    print(f"| gateway peak RSS | {rss:.0f} MiB |")


if __name__ == "__main__":
    main()
