"""Drives `talon serve` with the official `openai` or `anthropic` Python SDK, as their own
documentation shows, and prints what each step saw as one JSON report.

Usage: sdk_clients.py openai|anthropic BASE_URL API_KEY

The steps and the mock model's script (see chat_http.rs) go in the same order: an answer with a
tool call of the agent's in between (non-streamed, then streamed), a client tool round trip
(the client runs `get_weather`), sampling settings, an image, and a refused parameter.
"""

import json
import sys

WEATHER = {
    "name": "get_weather",
    "description": "The weather in a city",
    "schema": {
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
}
PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)


def openai_steps(base_url, key):
    import openai

    client = openai.OpenAI(base_url=base_url + "/v1", api_key=key, max_retries=0)
    report = {}
    # 1. A system message and an answer around the agent's own tool call.
    reply = client.chat.completions.create(
        model="default",
        messages=[
            {"role": "system", "content": "Answer like a pirate."},
            {"role": "user", "content": "What time is it?"},
        ],
    )
    report["text"] = reply.choices[0].message.content
    report["finish"] = reply.choices[0].finish_reason
    report["activity"] = [a["name"] for a in (reply.model_extra or {})["talon"]["activity"]]
    # 2. The same, streamed, read the way the SDK's README reads a stream.
    streamed = ""
    for chunk in client.chat.completions.create(
        model="default",
        messages=[{"role": "user", "content": "And now?"}],
        stream=True,
    ):
        streamed += chunk.choices[0].delta.content or ""
    report["streamed"] = streamed
    # 3. A client tool: the call comes back, the client answers it, the turn goes on.
    tools = [
        {
            "type": "function",
            "function": {
                "name": WEATHER["name"],
                "description": WEATHER["description"],
                "parameters": WEATHER["schema"],
            },
        }
    ]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.chat.completions.create(model="default", messages=messages, tools=tools)
    choice = first.choices[0]
    report["tool_finish"] = choice.finish_reason
    calls = choice.message.tool_calls or []
    report["tool_calls"] = [[c.function.name, json.loads(c.function.arguments)] for c in calls]
    messages.append(choice.message)
    for call in calls:
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "Sunny, 21 C"})
    second = client.chat.completions.create(model="default", messages=messages, tools=tools)
    report["after_tool"] = second.choices[0].message.content
    # 3b. The same round streamed: the call arrives as tool_calls deltas.
    messages = [{"role": "user", "content": "Weather in Rome?"}]
    calls, finish = {}, None
    for chunk in client.chat.completions.create(
        model="default", messages=messages, tools=tools, stream=True
    ):
        choice = chunk.choices[0]
        finish = choice.finish_reason or finish
        for delta in choice.delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"id": "", "name": "", "arguments": ""})
            call["id"] += delta.id or ""
            call["name"] += (delta.function.name or "") if delta.function else ""
            call["arguments"] += (delta.function.arguments or "") if delta.function else ""
    report["streamed_tool_finish"] = finish
    report["streamed_tool_calls"] = [[c["name"], json.loads(c["arguments"])] for c in calls.values()]
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": c["id"], "type": "function",
                 "function": {"name": c["name"], "arguments": c["arguments"]}}
                for c in calls.values()
            ],
        }
    )
    for c in calls.values():
        messages.append({"role": "tool", "tool_call_id": c["id"], "content": "Cloudy, 18 C"})
    streamed = ""
    for chunk in client.chat.completions.create(
        model="default", messages=messages, tools=tools, stream=True
    ):
        streamed += chunk.choices[0].delta.content or ""
    report["streamed_after_tool"] = streamed
    # 4. Sampling settings and an image reach the provider.
    sampled = client.chat.completions.create(
        model="default",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Describe this."},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PIXEL}},
                ],
            }
        ],
        temperature=0.25,
        top_p=0.5,
        max_completion_tokens=77,
        stop=["END"],
        seed=7,
        response_format={"type": "json_object"},
    )
    report["sampled"] = sampled.choices[0].message.content
    # 5. What Talon cannot do is refused with the parameter named.
    try:
        client.chat.completions.create(
            model="default", messages=[{"role": "user", "content": "two"}], n=2
        )
        report["n2"] = "accepted"
    except openai.BadRequestError as e:
        report["n2"] = {"status": e.status_code, "param": e.body.get("param")}
    try:
        client.chat.completions.create(
            model="nope", messages=[{"role": "user", "content": "hi"}]
        )
        report["unknown_model"] = "accepted"
    except openai.NotFoundError as e:
        report["unknown_model"] = e.body.get("code")
    report["models"] = [m.id for m in client.models.list()]
    return report


def anthropic_steps(base_url, key):
    import anthropic

    client = anthropic.Anthropic(base_url=base_url, api_key=key, max_retries=0)
    report = {}
    reply = client.messages.create(
        model="default",
        max_tokens=100,
        system="Answer like a pirate.",
        messages=[{"role": "user", "content": "What time is it?"}],
    )
    report["text"] = "".join(b.text for b in reply.content if b.type == "text")
    report["finish"] = reply.stop_reason
    report["activity"] = [a["name"] for a in (reply.model_extra or {})["talon"]["activity"]]
    with client.messages.stream(
        model="default",
        max_tokens=100,
        messages=[{"role": "user", "content": "And now?"}],
    ) as stream:
        report["streamed"] = "".join(stream.text_stream)
    tools = [
        {
            "name": WEATHER["name"],
            "description": WEATHER["description"],
            "input_schema": WEATHER["schema"],
        }
    ]
    messages = [{"role": "user", "content": "Weather in Paris?"}]
    first = client.messages.create(
        model="default", max_tokens=100, messages=messages, tools=tools
    )
    report["tool_finish"] = first.stop_reason
    calls = [b for b in first.content if b.type == "tool_use"]
    report["tool_calls"] = [[c.name, c.input] for c in calls]
    messages.append({"role": "assistant", "content": first.content})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": "Sunny, 21 C"}
                for c in calls
            ],
        }
    )
    second = client.messages.create(
        model="default", max_tokens=100, messages=messages, tools=tools
    )
    report["after_tool"] = "".join(b.text for b in second.content if b.type == "text")
    # The same round streamed: the SDK assembles the tool_use block from the events.
    messages = [{"role": "user", "content": "Weather in Rome?"}]
    with client.messages.stream(
        model="default", max_tokens=100, messages=messages, tools=tools
    ) as stream:
        first = stream.get_final_message()
    report["streamed_tool_finish"] = first.stop_reason
    calls = [b for b in first.content if b.type == "tool_use"]
    report["streamed_tool_calls"] = [[c.name, c.input] for c in calls]
    messages.append({"role": "assistant", "content": first.content})
    messages.append(
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": c.id, "content": "Cloudy, 18 C"}
                for c in calls
            ],
        }
    )
    with client.messages.stream(
        model="default", max_tokens=100, messages=messages, tools=tools
    ) as stream:
        report["streamed_after_tool"] = "".join(stream.text_stream)
    sampled = client.messages.create(
        model="default",
        max_tokens=77,
        stop_sequences=["END"],
        # This SDK version has no sampling arguments; older ones send them as these.
        extra_body={"temperature": 0.25, "top_p": 0.5},
        messages=[
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": PIXEL},
                    },
                    {"type": "text", "text": "Describe this."},
                ],
            }
        ],
    )
    report["sampled"] = "".join(b.text for b in sampled.content if b.type == "text")
    try:
        client.messages.create(
            model="default",
            max_tokens=10,
            messages=[{"role": "user", "content": "two"}],
            tool_choice={"type": "any"},
        )
        report["n2"] = "accepted"
    except anthropic.BadRequestError as e:
        report["n2"] = {"status": e.status_code, "type": e.body["error"]["type"]}
    try:
        client.messages.create(
            model="nope", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
        report["unknown_model"] = "accepted"
    except anthropic.NotFoundError as e:
        report["unknown_model"] = e.body["error"]["type"]
    return report


def main():
    sdk, base_url, key = sys.argv[1:4]
    steps = openai_steps if sdk == "openai" else anthropic_steps
    print(json.dumps(steps(base_url, key)))


if __name__ == "__main__":
    main()
