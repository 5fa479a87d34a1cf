"""Starting the processes the agent benchmarks need: `talon mock-provider` and `talon serve`."""

import json
import os
import re
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import talon_binary  # noqa: E402,F401  (the agent benchmarks import it from here)


def start_mock(talon, work, script):
    """`talon mock-provider` with `script`; returns (process, base URL)."""
    path = os.path.join(work, "script.json")
    with open(path, "w") as f:
        json.dump(script, f)
    proc = subprocess.Popen([talon, "mock-provider", "--script", path], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    line = proc.stdout.readline()
    url = line.strip().removeprefix("mock provider listening on ")
    return proc, url


def start_gateway(talon, work, config):
    """`talon serve` on an ephemeral port with `config` (TOML text); returns (process, address)."""
    # HOME is `work`, so this is the default configuration file (a `./talon.toml` is not read).
    os.makedirs(os.path.join(work, ".config", "talon"), exist_ok=True)
    with open(os.path.join(work, ".config", "talon", "talon.toml"), "w") as f:
        f.write(config)
    env = dict(os.environ, HOME=work, TALON_DATA_DIR=os.path.join(work, "data"), TALON_LOG="info")
    env.pop("TALON_CONFIG", None)
    proc = subprocess.Popen([talon, "serve", "--bind", "127.0.0.1:0"], cwd=work, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        m = re.search(r"addr=(\S+)", line)
        if m:
            # Keep draining stderr so the gateway never blocks on a full pipe.
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()
            return proc, m.group(1)
    sys.exit("talon serve exited before listening")


def workdir():
    return tempfile.mkdtemp(prefix="talon-agent-bench-")


def peak_rss_mib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")
