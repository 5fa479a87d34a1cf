"""An OpenAI- and Anthropic-compatible model server written apart from Talon's own mock, from the
APIs' documented streaming formats, so the providers are checked against something that shares
none of Talon's code or assumptions.

It answers by the conversation's state, so any number of clients can use it:
  no tool results yet -> two read_file calls at once (OpenAI: in Ollama's form, both with
                         `index` 0 and told apart by their ids)
  one round of results -> one write_file call
  two rounds           -> the final text, quoting what the files said
Every request body is appended to REQUEST_LOG (a JSON line each).

With a SCRIPT file it answers requests in order instead, one step each (the last repeated once
they run out): {"turns": [{"text": "..."}, {"tool_calls": [{"name": N, "arguments": {...}}]},
{"text": "...", "delay_ms": 30000}]} — the same shape as Talon's mock, read by code of its own.

Usage: independent_provider.py PORT_FILE REQUEST_LOG [SCRIPT]   (writes the port it listens on)
"""

import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def rounds(messages):
    """How many rounds of tool calls the conversation holds (assistant messages with calls)."""
    n = 0
    for m in messages:
        if m.get("role") != "assistant":
            continue
        content = m.get("content")
        if m.get("tool_calls") or (isinstance(content, list)
                                   and any(b.get("type") == "tool_use" for b in content)):
            n += 1
    return n


def results_text(messages):
    out = []
    for m in messages:
        if m.get("role") == "tool":
            out.append(m.get("content", ""))
        content = m.get("content")
        if isinstance(content, list):
            for b in content:
                if b.get("type") == "tool_result":
                    for part in b.get("content", []):
                        if part.get("type") == "text":
                            out.append(part["text"])
    return out


def plan(messages):
    r = rounds(messages)
    if r == 0:
        return {"calls": [("read_file", {"path": "a.txt"}), ("read_file", {"path": "b.txt"})]}
    if r == 1:
        return {"calls": [("write_file", {"path": "out.txt", "content": "written by the model\n"})]}
    seen = " / ".join(t.strip() for t in results_text(messages)[:2])
    return {"text": f"Files said: {seen}. Done."}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_events(self, events):
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("cache-control", "no-cache")
        self.send_header("connection", "close")
        self.end_headers()
        for e in events:
            self.wfile.write(e.encode())
            self.wfile.flush()
        self.close_connection = True

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))))
        with open(self.server.request_log, "a") as f:
            f.write(json.dumps(body) + "\n")
        if self.server.script is not None:
            step = self.server.next_step()
        else:
            step = plan(body.get("messages", []))
        if self.path.endswith("/chat/completions"):
            self.send_events(openai_events(step))
        elif self.path.endswith("/messages"):
            self.send_events(anthropic_events(step))
        else:
            self.send_response(404)
            self.send_header("content-length", "0")
            self.end_headers()


def openai_events(step):
    def chunk(delta, finish=None):
        c = {"id": "x", "object": "chat.completion.chunk", "choices": [
            {"index": 0, "delta": delta, "finish_reason": finish}]}
        return "data: " + json.dumps(c) + "\n\n"
    events = [chunk({"role": "assistant"})]
    if "text" in step:
        for word in step["text"].split(" "):
            events.append(chunk({"content": word + " "}))
        events.append(chunk({}, "stop"))
    else:
        for i, (name, args) in enumerate(step["calls"]):
            i = step.get("id_prefix", "") + str(i)
            # Ollama's form: every call at index 0, each with its own id; arguments in pieces.
            text = json.dumps(args)
            events.append(chunk({"tool_calls": [{"index": 0, "id": f"ind_{i}", "type": "function",
                                                 "function": {"name": name, "arguments": text[:5]}}]}))
            events.append(chunk({"tool_calls": [{"index": 0, "id": f"ind_{i}",
                                                 "function": {"arguments": text[5:]}}]}))
        events.append(chunk({}, "tool_calls"))
    events.append("data: [DONE]\n\n")
    return events


def anthropic_events(step):
    def ev(kind, data):
        data = dict(data, type=kind)
        return f"event: {kind}\ndata: {json.dumps(data)}\n\n"
    events = [ev("message_start", {"message": {"id": "m", "type": "message", "role": "assistant",
                                               "content": [], "usage": {"input_tokens": 7, "output_tokens": 0}}})]
    if "text" in step:
        events.append(ev("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}))
        for word in step["text"].split(" "):
            events.append(ev("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": word + " "}}))
        events.append(ev("content_block_stop", {"index": 0}))
        stop = "end_turn"
    else:
        for i, (name, args) in enumerate(step["calls"]):
            text = json.dumps(args)
            call_id = "ind_" + step.get("id_prefix", "") + str(i)
            events.append(ev("content_block_start", {"index": i, "content_block": {
                "type": "tool_use", "id": call_id, "name": name, "input": {}}}))
            for piece in (text[:4], text[4:]):
                events.append(ev("content_block_delta", {"index": i, "delta": {
                    "type": "input_json_delta", "partial_json": piece}}))
            events.append(ev("content_block_stop", {"index": i}))
        stop = "tool_use"
    events.append(ev("message_delta", {"delta": {"stop_reason": stop}, "usage": {"output_tokens": 3}}))
    events.append(ev("message_stop", {}))
    return events


class Server(ThreadingHTTPServer):
    script = None
    used = 0
    lock = threading.Lock()

    def next_step(self):
        """The next scripted turn as a step (text or calls), after its delay."""
        with self.lock:
            turns = self.script["turns"]
            turn = turns[min(self.used, len(turns) - 1)]
            n = self.used
            self.used += 1
        time.sleep(turn.get("delay_ms", 0) / 1000)
        if turn.get("tool_calls"):
            calls = [(c["name"], c.get("arguments", {})) for c in turn["tool_calls"]]
            # Ids unique across the conversation: "<request>_<call>".
            return {"calls": calls, "id_prefix": f"{n}_"}
        return {"text": turn.get("text", "")}


def main():
    port_file, request_log = sys.argv[1], sys.argv[2]
    server = Server(("127.0.0.1", 0), Handler)
    server.request_log = request_log
    if len(sys.argv) > 3:
        with open(sys.argv[3]) as f:
            server.script = json.load(f)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    import os
    os.rename(port_file + ".tmp", port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
