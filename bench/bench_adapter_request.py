"""Request-build + send cost per provider adapter as history grows: the SDK's own method (`chat.completions.create`,
`responses.create`, `messages.create`, which walk every message through their type annotations on each call) against
the adapter's path (the body built once as plain JSON and posted through the same SDK client). Both stream the same
tiny answer from a loopback server (TCP_NODELAY), so the difference is what each pays per request for the history.
`next Step` is the adapter's path in a conversation (one `prompt_cache_key`) whose every request adds a prompt to the
previous one's history: only the new messages are lowered and encoded.

Knobs: BENCH_SIZES (default "10,1000,10000" history messages), BENCH_ADAPTER_REPS (default 7; 3 at 10,000)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from typing import Any

from _common import emit, median, spread, table

from opencode_session.core.llm.anthropic_messages import AnthropicMessagesProvider
from opencode_session.core.llm.model import (
    AssistantMessage,
    LLMRequest,
    ResolvedModel,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    ToolSpec,
    UserMessage,
)
from opencode_session.core.llm.openai_chat import OpenAIChatProvider
from opencode_session.core.llm.openai_responses import OpenAIResponsesProvider

SIZES = [int(x) for x in os.environ.get("BENCH_SIZES", "10,1000,10000").split(",")]
REPS = int(os.environ.get("BENCH_ADAPTER_REPS", "7"))


def _sse(events: list[tuple[str | None, dict[str, Any]]], done: bool) -> bytes:
    frames = [(f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events]
    return ("".join(frames) + ("data: [DONE]\n\n" if done else "")).encode()


ANSWERS = {
    "/v1/chat/completions": _sse([
        (None, {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": None}]}),
        (None, {"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ], done=True),
    "/v1/responses": _sse([
        ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "sequence_number": 0,
                                        "item": {"type": "message", "id": "m1", "role": "assistant",
                                                 "status": "in_progress", "content": []}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "m1", "output_index": 0,
                                        "content_index": 0, "delta": "ok", "sequence_number": 1}),
        ("response.completed", {"type": "response.completed", "sequence_number": 2, "response": {
            "id": "r", "object": "response", "created_at": 1, "model": "m", "output": [], "status": "completed",
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}}),
    ], done=False),
    "/v1/messages": _sse([
        ("message_start", {"type": "message_start", "message": {
            "id": "m", "type": "message", "role": "assistant", "content": [], "model": "m",
            "usage": {"input_tokens": 1, "output_tokens": 1}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0,
                                 "content_block": {"type": "text", "text": ""}}),
        ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                 "delta": {"type": "text_delta", "text": "ok"}}),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {"type": "message_stop"}),
    ], done=False),
}


async def _serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """A minimal keep-alive HTTP/1.1 server: reads a request and its body, answers the path's stream."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = next((int(v) for k, _, v in (line.partition(":") for line in lines[1:])
                           if k.strip().lower() == "content-length"), 0)
            await reader.readexactly(length)
            body = ANSWERS[path]
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                         + f"content-length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
    except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):  # the client left, or shutdown
        pass
    finally:
        writer.close()


def history(n: int) -> list[Any]:
    """`n` messages: prompts, answers, and every fifth turn a tool call with its result."""
    out: list[Any] = []
    turn = 0
    while len(out) < n:
        out.append(UserMessage([TextPart(f"Question {turn}: " + "please look at the module and explain it. " * 4)]))
        if turn % 5 == 4:
            out.append(AssistantMessage([TextPart("Reading."), ToolCallPart(f"call_{turn}", "read",
                                                                            {"path": f"src/m{turn}.py"})]))
            out.append(ToolResultMessage(f"call_{turn}", "read", "def f():\n    return 1\n" * 10))
        out.append(AssistantMessage([TextPart(f"Answer {turn}: " + "it defines a small function. " * 6)]))
        turn += 1
    return out[:n]


TOOLS = [ToolSpec("read", "Read a file", {"type": "object", "properties": {"path": {"type": "string"}},
                                          "required": ["path"]})]
ADAPTERS = {"chat": OpenAIChatProvider, "responses": OpenAIResponsesProvider, "messages": AnthropicMessagesProvider}


async def _sdk_method(client: Any, protocol: str, body: dict[str, Any]) -> None:
    """The same body through the SDK's typed method (it transforms every field on the way out)."""
    kwargs = {k: v for k, v in body.items() if k != "stream"}
    if protocol == "chat":
        stream = await client.chat.completions.create(stream=True, **kwargs)
    elif protocol == "responses":
        stream = await client.responses.create(stream=True, **kwargs)
    else:
        stream = await client.messages.create(stream=True, **kwargs)
    async for _ in stream:
        pass


async def _ours(adapter: Any, request: LLMRequest) -> None:
    async for _ in adapter.stream(request):
        pass


def next_step(request: LLMRequest, grown: list[Any]) -> LLMRequest:
    """The conversation's next request: `grown` (its history so far) plus a prompt, under one `prompt_cache_key`, so
    the adapter reuses what it lowered for the previous one."""
    grown.append(UserMessage([TextPart(f"And then {len(grown)}?")]))
    return LLMRequest(model=request.model, system=request.system, messages=list(grown), tools=request.tools,
                      prompt_cache_key="bench")


async def measure(base_url: str) -> tuple[list[list[Any]], dict[str, Any]]:
    rows: list[list[Any]] = []
    results: dict[str, Any] = {}
    for protocol, cls in ADAPTERS.items():
        adapter = cls(base_url, "sk-bench")
        # the same SDK client; Anthropic's methods name the /v1 prefix themselves
        sdk_client = adapter._client.with_options(base_url=base_url.removesuffix("/v1")) if protocol == "messages" \
            else adapter._client
        model = ResolvedModel("bench", "m", base_url, api_key="sk-bench", output_limit=1000, protocol=protocol)  # type: ignore[arg-type]
        for size in SIZES:
            request = LLMRequest(model=model, system=["You are a benchmark."], messages=history(size), tools=TOOLS)
            body = adapter.build_body(request)
            reps = REPS if size < 10000 else min(REPS, 3)
            grown = list(request.messages)
            await _ours(adapter, request)  # warm the connection and the SDK's caches
            await _ours(adapter, next_step(request, grown))
            await _sdk_method(sdk_client, protocol, body)
            timings: dict[str, list[float]] = {"sdk": [], "ours": [], "next": []}
            for _ in range(reps):
                for label in ("sdk", "ours", "next"):
                    start = time.perf_counter()
                    if label == "sdk":
                        await _sdk_method(sdk_client, protocol, body)
                    elif label == "ours":
                        await _ours(adapter, request)
                    else:
                        await _ours(adapter, next_step(request, grown))
                    timings[label].append((time.perf_counter() - start) * 1000)
            sdk, ours, step = median(timings["sdk"]), median(timings["ours"]), median(timings["next"])
            rows.append([protocol, size, f"{sdk:.2f}", spread(timings["sdk"]), f"{ours:.2f}", spread(timings["ours"]),
                         f"{sdk / ours:.1f}x", f"{step:.2f}", spread(timings["next"])])
            results[f"{protocol}_{size}"] = {"sdk_ms": round(sdk, 3), "ours_ms": round(ours, 3),
                                             "ratio": round(sdk / ours, 2), "next_step_ms": round(step, 3)}
        await adapter._client.close()
    return rows, results


async def main() -> None:
    server = await asyncio.start_server(_serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    async with server:
        rows, results = await measure(f"http://127.0.0.1:{port}/v1")
    print(table(["adapter", "history", "SDK method ms", "min..max", "prebuilt body ms", "min..max", "SDK/ours",
                 "next Step ms", "min..max"], rows))
    emit("adapter_request", results)


if __name__ == "__main__":
    asyncio.run(main())
