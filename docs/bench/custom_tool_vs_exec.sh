#!/usr/bin/env bash
# A custom tool's call against exec running the same command, through one running gateway
# (POST /v1/tools/invoke, the sandbox on, SQLite): the custom tool renders `wc -l < 'notes.txt'`,
# exec is given `wc -l < notes.txt`.
# Usage: docs/bench/custom_tool_vs_exec.sh [path to a release talon]  (needs curl, python3)
set -euo pipefail
talon="${1:-${CARGO_TARGET_DIR:-target}/release/talon}"
home="$(mktemp -d)"
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$home"' EXIT
export TALON_CONFIG="$home/talon.toml" XDG_DATA_HOME="$home/data"
printf '[gateway]\ntoken = "bench"\n[tools]\nrate_limit_per_hour = 0\n' > "$TALON_CONFIG"
mkdir -p "$home/ws" && seq 1 1000 > "$home/ws/notes.txt"
"$talon" custom-tools add count_lines --description "Count a file's lines." \
  --command 'wc -l < {{.path}}' --param path:string:required > /dev/null
"$talon" serve --bind 127.0.0.1:18791 --workspace "$home/ws" 2> "$home/serve.log" &
pid=$!
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:18791/healthz > /dev/null && break; sleep 0.1; done
call() {
  printf "curl -sf -H 'Authorization: Bearer bench' -H 'content-type: application/json' -d '%s' http://127.0.0.1:18791/v1/tools/invoke" "$1"
}
custom=$(call '{"tool":"count_lines","args":{"path":"notes.txt"}}')
exec_=$(call '{"tool":"exec","args":{"command":"wc -l < notes.txt"}}')
# Both must answer 1000 before they are timed.
for c in "$custom" "$exec_"; do
  out=$(bash -c "$c")
  case "$out" in *'"for_llm":"1000\n"'*) ;; *) echo "unexpected: $out" >&2; exit 1 ;; esac
done
# Interleaved (one of each per round, 400 rounds) so drift on a busy machine hits both alike;
# each call timed by curl (time_total, the whole HTTP round trip). Medians and their ratio.
for _ in $(seq 1 400); do
  for name in custom_tool exec; do
    if [ "$name" = custom_tool ]; then c="$custom"; else c="$exec_"; fi
    printf '%s %s\n' "$name" "$(bash -c "$c -o /dev/null -w '%{time_total}'")"
  done
done | python3 -c '
import collections, statistics, sys
times = collections.defaultdict(list)
for line in sys.stdin:
    name, secs = line.split()
    times[name].append(float(secs) * 1000)
for name, v in times.items():
    v.sort()
    print(f"{name}: median {statistics.median(v):.2f} ms, p90 {v[int(len(v) * 0.9)]:.2f} ms, n={len(v)}")
ratio = statistics.median(times["custom_tool"]) / statistics.median(times["exec"])
print(f"ratio custom_tool/exec (medians): {ratio:.2f}")
'
