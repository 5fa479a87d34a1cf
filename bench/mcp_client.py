"""What the benchmark scripts share: the release `talon` binary, a JSON-RPC client for one MCP
server over stdio (requests one at a time), and a process's CPU time from /proc."""

import json
import os
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

TICK = os.sysconf("SC_CLK_TCK")


def talon_binary():
    """`$CARGO_TARGET_DIR/release/talon` (default `target/release/talon`); exits if not built."""
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    talon = os.path.join(target, "release", "talon")
    if not os.path.exists(talon):
        sys.exit(f"missing {talon}: run `cargo build --release -p talon` first")
    return talon


def cpu_seconds(pid, children=False):
    """User + system time of `pid`; with `children`, plus that of the children it waited for."""
    with open(f"/proc/{pid}/stat") as f:
        # After the ")" that ends the command name, utime, stime, cutime, cstime are fields 12-15.
        fields = f.read().rsplit(")", 1)[1].split()
    own = int(fields[11]) + int(fields[12])
    waited = int(fields[13]) + int(fields[14]) if children else 0
    return (own + waited) / TICK


class Mcp:
    """An MCP server started with `command`, initialised, ready for requests."""

    def __init__(self, command, env=None, initialize=True):
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        self.next_id = 0
        if initialize:
            self.initialize()

    def initialize(self):
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        message = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError("the server exited")
            reply = json.loads(line)
            if reply.get("id") == self.next_id:
                return reply

    def call(self, tool, arguments):
        """The text of a successful `tools/call`; raises on an error result."""
        reply = self.request("tools/call", {"name": tool, "arguments": arguments})
        result = reply.get("result") or {}
        if result.get("isError") or "error" in reply:
            raise RuntimeError(f"{tool}: {reply}")
        return "".join(c.get("text", "") for c in result.get("content", []))

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()

    def stop(self):
        self.proc.kill()
        self.proc.wait()
