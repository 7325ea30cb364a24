"""The terminal WebSocket's frames beyond plain text, shared by the server and its clients: a binary frame that
starts with a 0x00 byte carries JSON, `{"cursor": N}` from the server after its replay, `{"size": {"rows": R,
"cols": C}}` from a client to resize the window."""

from __future__ import annotations

import json
from typing import Any

CONTROL = b"\x00"
# Replayed output goes out in frames of at most this many characters.
REPLAY_CHUNK = 64 * 1024


def meta_frame(cursor: int) -> bytes:
    return CONTROL + json.dumps({"cursor": cursor}).encode()


def resize_frame(rows: int, cols: int) -> bytes:
    return CONTROL + json.dumps({"size": {"rows": rows, "cols": cols}}).encode()


def _control(frame: bytes) -> dict[str, Any] | None:
    if frame[:1] != CONTROL:
        return None
    try:
        value = json.loads(frame[1:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def decode_meta(frame: str | bytes) -> int | None:
    """The cursor a server's control frame carries; None for any other frame."""
    value = _control(frame) if isinstance(frame, bytes) else None
    cursor = value.get("cursor") if value is not None else None
    return cursor if isinstance(cursor, int) and not isinstance(cursor, bool) else None


def decode_control(frame: bytes) -> tuple[int, int] | None:
    """(rows, cols) of a client's resize frame; None for a malformed one (ignored)."""
    value = _control(frame)
    size = value.get("size") if value is not None else None
    if not isinstance(size, dict):
        return None
    rows, cols = size.get("rows"), size.get("cols")
    if not (_dimension(rows) and _dimension(cols)):
        return None
    return int(rows), int(cols)  # type: ignore[arg-type]  # checked just above


def _dimension(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 < value <= 10_000
