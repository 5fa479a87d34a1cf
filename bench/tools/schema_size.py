"""The size of the tool definitions a model receives with every request, per dialect.

Usage: python3 bench/tools/schema_size.py [TALON_BINARY]

Runs `talon tools list --json --dialect D` in a scratch home for goclaw, claude_code and both,
builds the `tools` array of an OpenAI Chat Completions request from it (what the agent loop
sends; Anthropic's is the same data under other keys), and prints the tool count and its
compact JSON size in bytes for each, with the ratio to `both` (the default before issue 23).
"""

import json
import os
import subprocess
import sys
import tempfile

binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/talon"
rows = {}
with tempfile.TemporaryDirectory() as home, tempfile.TemporaryDirectory() as data:
    os.chmod(data, 0o700)
    env = {"HOME": home, "PATH": os.environ.get("PATH", ""), "TALON_DATA_DIR": data}
    for dialect in ["both", "goclaw", "claude_code"]:
        out = subprocess.run(
            [binary, "tools", "list", "--json", "--dialect", dialect],
            env=env, cwd=home, check=True, capture_output=True, text=True,
        ).stdout
        tools = [
            {"type": "function",
             "function": {"name": t["name"], "description": t["description"],
                          "parameters": t["input_schema"]}}
            for t in json.loads(out)
        ]
        size = len(json.dumps(tools, separators=(",", ":")).encode())
        rows[dialect] = (len(tools), size)
both = rows["both"][1]
print("| tool set | tools | bytes | ratio to both |")
print("| --- | --- | --- | --- |")
for dialect, (count, size) in rows.items():
    print(f"| {dialect} | {count} | {size} | {size / both:.2f} |")
