#!/usr/bin/env bash
# `search` and `glob` against ripgrep and fd, in one hyperfine run each (docs/BENCHMARKS.md).
#
# Usage: bench/tools/fs_vs_peers.sh [OLD_TALON]
#   Measures target/release/talon (or $CARGO_TARGET_DIR's) on the crates.io sources in
#   ~/.cargo/registry/src (a few hundred crates after a build) against `rg` and `fdfind`;
#   given OLD_TALON, an older build joins each run, so before and after share the machine's state.
# Needs hyperfine, ripgrep and fd-find (`apt-get install hyperfine ripgrep fd-find`).
set -euo pipefail
cd "$(dirname "$0")/../.."
new="${CARGO_TARGET_DIR:-$PWD/target}/release/talon"
old="${1:-}"
tree="${TREE:-$HOME/.cargo/registry/src}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: > "$scratch/talon.toml"
# No output cap or rate limit: every result is printed, as the peers print theirs.
export TALON_TOOLS__MAX_OUTPUT_BYTES=1000000000 TALON_TOOLS__RATE_LIMIT_PER_HOUR=0
args="--config $scratch/talon.toml --data-dir $scratch/data"
"$new" $args tool call read_file --workspace "$tree" --args '{"path":"."}' >/dev/null 2>&1 || true

run() { # name, talon tool and arguments, peer command
  local commands=("$new $args tool call $2 --workspace $tree --args '$3'")
  [ -n "$old" ] && commands+=("$old $args tool call $2 --workspace $tree --args '$3'")
  hyperfine -N --warmup 3 --runs 20 "${commands[@]}" "$4"
}
run "search -l" search '{"pattern":"fn main","output_mode":"files_with_matches","limit":100000000}' "rg -l 'fn main' $tree"
run "search -n" search '{"pattern":"unsafe fn [a-z_]+\\(","limit":100000000}' "rg -n 'unsafe fn [a-z_]+\\(' $tree"
run "glob" glob '{"pattern":"**/*.rs","limit":100000000}' "fdfind -H -I -t f -e rs . $tree"
