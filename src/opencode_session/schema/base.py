"""The base model every public shape derives from and its wire encoding."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class Struct(BaseModel):
    """A closed record: unknown fields are rejected, absent optionals are omitted on the wire."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=False, defer_build=True)

    def wire(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_none=True, by_alias=True)


def wire(value: Any) -> Any:
    """Encode a model, or a list/dict of models, as JSON-ready data."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True, by_alias=True)
    if isinstance(value, list):
        return [wire(v) for v in value]
    if isinstance(value, dict):
        return {k: wire(v) for k, v in value.items()}
    return value
