"""InstructionEntry: one API-managed, durable, per-Session JSON value under a slash-free key."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import SerializerFunctionWrapHandler, StringConstraints, model_serializer

from .base import Struct

EntryKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*$", max_length=128)]


class InstructionEntry(Struct):
    key: EntryKey
    value: Any

    @model_serializer(mode="wrap")
    def _null_is_a_value(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # a stored JSON null is a value like any other: the wire's `exclude_none` must not drop the field
        data: dict[str, Any] = handler(self)
        data.setdefault("value", None)
        return data


class InstructionEntryPut(Struct):
    value: Any
