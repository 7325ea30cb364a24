"""The public Session record and the active-drain snapshot entry."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from .base import Struct
from .common import LocationRef, Millis, ModelRef, Tokens
from .ids import SessionID


class SessionTime(Struct):
    created: Millis
    updated: Millis
    archived: Millis | None = None


class RevertState(Struct):
    messageID: str
    partID: str | None = None
    snapshot: str | None = None
    diff: str | None = None


class SessionV2Info(Struct):
    id: SessionID
    parentID: SessionID | None = None
    projectID: str
    agent: str | None = None
    model: ModelRef | None = None
    cost: float = 0
    tokens: Tokens = Field(default_factory=Tokens)
    time: SessionTime
    title: str
    location: LocationRef
    subpath: str | None = None
    revert: RevertState | None = None



class SessionActive(Struct):
    type: Literal["running"] = "running"
