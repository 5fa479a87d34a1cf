#!/usr/bin/env python3
"""`web_fetch` through `talon mcp` against the reference MCP fetch server (PyPI
`mcp-server-fetch`), same local pages, same client, same run: wall time per call, server CPU per
call, and main-content extraction on fixture articles (share of the article's sentences kept,
share of the page chrome dropped).

Usage: fetch_calls.py [--calls N]
Needs `cargo build --release -p talon` (CARGO_TARGET_DIR is honoured) and pip: mcp-server-fetch
is installed into the target directory on first use. Every page is served by this script on
127.0.0.1; nothing leaves the machine. Each call asks for a distinct URL (a query string), so
neither server answers from a cache.
"""

import argparse
import http.server
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from mcp_client import Mcp, cpu_seconds  # noqa: E402

ARTICLES = [
    ("Tides of the North Sea", [
        "The North Sea has a complex tidal system driven by the Atlantic Ocean.",
        "Amphidromic points, where the tidal range is nearly zero, rotate the tide around the basin.",
        "Near the Dutch coast the tidal range is small, while the Wash sees ranges of six metres.",
        "Storm surges add to spring tides and have flooded the lowlands many times in history.",
        "Engineers answered the 1953 flood with the Delta Works, a chain of dams and barriers.",
        "The Oosterscheldekering closes only when a storm surge threatens the land behind it.",
    ]),
    ("How sourdough rises", [
        "A sourdough starter is a culture of wild yeasts and lactic acid bacteria living in flour and water.",
        "The yeasts produce carbon dioxide, which the gluten network traps as the dough proves.",
        "Lactic and acetic acids give the bread its sour taste and help it keep for longer.",
        "A cool, slow prove develops more flavour than a warm and quick one does.",
        "Bakers judge readiness by the dough's volume and by how it springs back when pressed.",
        "Steam in the first minutes of baking keeps the crust soft so the loaf can expand.",
    ]),
    ("The life of a comet", [
        "Comets are icy bodies left over from the formation of the solar system.",
        "Most long-period comets come from the Oort cloud, far beyond the orbit of Neptune.",
        "Near the Sun, the ices sublimate and release dust, forming a bright coma around the nucleus.",
        "Solar radiation pushes the dust into a curved tail, while the solar wind shapes an ion tail.",
        "Each passage costs a comet some of its ice, so periodic comets slowly fade over time.",
        "Some comets break apart entirely, leaving streams of debris that cause meteor showers.",
    ]),
]

CHROME = [
    "Subscribe to our weekly newsletter for exclusive deals",
    "Accept all cookies to continue browsing",
    "Shop the spring catalogue now",
    "Follow us on every social network",
    "Copyright Example Media Group, all rights reserved",
    "Related: ten celebrities you will not believe",
]



def workspace(work):
    """The agent's workspace: a directory of its own inside `work`, because Talon refuses to start
    with its configuration file or data directory inside the workspace."""
    path = os.path.join(work, "ws")
    os.makedirs(path, exist_ok=True)
    return path

def page(title, sentences):
    nav = "".join(f'<li><a href="/s{i}">{c}</a></li>' for i, c in enumerate(CHROME[:3]))
    body = "".join(f"<p>{s} {s.lower()}</p>" for s in sentences)
    return f"""<!DOCTYPE html><html><head><title>{title}</title>
<style>.menu{{color:red}}</style><script>var tracking = 1;</script></head><body>
<header><nav class="menu"><ul>{nav}</ul></nav></header>
<div class="sidebar"><aside><h3>Trending</h3><p>{CHROME[5]}</p><p>{CHROME[3]}</p></aside></div>
<main><article><h1>{title}</h1>{body}</article></main>
<footer><p>{CHROME[4]}</p><p><a href="/privacy">Privacy</a> <a href="/terms">Terms</a></p></footer>
</body></html>""".encode()


PAGES = {f"/a{i}.html": page(t, s) for i, (t, s) in enumerate(ARTICLES)}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = PAGES.get(self.path.split("?")[0])
        if body is None:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def fetch_server(target):
    home = os.path.join(target, "bench-py")
    if not os.path.isdir(os.path.join(home, "mcp_server_fetch")):
        subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--target", home,
                        "mcp-server-fetch"], check=True)
    env = dict(os.environ, PYTHONPATH=home)
    return [sys.executable, "-m", "mcp_server_fetch", "--ignore-robots-txt", "--allow-private-ips"], env


def quality(text, article):
    """Share of `article`'s sentences in `text`, and share of the chrome phrases not in it."""
    norm = " ".join(text.split())
    sentences = ARTICLES[article][1]
    kept = sum(s in norm for s in sentences) / len(sentences)
    dropped = sum(c not in norm for c in CHROME) / len(CHROME)
    return kept, dropped


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    talon = os.path.join(target, "release", "talon")
    if not os.path.exists(talon):
        sys.exit(f"missing {talon}: run `cargo build --release -p talon` first")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = httpd.server_address[1]
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    work = tempfile.mkdtemp(prefix="talon-web-bench-")
    config = os.path.join(work, "talon.toml")
    with open(config, "w") as f:
        f.write(f'[web]\nallow_private = ["127.0.0.1"]\nallowed_ports = [{port}]\n'
                '[tools]\npermission_mode = "bypassPermissions"\nrate_limit_per_hour = 0\n')
    env = dict(os.environ, TALON_CONFIG=config)
    servers = {
        "talon mcp (web_fetch)": (Mcp([talon, "--data-dir", os.path.join(work, "data"), "mcp",
                                          "--workspace", workspace(work)], env), "web_fetch",
                                  lambda u: {"url": u, "maxChars": 100000}),
        "mcp-server-fetch (fetch)": (Mcp(*fetch_server(target)), "fetch",
                                     lambda u: {"url": u, "max_length": 100000}),
    }
    base = f"http://127.0.0.1:{port}"
    # Extraction quality, one fetch per article.
    report = {}
    for name, (server, tool, make) in servers.items():
        kept_all, dropped_all = [], []
        for i, path in enumerate(PAGES):
            kept, dropped = quality(server.call(tool, make(f"{base}{path}?q=0")), i)
            kept_all.append(kept)
            dropped_all.append(dropped)
        report[name] = (statistics.mean(kept_all) if kept_all else 0.0,
                        statistics.mean(dropped_all))
    # Speed: interleaved calls on distinct URLs.
    times = {name: [] for name in servers}
    cpu = {name: 0.0 for name in servers}
    cpu_all = {name: 0.0 for name in servers}
    paths = list(PAGES)
    for name, (server, tool, make) in servers.items():
        for i in range(5):
            server.call(tool, make(f"{base}{paths[i % 3]}?warm={i}"))
    for name, (server, _, _) in servers.items():
        cpu[name] = -cpu_seconds(server.proc.pid)
        cpu_all[name] = -cpu_seconds(server.proc.pid, children=True)
    for i in range(args.calls):
        for name, (server, tool, make) in servers.items():
            t0 = time.perf_counter()
            server.call(tool, make(f"{base}{paths[i % 3]}?i={i}"))
            times[name].append(time.perf_counter() - t0)
    for name, (server, _, _) in servers.items():
        cpu[name] += cpu_seconds(server.proc.pid)
        cpu_all[name] += cpu_seconds(server.proc.pid, children=True)
        server.stop()
    httpd.shutdown()
    print(f"{args.calls} calls each, interleaved, distinct URLs on a local server")
    print("| server | median ms per call | server CPU ms per call | with its child processes | article sentences kept | chrome dropped |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name in servers:
        kept, dropped = report[name]
        print(f"| {name} | {statistics.median(times[name]) * 1000:.2f} | "
              f"{cpu[name] / args.calls * 1000:.2f} | {cpu_all[name] / args.calls * 1000:.2f} | "
              f"{kept:.0%} | {dropped:.0%} |")
    names = list(servers)
    print(f"\nserver CPU per call, mcp-server-fetch / talon: "
          f"{cpu[names[1]] / max(cpu[names[0]], 1e-9):.1f}x own process, "
          f"{cpu_all[names[1]] / max(cpu_all[names[0]], 1e-9):.1f}x with children (target >= 5x)")


main()
