#!/usr/bin/env python3
"""A team at work (issue 25) against one agent doing the same work, on one `talon serve`
(SQLite), `talon mock-provider` answering with fixed delays: every request that does a task's
work takes WORK seconds, every other request (posting tasks, answering) STEP seconds.

  - team: the lead posts four tasks (research, draft, legal review; publish after research and
    draft), three members work them as the board allows, each result is announced to the lead;
    timed from the request until every result is in the lead's conversation;
  - one agent: the same four tasks done one after another in one turn (four work requests,
    then its answer).

Prints both wall times (median of --samples), their ratio, and the gateway's peak RSS.

With --database-url (PostgreSQL), two gateways share a fresh schema on it and each leads a team
at once (alpha from gateway A with the dependency above, beta from gateway B with four
independent tasks, three members each): the figures are the time until both teams' results are
in, and each gateway's peak RSS.

Usage: team.py [--samples 5] [--work 1.0] [--step 0.1] [--database-url postgres://...]
Needs `cargo build --release -p talon`.
"""

import argparse
import http.client
import json
import os
import statistics
import subprocess
import time

from common import peak_rss_mib, start_gateway, start_mock, talon_binary, workdir

TASKS = [
    ("research", "WORK-A research the market", []),
    ("draft", "WORK-B draft the copy", []),
    ("legal review", "WORK-D review the terms", []),
    ("publish", "WORK-C publish it", [1, 2]),
]


def script(work, step):
    work_ms, step_ms = int(work * 1000), int(step * 1000)

    def lead_turns(team, dependencies=True):
        # Task ids are the store's, shared by every team: the second team's lead cannot know
        # its ids in advance, so its four tasks are independent.
        return [
            {"tool_calls": [{"name": "team_tasks", "arguments": {
                "action": "create", "team": team, "subject": subject,
                "description": description,
                "blocked_by": blocked if dependencies else []}}], "delay_ms": step_ms}
            for subject, description, blocked in TASKS
        ] + [{"text": "Posted.", "delay_ms": step_ms}]
    solo_turns = [
        {"tool_calls": [{"name": "datetime", "arguments": {"timezone": "UTC"}}],
         "delay_ms": work_ms}
        for _ in TASKS
    ]
    solo_turns.append({"text": "All four done.", "delay_ms": step_ms})
    return {
        "conversations": [
            {"when": "[Talon] Runs you started", "last": True,
             "turns": [{"text": "noted", "delay_ms": step_ms}]},
            {"when": "WORK-", "turns": [{"text": "result of the work", "delay_ms": work_ms}]},
            {"when": "alpha plan", "turns": lead_turns("alpha")},
            {"when": "beta plan", "turns": lead_turns("beta", dependencies=False)},
            {"when": "solo plan", "turns": solo_turns},
        ],
    }


CONFIG = """
[tools]
permission_mode = "bypassPermissions"
[providers.mock]
kind = "openai"
base_url = "{url}/v1"
model = "mock"
"""


def talon_cli(talon, home, *args):
    env = dict(os.environ, HOME=home, TALON_DATA_DIR=os.path.join(home, "data"))
    env.pop("TALON_CONFIG", None)
    subprocess.run([talon, *args], cwd=home, env=env, check=True, capture_output=True)


def post(addr, session, text, agent=None):
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    body = {"text": text} if agent is None else {"text": text, "agent": agent}
    conn.request("POST", f"/v1/sessions/{session}/messages", json.dumps(body),
                 {"content-type": "application/json"})
    resp = conn.getresponse()
    body = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{resp.status}: {body[:300]}")


def get(addr, path):
    host, port = addr.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    conn.request("GET", path)
    return json.loads(conn.getresponse().read())


def database_config(url, schema):
    return f'[database]\nurl = "{url}"\nschema = "{schema}"\n'


def wait_for_team(addr, team, session):
    """Until every task of `team` completed and each result is in the lead's conversation."""
    while True:
        tasks = get(addr, f"/v1/teams/{team}/tasks?filter=all")["tasks"]
        done = len(tasks) == len(TASKS) and all(t["status"] == "completed" for t in tasks)
        if done:
            shown = json.dumps(get(addr, f"/v1/sessions/{session}"))
            if shown.count("result of the work") >= len(TASKS):
                return
        time.sleep(0.02)


def run_once(talon, work, step, database_url=None):
    """One sample: (team seconds, one-agent seconds or None, peak RSS of each gateway)."""
    home = workdir()
    mock, url = start_mock(talon, home, script(work, step))
    config = CONFIG.format(url=url)
    schema = f"bench_team_{os.getpid()}_{int(time.time() * 1000)}"
    if database_url:
        config += database_config(database_url, schema)
        os.environ["TALON_ENCRYPTION_KEY"] = "3" * 64
    os.makedirs(os.path.join(home, ".config", "talon"), exist_ok=True)
    with open(os.path.join(home, ".config", "talon", "talon.toml"), "w") as f:
        f.write(config)
    teams = {"alpha": ("default", ["ann", "bob", "cy"])}
    if database_url:
        teams["beta"] = ("lead2", ["dan", "eve", "fay"])
    for team, (lead, members) in teams.items():
        for agent in [lead, *members]:
            talon_cli(talon, home, "agents", "create", agent)
        talon_cli(talon, home, "teams", "create", team, "--lead", lead)
        for member in members:
            talon_cli(talon, home, "teams", "add", team, member)
    gateways = [start_gateway(talon, home, config)]
    if database_url:
        gateways.append(start_gateway(talon, workdir(), config))

    t0 = time.perf_counter()
    if database_url:
        # Alpha's lead posts first (so its tasks get the ids its dependency names), then beta's
        # on the other gateway while alpha's members work (beta's lead is agent lead2).
        post(gateways[0][1], "lead-alpha", "alpha plan")
        post(gateways[1][1], "lead-beta", "beta plan", "lead2")
        wait_for_team(gateways[0][1], "alpha", "lead-alpha")
        wait_for_team(gateways[1][1], "beta", "lead-beta")
        team = time.perf_counter() - t0
        solo = None
    else:
        post(gateways[0][1], "lead", "alpha plan")
        wait_for_team(gateways[0][1], "alpha", "lead")
        team = time.perf_counter() - t0
        t0 = time.perf_counter()
        post(gateways[0][1], "solo", "solo plan")
        solo = time.perf_counter() - t0
    rss = [peak_rss_mib(g.pid) for g, _ in gateways]
    for g, _ in gateways:
        g.terminate()
        g.wait()
    mock.terminate()
    if database_url:
        subprocess.run(["psql", database_url, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"],
                       check=False, capture_output=True)
    return team, solo, rss


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--work", type=float, default=1.0)
    parser.add_argument("--step", type=float, default=0.1)
    parser.add_argument("--database-url", default=None)
    args = parser.parse_args()
    talon = talon_binary()
    results = [run_once(talon, args.work, args.step, args.database_url)
               for _ in range(args.samples)]
    team = statistics.median(r[0] for r in results)
    print(f"{args.samples} samples; work request {args.work:.1f} s, other requests "
          f"{args.step:.1f} s\n")
    print("| figure | median |\n| --- | --- |")
    if args.database_url:
        print(f"| two gateways on PostgreSQL, each leading a team of 3 (4 tasks each), "
              f"every result announced | {team:.2f} s |")
        for i, name in enumerate("AB"):
            rss = max(r[2][i] for r in results)
            print(f"| gateway {name} peak RSS (VmHWM) | {rss:.0f} MiB |")
        return
    solo = statistics.median(r[1] for r in results)
    rss = max(r[2][0] for r in results)
    print(f"| team: lead posts 4 tasks, 3 members, every result announced | {team:.2f} s |")
    print(f"| one agent: the same 4 tasks in one turn | {solo:.2f} s |")
    print(f"| gateway peak RSS (VmHWM) | {rss:.0f} MiB |")
    print(f"\nratio team / one agent: {team / solo:.2f}")


if __name__ == "__main__":
    main()
