#!/usr/bin/env python3
"""Whole-process wall time of one sandboxed command, interleaved: `talon tool call exec`
(bubblewrap) against OpenAI Codex's `codex sandbox -- /bin/true`, and Talon with the sandbox off,
each run once per round in turn so that drifting machine load falls on all of them alike.
Prints medians and the ratio talon/codex (target <= 1/3).

Usage: whole_process.py [--rounds N]
Needs `cargo build --release -p talon` (CARGO_TARGET_DIR is honoured), bubblewrap and npm (the
Codex CLI is installed into the target directory on first use, as whole_process.sh does).
"""

import argparse
import glob
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))


def codex(target):
    home = os.path.join(target, "bench-codex")
    if not os.path.exists(os.path.join(home, "node_modules", ".bin", "codex")):
        os.makedirs(home, exist_ok=True)
        subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--silent", "@openai/codex"],
                       cwd=home, check=True, stdout=subprocess.DEVNULL)
    found = sorted(glob.glob(os.path.join(home, "node_modules", "@openai", "**", "bin", "codex"),
                             recursive=True))
    found = [f for f in found if os.path.isfile(f) and os.access(f, os.X_OK)]
    if not found:
        sys.exit("the @openai/codex package ships no native codex binary here")
    return found[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=100)
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    talon = os.path.join(target, "release", "talon")
    if not os.path.exists(talon):
        sys.exit(f"missing {talon}: run `cargo build --release -p talon` first")
    work = tempfile.mkdtemp(prefix="talon-whole-")
    ws, data = os.path.join(work, "ws"), os.path.join(work, "data")
    os.makedirs(ws)
    env = dict(os.environ, TALON_DATA_DIR=data)
    call = [talon, "tool", "call", "exec", "--args", '{"command":"/bin/true"}']
    commands = {
        "talon tool call exec /bin/true (bubblewrap)": (call, env),
        "codex sandbox -- /bin/true": ([codex(target), "sandbox", "--", "/bin/true"], env),
        "talon tool call exec /bin/true (sandbox off)": (call, dict(env, TALON_EXEC__SANDBOX="off")),
    }
    times = {name: [] for name in commands}
    for round_ in range(args.rounds + 5):
        for name, (argv, cmd_env) in commands.items():
            t0 = time.perf_counter()
            subprocess.run(argv, cwd=ws, env=cmd_env, check=True,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if round_ >= 5:  # the first rounds warm caches up
                times[name].append(time.perf_counter() - t0)
    print(f"{args.rounds} rounds, each command once per round in turn; median wall time")
    print("| command | ms |")
    print("| --- | --- |")
    med = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, ms in med.items():
        print(f"| {name} | {ms:.2f} |")
    talon_ms = med["talon tool call exec /bin/true (bubblewrap)"]
    codex_ms = med["codex sandbox -- /bin/true"]
    print(f"\ntalon sandboxed / codex sandbox: {talon_ms / codex_ms:.2f} (target <= 0.33)")


main()
