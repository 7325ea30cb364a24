"""InstructionEntry: one API-managed, durable, per-Session JSON value under a slash-free key."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import StringConstraints

from .base import Struct

EntryKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=128)]


class InstructionEntry(Struct):
    key: EntryKey
    value: Any


class InstructionEntryPut(Struct):
    value: Any
