"""The public Session record, its staged revert, and the active-drain snapshot entry."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Struct
from .common import LocationRef, Millis, ModelRef, Tokens
from .ids import MessageID, SessionID
from .permission import PermissionV2Rule


class SessionTime(Struct):
    created: Millis
    updated: Millis
    archived: Millis | None = None


class FileDiff(Struct):
    """One file a staged revert put back: what staging did to it, from the file as the agent left it to the file as
    it was before the boundary (`deleted`: the reverted turn had created it), with its line counts and unified diff
    (empty for a binary file, and for one whose diff is over 64 KiB or past 1 MiB of the revert's diffs)."""

    path: str = Field(description="Relative to the session's Location, with `/` separators.")
    status: Literal["added", "modified", "deleted"]
    additions: int = Field(ge=0)
    deletions: int = Field(ge=0)
    patch: str


class RevertState(Struct):
    """A staged revert: history from `messageID` on is to be removed (on commit), and `files` were restored to
    their content before it; `snapshot` holds the files as the agent left them (clear puts them back)."""

    messageID: MessageID
    partID: str | None = None
    snapshot: str | None = None
    diff: str | None = None
    files: list[FileDiff] | None = None
    notice: str | None = Field(None, description=(
        "Extension: why some or all of the turn's file changes were not restored (snapshots are off for the"
        " location, or a file was too large to keep), in words for the user."))


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
    metadata: dict[str, Any] | None = Field(None, description="Extension: the client's own JSON object, kept as given.")
    permissions: list[PermissionV2Rule] | None = Field(None, description=(
        "Extension: rules this session's Steps evaluate after the agent's (the last matching rule wins); a `deny`"
        " of the configuration still wins over them."))


class SessionActive(Struct):
    type: Literal["running"] = "running"


class SessionOwner(Struct):
    """Which host executes a session right now (several hosts may share one database): its lease's owner, epoch
    and expiry (epoch milliseconds), or all null while no host does; `local` when it is the host answering."""

    host: str | None = None
    epoch: int | None = None
    expires: int | None = None
    local: bool = False
