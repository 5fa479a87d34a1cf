#!/usr/bin/env python3
"""Child runs (issue 24): latency on one gateway, throughput over two.

Part 1, one `talon serve` on SQLite, `talon mock-provider` answering at once, timed from the
gateway's own events (`GET /v1/events`, read as they arrive):
  - spawn -> the child's turn starts (its first model request follows at once), against a
    plain one-request turn;
  - the child's end -> the parent's announcing turn starts (this includes the 1 s debounce
    that batches results);
  - a turn waiting for a child (`subagents run`) against a turn with one `datetime` call.
Part 2 (with TALON_BENCH_DATABASE_URL): two gateways on one PostgreSQL schema, 200 parent turns
(100 on each) each spawning 5 children: 1,000 runs; runs per second until every one ended and
was announced, and each gateway's peak RSS.

Usage: subagents.py [--samples 40] [--parents 200]
Needs `cargo build --release -p talon`.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from common import peak_rss_mib, start_gateway, start_mock, talon_binary, workdir

SCRIPT = {
    "conversations": [
        {"when": "[Talon] Runs you started", "last": True, "turns": [{"text": "noted"}]},
        {"when": "CHILD", "turns": [{"text": "child done"}]},
        {"when": "spawn five", "turns": [{"tool_calls": [
            {"name": "spawn", "arguments": {"task": f"CHILD {n}"}} for n in range(5)]}]},
        {"when": "spawn one", "turns": [{"tool_calls": [
            {"name": "spawn", "arguments": {"task": "CHILD"}}]}]},
        {"when": "sync one", "turns": [{"tool_calls": [
            {"name": "subagents", "arguments": {"action": "run", "task": "CHILD"}}]}]},
        {"when": "tool one", "turns": [{"tool_calls": [
            {"name": "datetime", "arguments": {"timezone": "UTC"}}]}]},
        {"when": "plain", "turns": [{"text": "plain answer"}]},
    ],
    "after_tool_results": {"text": "ok"},
}


def config(url, extra=""):
    return f"""
[tools]
permission_mode = "bypassPermissions"
[providers.mock]
kind = "openai"
base_url = "{url}/v1"
model = "mock"
[subagents]
max_concurrent = 5000
{extra}
"""


class Events:
    """`GET /v1/events` read on a thread: (arrival time, kind, data) of every event."""

    def __init__(self, addr):
        self.seen = []
        self.cond = threading.Condition()
        host, port = addr.rsplit(":", 1)
        self.conn = http.client.HTTPConnection(host, int(port))
        self.conn.request("GET", "/v1/events")
        self.resp = self.conn.getresponse()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        kind = None
        while True:
            line = self.resp.readline()
            if not line:
                return
            line = line.decode().rstrip("\n")
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:") and kind:
                data = json.loads(line[5:])
                with self.cond:
                    self.seen.append((time.perf_counter(), kind, data))
                    self.cond.notify_all()

    def wait(self, match, after=0.0, timeout=30):
        """The first event at or after `after` that `match`es (waiting for it)."""
        deadline = time.perf_counter() + timeout
        with self.cond:
            while True:
                for event in self.seen:
                    if event[0] >= after and match(event[1], event[2]):
                        return event
                left = deadline - time.perf_counter()
                if left <= 0:
                    raise TimeoutError("no such event")
                self.cond.wait(left)


def post(addr, session, text):
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    t0 = time.perf_counter()
    conn.request("POST", f"/v1/sessions/{session}/messages", json.dumps({"text": text}),
                 {"content-type": "application/json"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{resp.status}: {body[:300]}")
    return t0, time.perf_counter() - t0


def ms(values):
    values = sorted(values)
    p99 = values[min(len(values) - 1, int(len(values) * 0.99))]
    return f"{statistics.median(values) * 1000:.1f} ms | {p99 * 1000:.1f} ms"


def latency(talon, samples):
    work = workdir()
    mock, url = start_mock(talon, work, SCRIPT)
    gateway, addr = start_gateway(talon, work, config(url))
    events = Events(addr)
    time.sleep(0.3)
    plain, tool, sync, to_child, to_parent = [], [], [], [], []
    for i in range(samples):
        plain.append(post(addr, f"plain-{i}", "plain")[1])
        tool.append(post(addr, f"tool-{i}", "tool one")[1])
        sync.append(post(addr, f"sync-{i}", "sync one")[1])
        session = f"spawn-{i}"
        post(addr, session, "spawn one")
        spawned = events.wait(lambda k, d: k == "child_run_started" and d["session_key"] == session)
        run = spawned[2]["run_id"]
        child = events.wait(lambda k, d: k == "run_started" and d.get("run_id") == run)
        ended = events.wait(lambda k, d: k == "child_run_finished" and d.get("run_id") == run)
        told = events.wait(lambda k, d: k == "run_started" and d["session_key"] == session
                           and d["channel"] == "announce")
        events.wait(lambda k, d: k == "run_finished" and d["session_key"] == session,
                    after=told[0])
        to_child.append(child[0] - spawned[0])
        to_parent.append(told[0] - ended[0])
    gateway.terminate()
    mock.terminate()
    print(f"Part 1: {samples} samples each, one gateway on SQLite\n")
    print("| figure | median | p99 |\n| --- | --- | --- |")
    print(f"| plain turn (1 model request) | {ms(plain)} |")
    print(f"| spawn -> the child's turn starts | {ms(to_child)} |")
    print(f"| the child's end -> the parent's announcing turn starts (1 s debounce included) | {ms(to_parent)} |")
    print(f"| turn with one datetime call (2 model requests) | {ms(tool)} |")
    print(f"| turn waiting for a child (`subagents run`: 3 model requests) | {ms(sync)} |")
    print(f"\nratios: spawn->child start / plain turn = "
          f"{statistics.median(to_child) / statistics.median(plain):.2f}; "
          f"waited child turn / one-tool turn = "
          f"{statistics.median(sync) / statistics.median(tool):.2f}")


def psql(url, sql):
    return subprocess.run(["psql", url, "-tAc", sql], capture_output=True, text=True,
                          check=True).stdout.strip()


def throughput(talon, url, parents):
    schema = f"bench_sub_{os.getpid()}"
    work = workdir()
    mock, murl = start_mock(talon, work, SCRIPT)
    os.environ["TALON_DATABASE_URL"] = url
    os.environ["TALON_DATABASE__SCHEMA"] = schema
    os.environ["TALON_ENCRYPTION_KEY"] = "33" * 32
    gateways = []
    for n in range(2):
        home = os.path.join(work, f"gw{n}")
        os.makedirs(home)
        gateways.append(start_gateway(talon, home, config(murl)))
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=16) as pool:
        list(pool.map(lambda i: post(gateways[i % 2][1], f"p-{i}", "spawn five"),
                      range(parents)))
    expected = parents * 5
    while True:
        ended = int(psql(url, f"SELECT count(*) FROM {schema}.agent_runs WHERE status = 'completed'"))
        pending = int(psql(url, f"SELECT count(*) FROM {schema}.run_outbox WHERE delivered_at = 0"))
        if ended >= expected and pending == 0:
            break
        time.sleep(0.1)
    wall = time.perf_counter() - t0
    rss = [peak_rss_mib(g[0].pid) for g in gateways]
    by_owner = psql(url, f"SELECT count(*) FROM {schema}.agent_runs")
    for g in gateways:
        g[0].terminate()
    mock.terminate()
    psql(url, f"DROP SCHEMA {schema} CASCADE")
    print(f"\nPart 2: {parents} parent turns over two gateways on PostgreSQL, {by_owner} runs\n")
    print("| figure | value |\n| --- | --- |")
    print(f"| runs started, ended and announced | {expected / wall:.0f} runs/s ({wall:.1f} s) |")
    print(f"| gateway A peak RSS | {rss[0]:.0f} MiB |")
    print(f"| gateway B peak RSS | {rss[1]:.0f} MiB |")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=40)
    parser.add_argument("--parents", type=int, default=200)
    args = parser.parse_args()
    talon = talon_binary()
    latency(talon, args.samples)
    url = os.environ.get("TALON_BENCH_DATABASE_URL")
    if url:
        throughput(talon, url, args.parents)
    else:
        print("\nset TALON_BENCH_DATABASE_URL for the two-gateway part")


if __name__ == "__main__":
    main()
