#!/usr/bin/env python3
"""A local OAuth 2.1 authorization server and an MCP server it protects, for the login tests.

  /.well-known/oauth-protected-resource[/mcp]   RFC 9728 metadata naming this server as the AS
  /.well-known/oauth-authorization-server       RFC 8414 metadata (S256, DCR, refresh tokens)
  /register                                     dynamic client registration (public clients)
  /authorize                                    approves at once: redirects with a code (the
                                                "user" always consents)
  /token                                        authorization_code (PKCE S256 and `resource`
                                                checked) and refresh_token (rotated: a refresh
                                                token works once)
  /mcp                                          streamable HTTP MCP (JSON answers): tool `whoami`;
                                                401 with a WWW-Authenticate challenge without a
                                                valid, unexpired access token
  /stats                                        counts, for the tests

Access tokens live EXPIRES seconds (env, default 3600). PREREGISTERED (env) names a client id
known without registration. Prints "PORT <n>" when listening.
"""

import base64
import hashlib
import json
import os
import secrets
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

EXPIRES = int(os.environ.get("EXPIRES", "3600"))
lock = threading.Lock()
clients = {}      # client_id -> redirect_uris
if os.environ.get("PREREGISTERED"):
    clients[os.environ["PREREGISTERED"]] = []
codes = {}        # code -> (client_id, redirect_uri, challenge, resource, scope)
access = {}       # token -> (client_id, expires_at)
refresh = {}      # token -> client_id (removed when used)
stats = {"registrations": 0, "authorizations": 0, "token_exchanges": 0, "refreshes": 0,
         "rejected_refreshes": 0, "mcp_401": 0, "resource_params": []}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_port}"

    def reply(self, status, body=None, headers=None, content_type="application/json"):
        data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if body is not None:
            self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def do_GET(self):
        url = urlparse(self.path)
        base = self.base()
        if url.path.startswith("/.well-known/oauth-protected-resource"):
            return self.reply(200, {"resource": f"{base}/mcp", "authorization_servers": [base],
                                    "scopes_supported": ["mcp"], "bearer_methods_supported": ["header"]})
        if url.path.startswith("/.well-known/oauth-authorization-server") or \
                url.path.startswith("/.well-known/openid-configuration"):
            return self.reply(200, {
                "issuer": base, "authorization_endpoint": f"{base}/authorize",
                "token_endpoint": f"{base}/token", "registration_endpoint": f"{base}/register",
                "response_types_supported": ["code"],
                "grant_types_supported": ["authorization_code", "refresh_token"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp"]})
        if url.path == "/authorize":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            with lock:
                known = q.get("client_id") in clients
            if not known or q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
                return self.reply(400, {"error": "invalid_request"})
            code = secrets.token_urlsafe(16)
            with lock:
                codes[code] = (q["client_id"], q["redirect_uri"], q["code_challenge"],
                               q.get("resource"), q.get("scope", ""))
                stats["authorizations"] += 1
                stats["resource_params"].append(q.get("resource"))
            target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
            return self.reply(302, headers={"Location": target})
        if url.path == "/stats":
            with lock:
                return self.reply(200, stats)
        if url.path == "/mcp":
            return self.reply(405, {"error": "no event stream here"})
        return self.reply(404, {"error": "not found"})

    def do_DELETE(self):
        self.reply(405)

    def do_POST(self):
        url = urlparse(self.path)
        raw = self.body()
        if url.path == "/register":
            meta = json.loads(raw or b"{}")
            client_id = "client-" + secrets.token_hex(4)
            with lock:
                clients[client_id] = meta.get("redirect_uris", [])
                stats["registrations"] += 1
            return self.reply(201, dict(meta, client_id=client_id, token_endpoint_auth_method="none",
                                        client_id_issued_at=int(time.time())))
        if url.path == "/token":
            form = {k: v[0] for k, v in parse_qs(raw.decode()).items()}
            grant = form.get("grant_type")
            with lock:
                if grant == "authorization_code":
                    entry = codes.pop(form.get("code", ""), None)
                    if entry is None:
                        return self.reply(400, {"error": "invalid_grant"})
                    client_id, redirect_uri, challenge, resource, scope = entry
                    verifier = form.get("code_verifier", "")
                    computed = base64.urlsafe_b64encode(
                        hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
                    if computed != challenge or form.get("redirect_uri") != redirect_uri:
                        return self.reply(400, {"error": "invalid_grant", "error_description": "PKCE"})
                    if resource is not None and form.get("resource") not in (None, resource):
                        return self.reply(400, {"error": "invalid_target"})
                    stats["token_exchanges"] += 1
                elif grant == "refresh_token":
                    client_id = refresh.pop(form.get("refresh_token", ""), None)
                    if client_id is None:
                        stats["rejected_refreshes"] += 1
                        return self.reply(400, {"error": "invalid_grant"})
                    stats["refreshes"] += 1
                else:
                    return self.reply(400, {"error": "unsupported_grant_type"})
                token, renewal = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
                access[token] = (client_id, time.time() + EXPIRES)
                refresh[renewal] = client_id
            return self.reply(200, {"access_token": token, "token_type": "Bearer",
                                    "expires_in": EXPIRES, "refresh_token": renewal, "scope": "mcp"})
        if url.path == "/mcp":
            return self.mcp(raw)
        return self.reply(404, {"error": "not found"})

    def mcp(self, raw):
        auth = self.headers.get("Authorization", "")
        token = auth[7:] if auth.startswith("Bearer ") else ""
        with lock:
            entry = access.get(token)
            valid = entry is not None and entry[1] > time.time()
            if not valid:
                stats["mcp_401"] += 1
            refreshes = stats["refreshes"]
        if not valid:
            challenge = (f'Bearer resource_metadata="{self.base()}/.well-known/oauth-protected-resource/mcp", '
                         'scope="mcp"')
            return self.reply(401, {"error": "invalid_token"}, {"WWW-Authenticate": challenge})
        msg = json.loads(raw)
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            return self.reply(202)
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"],
                      "capabilities": {"tools": {}}, "serverInfo": {"name": "protected", "version": "1"}}
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": result},
                              {"Mcp-Session-Id": "s-" + secrets.token_hex(4)})
        if method == "tools/list":
            tool = {"name": "whoami", "description": "Says which client called.",
                    "inputSchema": {"type": "object", "properties": {}},
                    "annotations": {"readOnlyHint": True}}
            return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {"tools": [tool]}})
        if method == "tools/call":
            text = f"hello {entry[0]} (refreshes so far: {refreshes})"
            return self.reply(200, {"jsonrpc": "2.0", "id": rid,
                                    "result": {"content": [{"type": "text", "text": text}]}})
        return self.reply(200, {"jsonrpc": "2.0", "id": rid, "result": {}})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(f"PORT {server.server_port}", flush=True)
server.serve_forever()
