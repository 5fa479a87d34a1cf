#!/bin/bash
# The CPU an idle `talon serve` uses with no jobs and with 10,000 jobs none of which is due
# (docs/BENCHMARKS.md, "The idle scheduler"): utime+stime from /proc/<pid>/stat over 120 s,
# after 10 s to settle, on SQLite and, with PG=postgres://…, on PostgreSQL.
#
#   cargo build -p talon && cargo build --release -p talon-store --example cron_bench
#   PG=postgres://postgres@127.0.0.1:5432/test bench/cron/idle_cpu.sh
#
# TARGET (default ./target) is where both were built; BIN overrides the talon binary.
set -euo pipefail
TARGET=${TARGET:-$(pwd)/target}
BIN=${BIN:-$TARGET/debug/talon}
FILL=$TARGET/release/examples/cron_bench
ROOT=$(mktemp -d /tmp/cronidle.XXXX)
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT/home" "$ROOT/data"
cd "$ROOT/home"
ticks() { awk '{print $14+$15}' "/proc/$1/stat"; }
measure() { # label, then extra environment
  local label=$1
  shift
  env -i PATH="$PATH" HOME="$ROOT/home" TALON_DATA_DIR="$ROOT/data" "$@" \
    "$BIN" serve --bind 127.0.0.1:0 2>"$ROOT/serve-$label.log" &
  local pid=$!
  sleep 10
  local a b rss
  a=$(ticks $pid)
  sleep 120
  b=$(ticks $pid)
  rss=$(awk '/VmRSS/{print $2}' "/proc/$pid/status")
  kill -TERM $pid
  wait $pid || true
  echo "$label: $((b - a)) ticks (1/$(getconf CLK_TCK) s) of CPU in 120 s, RSS ${rss} kB"
}
measure sqlite-0-jobs
TALON_BENCH_FILL_URL="sqlite://$ROOT/data/talon.db?mode=rwc" "$FILL"
measure sqlite-10000-jobs
if [ -n "${PG:-}" ]; then
  schema=idle_cron_$$
  key=2222222222222222222222222222222222222222222222222222222222222222
  pg=(TALON_DATABASE_URL="$PG" TALON_DATABASE__SCHEMA=$schema TALON_ENCRYPTION_KEY=$key)
  measure pg-0-jobs "${pg[@]}"
  TALON_BENCH_FILL_URL="$PG" TALON_BENCH_FILL_SCHEMA=$schema "$FILL"
  measure pg-10000-jobs "${pg[@]}"
  psql "$PG" -c "DROP SCHEMA $schema CASCADE" >/dev/null
fi
