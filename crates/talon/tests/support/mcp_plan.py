"""Runs a scripted session with the official Python MCP SDK and reports what it saw.

Usage:
  mcp_plan.py PLAN stdio TALON_BINARY [ARGS...]
  mcp_plan.py PLAN http URL [BEARER_TOKEN]

PLAN is a JSON list of steps, run in order:
  {"list": true}                        -> the tool names offered
  {"set_level": "debug"}                -> logging/setLevel
  {"call": "name", "args": {...}}       -> one tools/call; with "progress": true it asks for
                                           progress and reports it as "progress": [...]
  {"wait_for_tool": "name"}             -> lists tools until the name appears (30 s at most)
  {"elicit_answer": {...}}              -> how the client answers elicitation requests from now
                                           on (an ElicitResult); a plan with such a step makes
                                           the client declare the elicitation capability

Prints one JSON document: {"steps": [...one result per step...], "logs": [...every
notifications/message received, as {"level", "logger", "data"}...], "capabilities": {...}}.
"""

import asyncio
import json
import sys
import warnings

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client

# The SDK marks logging deprecated (SEP-2577); Talon still serves it and clients still use it.
warnings.filterwarnings("ignore")


def field(obj, *names):
    """The SDK renamed fields from camelCase (1.x) to snake_case (2.x); accept either."""
    for name in names:
        if obj is not None and hasattr(obj, name):
            return getattr(obj, name)
    return None


async def run(session, plan, logs):
    init = await session.initialize()
    caps = field(init, "capabilities")
    capabilities = {
        "logging": field(caps, "logging") is not None,
        "tools": field(caps, "tools") is not None,
    }
    steps = []
    for step in plan:
        if "list" in step:
            listed = await session.list_tools()
            steps.append(sorted(t.name for t in listed.tools))
        elif "set_level" in step:
            await session.set_logging_level(step["set_level"])
            steps.append("ok")
        elif "call" in step:
            progress = []

            async def on_progress(value, total, message):
                progress.append({"progress": value, "total": total, "message": message})

            callback = on_progress if step.get("progress") else None
            result = await session.call_tool(step["call"], step.get("args", {}),
                                             progress_callback=callback)
            steps.append(
                {
                    "is_error": bool(field(result, "is_error", "isError")),
                    "text": "\n".join(getattr(b, "text", "") for b in result.content),
                    "progress": progress,
                }
            )
        elif "elicit_answer" in step:
            ELICIT["answer"] = step["elicit_answer"]
            steps.append("ok")
        elif "wait_for_tool" in step:
            for _ in range(300):
                listed = await session.list_tools()
                if any(t.name == step["wait_for_tool"] for t in listed.tools):
                    break
                await asyncio.sleep(0.1)
            steps.append("ok")
        else:
            raise SystemExit(f"unknown step {step}")
    # Notifications sent on a separate stream may trail the last response slightly.
    await asyncio.sleep(0.3)
    return {"steps": steps, "logs": logs, "capabilities": capabilities,
            "elicitations": ELICIT["asked"]}


ELICIT = {"answer": None, "asked": []}


async def on_elicit(context, params):
    from mcp import types
    ELICIT["asked"].append(getattr(params, "message", None))
    return types.ElicitResult(**ELICIT["answer"])


async def main():
    plan = json.loads(sys.argv[1])
    mode = sys.argv[2]
    logs = []
    extra = {}
    if any("elicit_answer" in step for step in plan):
        extra["elicitation_callback"] = on_elicit

    async def on_log(params):
        logs.append({"level": str(params.level), "logger": params.logger, "data": params.data})

    if mode == "stdio":
        params = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write, logging_callback=on_log, **extra) as session:
                report = await run(session, plan, logs)
    elif mode == "http":
        headers = {"Authorization": f"Bearer {sys.argv[4]}"} if len(sys.argv) > 4 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(sys.argv[3], http_client=http) as streams:
                async with ClientSession(streams[0], streams[1], logging_callback=on_log,
                                         **extra) as session:
                    report = await run(session, plan, logs)
    else:
        raise SystemExit(f"unknown mode {mode}")
    print(json.dumps(report))


asyncio.run(main())
