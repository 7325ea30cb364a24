"""How a stored message's JSON text becomes a value again: the public SessionMessage (validated), or the plain data
the projector changes. Every backend stores messages as this JSON."""

from __future__ import annotations

import functools
import json
from typing import Any, cast

from pydantic import TypeAdapter

from ...schema import jsontext
from ...schema.message import SessionMessage
from ...schema.message_data import SessionMessageData


@functools.cache
def _message() -> TypeAdapter[SessionMessage]:
    """The SessionMessage validator, built on first use: building the whole message union cost ~12 ms of start-up."""
    return TypeAdapter(SessionMessage)


def dump(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def decode(data: str) -> SessionMessage:
    """A stored message as its public model."""
    try:
        return _message().validate_json(data)
    except ValueError:  # stored before values were cleaned at the door (a lone surrogate escape)
        return _message().validate_python(jsontext.loads(data))


def as_data(text: str) -> SessionMessageData:
    """A stored message as plain data (written by the projector in the shape message_data.py declares)."""
    return cast(SessionMessageData, json.loads(text))
