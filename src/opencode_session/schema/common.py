"""Small shared records: model and location references, token usage, session errors."""

from __future__ import annotations

from pydantic import Field, NonNegativeInt

from .base import Struct
from .ids import WorkspaceID


class ModelRef(Struct):
    id: str = Field(min_length=1)
    providerID: str = Field(min_length=1)
    variant: str | None = None

    def same_as(self, other: ModelRef | None) -> bool:
        """Equal models; an omitted variant equals "default"."""
        if other is None:
            return False
        return (self.id, self.providerID, self.variant or "default") == (
            other.id,
            other.providerID,
            other.variant or "default",
        )


class LocationRef(Struct):
    directory: str = Field(min_length=1)
    workspaceID: WorkspaceID | None = None


class TokenCache(Struct):
    read: NonNegativeInt = 0
    write: NonNegativeInt = 0


class Tokens(Struct):
    input: NonNegativeInt = 0
    output: NonNegativeInt = 0
    reasoning: NonNegativeInt = 0
    cache: TokenCache = Field(default_factory=TokenCache)


class SessionErrorInfo(Struct):
    """A failure recorded in the session: a stable dotted `type`, a message, the provider status if known."""

    type: str
    message: str
    status: int | None = None



Millis = int
"""Epoch milliseconds, as every time on the wire and in the database."""
