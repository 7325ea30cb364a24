"""Scripted answers in the OpenAI Responses and Anthropic Messages streaming wire protocols, for the loopback server
in fake_openai.py: each builder returns the events of one output item or content block, and `responses` / `messages`
frame them into a complete stream (start, items, finish with usage)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from .fake_openai import DEFAULT_MODEL, ErrorScript, StreamScript

Event = dict[str, Any]
_ids = itertools.count(1)


def _frames(events: list[Event]) -> list[str | tuple[str, str]]:
    return [(e["type"], json.dumps(e)) for e in events]


# --- OpenAI Responses ------------------------------------------------------------------------------


def r_text(*pieces: str) -> list[Event]:
    item_id = f"msg_{next(_ids)}"
    item = {"type": "message", "id": item_id, "role": "assistant", "status": "in_progress", "content": []}
    done = {**item, "status": "completed",
            "content": [{"type": "output_text", "text": "".join(pieces), "annotations": []}]}
    return [{"type": "response.output_item.added", "output_index": 0, "item": item},
            *({"type": "response.output_text.delta", "item_id": item_id, "output_index": 0, "content_index": 0,
               "delta": p} for p in pieces),
            {"type": "response.output_item.done", "output_index": 0, "item": done}]


def r_reasoning(*pieces: str, encrypted: str | None = "enc-1") -> list[Event]:
    item_id = f"rs_{next(_ids)}"
    done: Event = {"type": "reasoning", "id": item_id,
                   "summary": [{"type": "summary_text", "text": "".join(pieces)}] if pieces else []}
    if encrypted is not None:
        done["encrypted_content"] = encrypted
    return [{"type": "response.output_item.added", "output_index": 0,
             "item": {"type": "reasoning", "id": item_id, "summary": []}},
            *({"type": "response.reasoning_summary_text.delta", "item_id": item_id, "output_index": 0,
               "summary_index": 0, "delta": p} for p in pieces),
            {"type": "response.output_item.done", "output_index": 0, "item": done}]


def r_call(call_id: str, name: str, *argument_pieces: str) -> list[Event]:
    item_id = f"fc_{next(_ids)}"
    item = {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": "",
            "status": "in_progress"}
    return [{"type": "response.output_item.added", "output_index": 0, "item": item},
            *({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": 0, "delta": p}
              for p in argument_pieces),
            {"type": "response.output_item.done", "output_index": 0,
             "item": {**item, "arguments": "".join(argument_pieces), "status": "completed"}}]


def r_hosted(kind: str, action: dict[str, Any], status: str = "completed") -> list[Event]:
    """A tool the provider runs itself (`web_search_call`, say): its call and its outcome arrive in the stream."""
    item_id = f"ws_{next(_ids)}"
    return [{"type": "response.output_item.added", "output_index": 0,
             "item": {"type": kind, "id": item_id, "status": "in_progress"}},
            {"type": "response.output_item.done", "output_index": 0,
             "item": {"type": kind, "id": item_id, "status": status, "action": action}}]


def r_usage(input_tokens: int, output_tokens: int, *, cached: int = 0, reasoning: int = 0) -> Event:
    return {"input_tokens": input_tokens, "output_tokens": output_tokens,
            "total_tokens": input_tokens + output_tokens, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens_details": {"reasoning_tokens": reasoning}}


def responses(*items: list[Event], usage: Event | None = None, status: str = "completed",
              incomplete: str | None = None, finish: bool = True, drop_after: int | None = None) -> StreamScript:
    """A whole Responses stream; `finish=False` leaves out `response.completed` (a stream cut short)."""
    base = {"id": "resp_1", "object": "response", "created_at": 1_700_000_000, "model": DEFAULT_MODEL,
            "output": [], "status": "in_progress"}
    events: list[Event] = [{"type": "response.created", "response": base}]
    for item in items:
        events += item
    if finish:
        final: Event = {**base, "status": status, "usage": usage or r_usage(10, 5)}
        if incomplete is not None:
            final["incomplete_details"] = {"reason": incomplete}
        events.append({"type": "response.completed" if status == "completed" else "response.incomplete",
                       "response": final})
    for n, event in enumerate(events):
        event["sequence_number"] = n
    return StreamScript(_frames(events), done=False, drop_after=drop_after)


def responses_error_event(code: str, message: str) -> StreamScript:
    """A 200 stream that fails with an `error` event after it started."""
    return StreamScript(_frames([
        {"type": "response.created", "response": {"id": "resp_1", "object": "response", "status": "in_progress"}},
        {"type": "error", "code": code, "message": message, "param": None},
    ]), done=False)


# --- Anthropic Messages ----------------------------------------------------------------------------


def m_text(*pieces: str) -> list[Event]:
    return [{"type": "content_block_start", "content_block": {"type": "text", "text": ""}},
            *({"type": "content_block_delta", "delta": {"type": "text_delta", "text": p}} for p in pieces),
            {"type": "content_block_stop"}]


def m_thinking(*pieces: str, signature: str | None = "sig-1") -> list[Event]:
    events: list[Event] = [{"type": "content_block_start", "content_block": {"type": "thinking", "thinking": ""}}]
    events += [{"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": p}} for p in pieces]
    if signature is not None:
        events.append({"type": "content_block_delta", "delta": {"type": "signature_delta", "signature": signature}})
    return [*events, {"type": "content_block_stop"}]


def m_redacted(data: str) -> list[Event]:
    return [{"type": "content_block_start", "content_block": {"type": "redacted_thinking", "data": data}},
            {"type": "content_block_stop"}]


def m_tool(call_id: str, name: str, *json_pieces: str) -> list[Event]:
    return [{"type": "content_block_start", "content_block": {"type": "tool_use", "id": call_id, "name": name,
                                                              "input": {}}},
            *({"type": "content_block_delta", "delta": {"type": "input_json_delta", "partial_json": p}}
              for p in json_pieces),
            {"type": "content_block_stop"}]


def messages(*blocks: list[Event], stop_reason: str | None = None, input_tokens: int = 10, output_tokens: int = 5,
             cache_read: int = 0, cache_write: int = 0, finish: bool = True,
             drop_after: int | None = None) -> StreamScript:
    """A whole Messages stream; content blocks are numbered in order. `stop_reason` defaults to tool_use when a
    tool block is present, else end_turn; `finish=False` leaves out message_delta and message_stop."""
    events: list[Event] = [{"type": "message_start", "message": {
        "id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": DEFAULT_MODEL,
        "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1, "cache_read_input_tokens": cache_read,
                  "cache_creation_input_tokens": cache_write}}}]
    has_tool = False
    for index, block in enumerate(blocks):
        for event in block:
            has_tool = has_tool or event.get("content_block", {}).get("type") == "tool_use"
            events.append({**event, "index": index})
    if finish:
        reason = stop_reason or ("tool_use" if has_tool else "end_turn")
        events.append({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": None},
                       "usage": {"output_tokens": output_tokens}})
        events.append({"type": "message_stop"})
    return StreamScript(_frames(events), done=False, drop_after=drop_after)


def messages_error_event(kind: str, message: str) -> StreamScript:
    """A 200 stream that fails with Anthropic's `event: error` after it started."""
    start = messages(finish=False).frames
    return StreamScript([*start, ("error", json.dumps({"type": "error", "error": {"type": kind, "message": message}}))],
                        done=False)


def anthropic_error(status: int, kind: str, message: str, headers: dict[str, str] | None = None) -> ErrorScript:
    return ErrorScript(status, {"type": "error", "error": {"type": kind, "message": message}}, dict(headers or {}))


__all__ = [
    "anthropic_error",
    "m_redacted",
    "m_text",
    "m_thinking",
    "m_tool",
    "messages",
    "messages_error_event",
    "r_call",
    "r_hosted",
    "r_reasoning",
    "r_text",
    "r_usage",
    "responses",
    "responses_error_event",
]
