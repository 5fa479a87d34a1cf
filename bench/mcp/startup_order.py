#!/usr/bin/env python3
"""Writes `crates/talon/startup-order.txt`: the functions a `talon mcp` session runs, for the
linker to place side by side (see `crates/talon/build.rs`).

Rust's code generation scatters the few thousand functions a session runs over the whole of the
35 MB `.text`; every page they touch stays resident. Listed in this file, LLD lays them out
together, and `talon mcp`'s idle RSS falls by more than half (docs/BENCHMARKS.md).

Usage:
  startup_order.py            record a session under valgrind's callgrind and rewrite the file
  startup_order.py --check    report how many listed functions the current binary still has

Both use `$CARGO_TARGET_DIR/release/talon` (default `target/release/talon`); build it first with
`cargo build --release -p talon`. Recording needs valgrind. Symbol names carry hashes that depend
on the compiler version and the locked dependencies, not on source edits: re-record after a
toolchain or Cargo.lock change (`--check` shows when).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import Mcp, talon_binary  # noqa: E402

ORDER = os.path.join(ROOT, "crates", "talon", "startup-order.txt")


def defined_functions(path):
    """The code symbols defined in the binary, by their (mangled) names."""
    out = subprocess.run(["nm", "--defined-only", path], capture_output=True, text=True, check=True)
    return {parts[2] for parts in (line.split(" ", 2) for line in out.stdout.splitlines())
            if len(parts) == 3 and parts[1] in "tTwW"}


def session(talon, data_dir, workspace, out_file):
    """Runs one `talon mcp` session under callgrind: handshake, tools/list, a read_file call."""
    server = Mcp(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out_file}",
                  "--dump-instr=no", "--demangle=no",
                  talon, "--data-dir", data_dir, "mcp", "--workspace", workspace])
    server.request("tools/list", {})
    server.call("read_file", {"path": "notes.txt"})
    server.close()


def executed(out_file):
    """Function names callgrind saw run, in the order it first named them."""
    names, order = {}, []
    with open(out_file) as profile:
        for line in profile:
            match = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line)
            if not match:
                continue
            kind, ident, name = match.groups()
            if name:
                names[ident] = re.sub(r"'\d+$", "", name.strip())
            if kind == "fn" and ident not in order:
                order.append(ident)
    return [names[i] for i in order if i in names]


def record(talon):
    with tempfile.TemporaryDirectory() as scratch:
        data_dir = os.path.join(scratch, "data")
        workspace = os.path.join(scratch, "workspace")
        os.makedirs(workspace)
        with open(os.path.join(workspace, "notes.txt"), "w") as notes:
            notes.write("one line\n")
        out_file = os.path.join(scratch, "callgrind.out")
        # The first start creates the store; record the second, as a user's starts are.
        session(talon, data_dir, workspace, out_file)
        session(talon, data_dir, workspace, out_file)
        ran = executed(out_file)
    defined = defined_functions(talon)
    seen, listed = set(), []
    for name in ran:
        if name in defined and name not in seen:
            seen.add(name)
            listed.append(name)
    with open(ORDER, "w") as order:
        order.write("\n".join(listed) + "\n")
    print(f"wrote {len(listed)} functions to {os.path.relpath(ORDER, ROOT)}")


def check(talon):
    with open(ORDER) as order:
        listed = [line.strip() for line in order if line.strip()]
    defined = defined_functions(talon)
    found = sum(1 for name in listed if name in defined)
    share = found / len(listed) if listed else 0.0
    print(f"{found} of {len(listed)} listed functions are in {talon} ({share:.0%})")
    if share < 0.8:
        print("the list is stale: re-record it with bench/mcp/startup_order.py")
        sys.exit(1)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    talon = talon_binary()
    if args.check:
        check(talon)
    else:
        record(talon)


main()
