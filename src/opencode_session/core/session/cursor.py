"""Opaque page cursors: base64url JSON that carries the whole query, so a continuation needs only the cursor."""

from __future__ import annotations

import base64
import json
from typing import Any

from ...schema.errors import InvalidCursorError


def encode_cursor(payload: dict[str, Any]) -> str:
    raw = json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(cursor: str, kind: str) -> dict[str, Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        payload = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except Exception:
        raise InvalidCursorError() from None
    if not isinstance(payload, dict) or payload.get("kind") != kind:
        raise InvalidCursorError()
    return payload
