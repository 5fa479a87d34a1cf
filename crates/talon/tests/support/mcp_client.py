"""A real MCP client (the official Python SDK) driving Talon's MCP server.

Usage:
  mcp_client.py stdio TALON_BINARY [ARGS...]
  mcp_client.py stdio-auto TALON_BINARY [ARGS...]
  mcp_client.py http URL [BEARER_TOKEN]

`stdio` drives the initialize handshake with the low-level session; `stdio-auto` uses the SDK's
high-level `Client` as an application would, which negotiates the newest protocol it can.

Lists the tools, makes a few calls, and prints one JSON document with what it saw; the Rust
integration tests assert on it.
"""

import asyncio
import json
import sys

from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client


def attr(obj, *names):
    """The SDK renamed fields from camelCase (1.x) to snake_case (2.x); accept either."""
    for name in names:
        if obj is not None and hasattr(type(obj), "model_fields") and name in type(obj).model_fields:
            return getattr(obj, name)
    return None


def text_of(result):
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def exercise(session):
    await session.initialize()
    listed = await session.list_tools()
    tools = {
        t.name: {
            "description": t.description,
            "schema": attr(t, "input_schema", "inputSchema"),
            "read_only": bool(attr(attr(t, "annotations"), "read_only_hint", "readOnlyHint")),
        }
        for t in listed.tools
    }
    calls = {}
    for name, args in [
        ("datetime", {"timezone": "Asia/Tokyo"}),
        ("datetime", {"timezone": "Mars/Base"}),
        ("TodoWrite", {"todos": [{"content": "Test MCP", "status": "in_progress", "activeForm": "Testing MCP"}]}),
        ("TodoWrite", {"todos": [{"content": "x", "status": "bogus", "activeForm": "x"}]}),
        ("no_such_tool", {}),
        ("read_file", {"path": "Cargo.toml", "limit": 3}),
        ("Read", {"file_path": "../../../../etc/passwd"}),
    ]:
        result = await session.call_tool(name, args)
        calls.setdefault(name, []).append({"is_error": bool(attr(result, "is_error", "isError")), "text": text_of(result)})
    return {"tools": tools, "calls": calls}


async def exercise_client(client):
    """What an application does with the high-level client, and the protocol it settled on."""
    names = sorted(t.name for t in (await client.list_tools()).tools)
    calls = {}
    for name, args in [("datetime", {"timezone": "Asia/Tokyo"}), ("read_file", {"path": "Cargo.toml", "limit": 1})]:
        result = await client.call_tool(name, args)
        calls[name] = {"is_error": bool(attr(result, "is_error", "isError")), "text": text_of(result)}
    return {"protocol_version": client.protocol_version, "tools": names, "calls": calls}


async def main():
    mode = sys.argv[1]
    if mode == "stdio-auto":
        async with Client(StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])) as client:
            report = await exercise_client(client)
    elif mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                report = await exercise(session)
    elif mode == "http":
        headers = {"Authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(sys.argv[2], http_client=http) as streams:
                read, write = streams[0], streams[1]
                async with ClientSession(read, write) as session:
                    report = await exercise(session)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(report))


asyncio.run(main())
