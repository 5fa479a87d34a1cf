#!/usr/bin/env bash
# A custom tool's call against exec running the same command, through one running gateway
# (POST /v1/tools/invoke, the sandbox on, SQLite): the custom tool renders `wc -l < 'notes.txt'`,
# exec is given `wc -l < notes.txt`.
# Usage: docs/bench/custom_tool_vs_exec.sh [path to a release talon]  (needs curl, hyperfine)
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
hyperfine -N --warmup 20 --runs 300 -n custom_tool "$custom" -n exec "$exec_"
