"""Pseudo-terminal sessions as the PTY operations show them, and what a caller may change about one."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

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


class PtySize(Struct):
    rows: int = Field(gt=0, le=10_000)
    cols: int = Field(gt=0, le=10_000)


class PtyTicketConnectToken(Struct):
    """A single-use ticket that opens one PTY WebSocket without the password header (a browser cannot send it)."""

    ticket: str
    expires_in: int = Field(gt=0)
