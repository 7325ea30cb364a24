"""Reading a JSON request body as JSON defines it, and answers that always encode: a body that is not JSON, or holds
NaN, Infinity or a lone UTF-16 surrogate, is 400 InvalidRequestError naming the field, and so is one that does not
validate (`invalid`)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse

from ..schema import jsontext
from ..schema.errors import InvalidRequestError

# Deeper request JSON is refused: real payloads nest a few levels, and pydantic cannot serialize values nested past
# about 250 levels, so a deeper stored value would break every later read of it.
MAX_JSON_DEPTH = 128


def _nested_deeper_than(value: dict | list, limit: int) -> bool:
    # Level by level, in comprehensions: about as fast as json.loads on the same body, however wide it is.
    level: list[Any] = [value]
    for _ in range(limit):
        level = [child for item in level for child in (item.values() if type(item) is dict else item)
                 if type(child) is dict or type(child) is list]
        if not level:
            return False
    return True


def read_json_body(raw: bytes) -> Any:
    """The parsed body (`{}` when blank). Fields then validate strictly: each keeps its declared JSON type."""
    if not raw.strip():
        return {}
    try:
        payload = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: nested too deeply
        raise InvalidRequestError("Request body is not valid JSON", kind="body") from None
    if isinstance(payload, (dict, list)) and _nested_deeper_than(payload, MAX_JSON_DEPTH):
        raise InvalidRequestError(f"Request body is nested more than {MAX_JSON_DEPTH} levels deep", kind="body")
    found = jsontext.first_invalid(payload)
    if found is not None:
        field, problem = found
        raise InvalidRequestError(f"Invalid body: {field + ': ' if field else ''}{problem}", kind="body",
                                  field=field or None)
    return payload


def invalid(exc: ValidationError, where: str) -> InvalidRequestError:
    """The 400 of a path, query or body (`where`) that does not validate, naming the first field at fault."""
    errors = exc.errors()
    loc = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
    message = f"Invalid {where}: {loc + ': ' if loc else ''}{errors[0]['msg'] if errors else 'invalid value'}"
    return InvalidRequestError(message, kind=where, field=loc or None)


class JSONAnswer(JSONResponse):
    """A JSON response whose rendering cannot fail on a value JSON cannot carry (it is sanitized instead)."""

    def render(self, content: Any) -> bytes:
        return jsontext.dumps(content).encode("utf-8")
