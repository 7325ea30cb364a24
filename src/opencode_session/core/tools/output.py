"""The text a model reads of a tool result, and its final size bound: keep the head and tail, drop the middle behind
a marker line."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from opencode_session.schema.message_data import ToolStateCompletedData

DEFAULT_MAX_LINES = 2000
DEFAULT_MAX_BYTES = 51_200


def structured_text(structured: Mapping[str, Any] | None) -> str:
    """What the model reads of a result without text parts: its structured value as JSON ("" when it has none)."""
    return json.dumps(structured, ensure_ascii=False) if structured else ""


def settled_text(state: ToolStateCompletedData) -> str:
    """What the model reads of a completed call as recorded: its text parts, or with none its structured value's JSON
    (a bounded preview in a text part instead, when that was too large)."""
    texts = [c["text"] for c in state.get("content", ()) if c["type"] == "text"]
    return "\n".join(texts) if texts else structured_text(state.get("structured"))


def _is_continuation(byte: int) -> bool:
    return byte & 0xC0 == 0x80


def _count_lines(data: bytes) -> int:
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def _marker(omitted_lines: int, omitted_bytes: int, note: str | None) -> str:
    tail = f"; {note}" if note else ""
    return f"[... output truncated: {omitted_lines} lines ({omitted_bytes} bytes) omitted{tail} ...]"


def fits(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES) -> bool:
    """Whether `text` is within both bounds as it is."""
    data = text.encode("utf-8", "surrogatepass")
    return _count_lines(data) <= max_lines and len(data) <= max_bytes


def bound_text(text: str, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES,
               note: str | None = None) -> tuple[str, bool]:
    """Return `text` unchanged when it fits both bounds, else its head and tail around one marker line, which ends
    with `note` when given (e.g. where the complete text was kept).

    The result (marker included) stays within `max_lines` lines and `max_bytes` UTF-8 bytes unless the
    bounds are too small to hold the marker itself, which is always kept. Multi-byte characters are never
    split. The second item says whether anything was dropped.
    """
    if max_lines < 0 or max_bytes < 0:
        raise ValueError("bounds must be non-negative")
    # surrogatepass keeps this total for any str; tool text normally has no lone surrogates.
    data = text.encode("utf-8", "surrogatepass")
    total_lines = _count_lines(data)
    if total_lines <= max_lines and len(data) <= max_bytes:
        return text, False

    # Reserve room for the widest marker this text could need plus the newline before and after it.
    reserve = len(_marker(total_lines, len(data), note).encode()) + 2
    line_budget = max(max_lines - 1, 0)
    byte_budget = max(max_bytes - reserve, 0)
    head_lines, tail_lines = (line_budget + 1) // 2, line_budget // 2
    head_bytes, tail_bytes = (byte_budget + 1) // 2, byte_budget // 2

    head_end = 0
    taken = 0
    while taken < head_lines and head_end < len(data):
        newline = data.find(b"\n", head_end)
        line_end = len(data) if newline < 0 else newline + 1
        if line_end <= head_bytes:
            head_end = line_end
            taken += 1
            continue
        # A line too long for the remaining budget is cut, so one huge line still shows its start.
        cut = head_bytes
        while cut > head_end and _is_continuation(data[cut]):
            cut -= 1
        head_end = max(head_end, cut)
        break

    tail_start = len(data)
    taken = 0
    while taken < tail_lines and tail_start > head_end:
        line_start = max(data.rfind(b"\n", 0, tail_start - 1) + 1, head_end)
        if len(data) - line_start <= tail_bytes:
            tail_start = line_start
            taken += 1
            continue
        start = len(data) - tail_bytes
        while start < tail_start and _is_continuation(data[start]):
            start += 1
        tail_start = min(tail_start, start)
        break

    omitted = data[head_end:tail_start]
    head = data[:head_end].decode("utf-8", "surrogatepass")
    tail = data[tail_start:].decode("utf-8", "surrogatepass")
    if head and not head.endswith("\n"):
        head += "\n"
    marker = _marker(omitted.count(b"\n"), len(omitted), note)
    return head + marker + ("\n" + tail if tail else ""), True
