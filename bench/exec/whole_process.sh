#!/bin/sh
# Whole-process time of one sandboxed command: `talon tool call exec` (bubblewrap) against
# OpenAI Codex's `codex sandbox -- /bin/true` (npm @openai/codex, which ships the native
# binary), in the same hyperfine run. Needs `cargo build --release -p talon`, bubblewrap,
# hyperfine and npm.
set -eu
TARGET=${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}
TALON="$TARGET/release/talon"
CODEX_DIR="$TARGET/bench-codex"
if [ ! -x "$CODEX_DIR/node_modules/.bin/codex" ]; then
    mkdir -p "$CODEX_DIR"
    (cd "$CODEX_DIR" && npm install --no-audit --no-fund --silent @openai/codex >/dev/null)
fi
CODEX=$(find "$CODEX_DIR/node_modules/@openai" -path '*/bin/codex' -type f | head -1)
WORK=$(mktemp -d)
mkdir -p "$WORK/ws" "$WORK/data"
cd "$WORK/ws"
export TALON_DATA_DIR="$WORK/data"
"$TALON" tool call exec --args '{"command":"/bin/true"}' >/dev/null 2>&1
"$CODEX" --version
hyperfine -N --warmup 5 --runs "${RUNS:-100}" \
    -n "talon tool call exec /bin/true (bubblewrap)" "$TALON tool call exec --args '{\"command\":\"/bin/true\"}'" \
    -n "codex sandbox -- /bin/true" "$CODEX sandbox -- /bin/true" \
    -n "talon tool call exec /bin/true (sandbox off)" "env TALON_EXEC__SANDBOX=off $TALON tool call exec --args '{\"command\":\"/bin/true\"}'"
rm -rf "$WORK"
