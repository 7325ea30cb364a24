"""Reading a JSON request body as JSON defines it, and answers that always encode: a body that is not JSON, or holds
NaN, Infinity or a lone UTF-16 surrogate, is 400 InvalidRequestError naming the field."""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse

from ..schema import jsontext
from ..schema.errors import InvalidRequestError


def read_json_body(raw: bytes) -> Any:
    """The parsed body (`{}` when blank). Fields then validate strictly: each keeps its declared JSON type."""
    if not raw.strip():
        return {}
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise InvalidRequestError("Request body is not valid JSON", kind="body") from None
    invalid = jsontext.first_invalid(payload)
    if invalid is not None:
        field, problem = invalid
        raise InvalidRequestError(f"Invalid body: {field + ': ' if field else ''}{problem}", kind="body",
                                  field=field or None)
    return payload


class JSONAnswer(JSONResponse):
    """A JSON response whose rendering cannot fail on a value JSON cannot carry (it is sanitized instead)."""

    def render(self, content: Any) -> bytes:
        return jsontext.dumps(content).encode("utf-8")
