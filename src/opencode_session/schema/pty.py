"""Pseudo-terminal sessions as the PTY operations show them, and what a caller may change about one."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field

from .base import Struct
from .ids import PtyID


class Pty(Struct):
    id: PtyID
    title: str
    command: str
    args: list[str]
    cwd: str
    status: Literal["running", "exited"]
    pid: int = Field(ge=0)
    exitCode: int | None = Field(None, ge=0)


def _integral(value: Any) -> Any:
    # JSON does not tell 80 from 80.0; a whole number is a size either way.
    return int(value) if isinstance(value, float) and value.is_integer() else value


# the constraints before the validator, or pydantic's JSON schema spells them `gt`/`le` instead of JSON Schema's words
Dimension = Annotated[int, Field(gt=0, le=10_000), BeforeValidator(_integral)]


class PtySize(Struct):
    rows: Dimension
    cols: Dimension


class PtyTicketConnectToken(Struct):
    """A single-use ticket that opens one PTY WebSocket without the password header (a browser cannot send it)."""

    ticket: str
    expires_in: int = Field(gt=0)
