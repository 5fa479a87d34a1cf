#!/usr/bin/env python3
"""Streaming pass-through: a streamed answer through `talon serve`'s /v1/chat/completions against
the same answer streamed by the mock provider directly, same run, interleaved.

The mock sends its first token at once and the next ones 20 ms apart. For each request the
client records when each token arrives. Through Talon, every later token arrives after the
first by the same spacing as directly, so the difference in first-token time is Talon's whole
cost before and around the first token (request handling, the tool set, the provider request)
and bounds what it adds to each token passed on (target <= 1 ms first token in -> first token out).

Usage: stream_passthrough.py [--requests 50]
Needs `cargo build --release -p talon`.
"""

import argparse
import http.client
import json
import statistics
import time

from common import start_gateway, start_mock, talon_binary, workdir

WORDS = "one two three four five six seven eight"


def stream(host, port, path, body):
    """Arrival times (s after sending) of each content token."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    t0 = time.perf_counter()
    conn.request("POST", path, json.dumps(body), {"content-type": "application/json"})
    resp = conn.getresponse()
    times = []
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: "):
            continue
        data = line[6:]
        if data == b"[DONE]":
            break
        chunk = json.loads(data)
        choices = chunk.get("choices") or []
        if choices and choices[0].get("delta", {}).get("content"):
            times.append(time.perf_counter() - t0)
    conn.close()
    return times


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args()
    talon = talon_binary()
    work = workdir()
    mock, url = start_mock(talon, work, {
        "repeat_last": True, "turns": [{"text": WORDS, "chunk_delay_ms": 20}]})
    gateway, addr = start_gateway(talon, work, f"""
[providers.mock]
kind = "openai"
base_url = "{url}/v1"
model = "mock"
""")
    mhost, mport = url.removeprefix("http://").rsplit(":", 1)
    ghost, gport = addr.rsplit(":", 1)
    # Through Talon, `model` names the agent.
    body = {"model": "mock", "stream": True, "messages": [{"role": "user", "content": "go"}]}
    talon_body = dict(body, model="default")
    direct, through, gaps = [], [], []
    for i in range(args.requests + 5):
        d = stream(mhost, int(mport), "/v1/chat/completions", body)
        t = stream(ghost, int(gport), "/v1/chat/completions", talon_body)
        if i < 5:
            continue  # warm-up
        assert len(d) == len(t) and len(d) >= 4, (d, t)
        direct.append(d[0])
        through.append(t[0])
        # Each later token's delay after the first, through Talon minus directly.
        gaps.extend((t[k] - t[0]) - (d[k] - d[0]) for k in range(1, len(d)))
    gateway.terminate()
    mock.terminate()
    md, mt = statistics.median(direct) * 1000, statistics.median(through) * 1000
    print(f"{args.requests} streamed answers each, interleaved; {len(WORDS.split())} tokens, 20 ms apart")
    print("| path | median first token, ms |")
    print("| --- | --- |")
    print(f"| directly from the mock provider | {md:.2f} |")
    print(f"| through talon serve /v1/chat/completions | {mt:.2f} |")
    print(f"\nfirst token: Talon adds {mt - md:.2f} ms (request handling, tool set, provider request)")
    print(f"later tokens: median extra delay per token passed on {statistics.median(gaps) * 1000:.3f} ms")


if __name__ == "__main__":
    main()
