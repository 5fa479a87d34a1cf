#!/usr/bin/env python3
"""The CI guard over the figures that do not depend on machine noise (issue 37).

Timings vary from run to run, so they are measured side by side with their peers
(docs/BENCHMARKS.md) and never asserted. What this script checks instead repeats exactly for
the same source on the same kind of machine, and the last three performance wins were lost
through exactly these figures, unseen:

- the stripped size of the default release build;
- the release link's layout: packed relative relocations (`.relr.dyn`), and the functions of
  `crates/talon/startup-order.txt` laid out in the list's order (a link without the ordering
  scatters them);
- how much of the start-up order list the binary still has (a stale list stops paying);
- instructions, counted by valgrind's callgrind, of fixed workloads: a start
  (`talon tools list`), one `search`, one `glob` and one `read_file` call through the pipeline,
  on a corpus generated here from a fixed seed.

Each figure has a budget in `bench/budgets.json`. A change that needs a larger budget raises it
in the same commit and says why in the message.

Usage:
  guard.py             check the release binary against the budgets (exit 1 on any excess)
  guard.py --record    rewrite the budgets from this binary, with the margins in the file
  guard.py --binary P  check another build against the budgets

The binary is `$CARGO_TARGET_DIR/release/talon` (default `target/release/talon`): build it first
with `cargo build --release -p talon`. Needs valgrind and binutils (`nm`, `readelf`, `strip`).
"""

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import talon_binary  # noqa: E402

BUDGETS = os.path.join(ROOT, "bench", "budgets.json")
ORDER = os.path.join(ROOT, "crates", "talon", "startup-order.txt")

# Words the generated corpus is written in; `search` looks for the rarer ones.
WORDS = ("fn let mut self impl struct enum match return where pub use mod trait async await "
         "Some None Ok Err Vec String usize u64 i32 bool true false loop while for in as ref "
         "unsafe extern const static type dyn move crate super").split()


def corpus(root):
    """A fixed tree: 40 crates of 3 modules of 50 files each, text from a seeded generator."""
    rng = random.Random(37)
    for c in range(40):
        for m in range(3):
            directory = os.path.join(root, f"crate{c:02}", "src", f"mod{m}")
            os.makedirs(directory)
            for f in range(50):
                lines = []
                for _ in range(rng.randint(20, 80)):
                    lines.append(" ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12))))
                name = f"file{f:02}.rs" if f % 5 else f"notes{f:02}.md"
                with open(os.path.join(directory, name), "w") as out:
                    out.write("\n".join(lines) + "\n")


# Runs of each workload; the fewest instructions among them is its figure. The count of one run
# is exact, but a process opens a further SQLite connection (about 3 million instructions: the
# schema is parsed anew) whenever two of its tasks want one at once, and walker threads steal
# work in a different order; the least of three runs is the work itself.
RUNS = 3


def instructions(command, env, cwd, scratch):
    """Instructions `command` runs, all threads together, as callgrind counts them."""
    log = os.path.join(scratch, "callgrind.log")
    counts = []
    for _ in range(RUNS):
        subprocess.run(
            ["valgrind", "--tool=callgrind", "--fair-sched=yes", "--callgrind-out-file=/dev/null",
             f"--log-file={log}"]
            + command,
            env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        with open(log) as text:
            found = re.search(r"Collected : (\d+)", text.read())
        if not found:
            sys.exit(f"callgrind counted nothing for {command}")
        counts.append(int(found.group(1)))
    return min(counts)


def workloads(talon):
    """Instruction counts of the fixed workloads, by name."""
    with tempfile.TemporaryDirectory() as scratch:
        tree = os.path.join(scratch, "tree")
        corpus(tree)
        config = os.path.join(scratch, "talon.toml")
        open(config, "w").close()
        data = os.path.join(scratch, "data")
        # No user's files or settings: a home of its own, the default configuration.
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": scratch,
               "LANG": "C.UTF-8"}
        base = [talon, "--config", config, "--data-dir", data]

        def call(tool, arguments):
            return base + ["tool", "call", tool, "--workspace", tree,
                           "--args", json.dumps(arguments)]

        # The first start creates the store; a user's starts find it made. Commands run in the
        # tree: without --workspace, it is the workspace.
        subprocess.run(base + ["tools", "list"], env=env, cwd=tree, stdout=subprocess.DEVNULL,
                       check=True)

        def count(command):
            return instructions(command, env, tree, scratch)

        return {
            "start": count(base + ["tools", "list"]),
            "search": count(call("search", {"pattern": "unsafe extern", "limit": 100000})),
            "glob": count(call("glob", {"pattern": "**/*.rs", "limit": 100000})),
            "read_file": count(call("read_file", {"path": "crate00/src/mod0/file01.rs"})),
        }


def stripped_size(talon):
    with tempfile.TemporaryDirectory() as scratch:
        out = os.path.join(scratch, "talon")
        subprocess.run(["strip", "-o", out, talon], check=True)
        return os.path.getsize(out)


def symbols(talon):
    """Defined code symbols and their addresses."""
    out = subprocess.run(["nm", "--defined-only", talon], capture_output=True, text=True,
                         check=True).stdout
    found = {}
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[1] in "tTwW":
            found[parts[2]] = int(parts[0], 16)
    return found


def layout(talon):
    """(share of the order list the binary has, share of its consecutive pairs laid out in
    order, whether relocations are packed)."""
    with open(ORDER) as order:
        listed = [line.strip() for line in order if line.strip()]
    defined = symbols(talon)
    addresses = [defined[name] for name in listed if name in defined]
    coverage = len(addresses) / len(listed) if listed else 0.0
    pairs = list(zip(addresses, addresses[1:]))
    in_order = sum(1 for a, b in pairs if b >= a) / len(pairs) if pairs else 0.0
    sections = subprocess.run(["readelf", "-S", "-W", talon], capture_output=True, text=True,
                              check=True).stdout
    return coverage, in_order, ".relr.dyn" in sections


def measure(talon):
    coverage, in_order, relr = layout(talon)
    return {
        "stripped_bytes": stripped_size(talon),
        "startup_order_coverage": round(coverage, 4),
        "startup_order_in_order": round(in_order, 4),
        "packed_relocations": relr,
        "instructions": workloads(talon),
    }


def check(figures, budgets):
    """The figures over their budgets, as lines saying what and by how much."""
    over = []
    if figures["stripped_bytes"] > budgets["stripped_bytes"]:
        over.append(f"stripped binary {figures['stripped_bytes']:,} bytes > budget "
                    f"{budgets['stripped_bytes']:,}")
    if not figures["packed_relocations"]:
        over.append("no .relr.dyn: the release link lost packed relative relocations "
                    "(crates/talon/build.rs)")
    if figures["startup_order_coverage"] < budgets["startup_order_min_coverage"]:
        over.append(f"start-up order list {figures['startup_order_coverage']:.0%} present < "
                    f"{budgets['startup_order_min_coverage']:.0%}: re-record it "
                    "(bench/mcp/startup_order.py)")
    if figures["startup_order_in_order"] < budgets["startup_order_min_in_order"]:
        over.append(f"start-up functions {figures['startup_order_in_order']:.0%} in list order "
                    f"< {budgets['startup_order_min_in_order']:.0%}: the link ignored the "
                    "symbol ordering (crates/talon/build.rs)")
    for name, count in figures["instructions"].items():
        budget = budgets["instructions"].get(name)
        if budget is None:
            over.append(f"{name}: no budget recorded")
        elif count > budget:
            over.append(f"{name}: {count:,} instructions > budget {budget:,} "
                        f"(+{count / budget - 1:.1%})")
    return over


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--record", action="store_true",
                        help="rewrite bench/budgets.json from this binary")
    parser.add_argument("--binary", metavar="PATH",
                        help="check this build instead (an older one, say, to see what it fails)")
    args = parser.parse_args()
    talon = args.binary or talon_binary()
    with open(BUDGETS) as f:
        budgets = json.load(f)
    figures = measure(talon)
    print(json.dumps(figures, indent=2))
    if args.record:
        size_margin = budgets["margins"]["stripped_bytes"]
        count_margin = budgets["margins"]["instructions"]
        budgets["stripped_bytes"] = int(figures["stripped_bytes"] * (1 + size_margin))
        # On top of the margin, room for one further SQLite connection (see RUNS).
        allowance = budgets["margins"]["connection_instructions"]
        budgets["instructions"] = {name: int(count * (1 + count_margin)) + allowance
                                   for name, count in figures["instructions"].items()}
        budgets["recorded"] = figures
        with open(BUDGETS, "w") as f:
            json.dump(budgets, f, indent=2)
            f.write("\n")
        print(f"wrote {os.path.relpath(BUDGETS, ROOT)}")
        return
    over = check(figures, budgets)
    for line in over:
        print(f"guard: {line}", file=sys.stderr)
    if over:
        sys.exit(1)
    print("guard: every figure is within its budget")


main()
