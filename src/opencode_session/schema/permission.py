"""The public shapes of asking for permission: a pending request, its source, the three replies, saved rules and a
Ruleset as the API shows it."""

from __future__ import annotations

from typing import Any, Literal

from .base import Struct
from .ids import PermissionID, SessionID

PermissionV2Reply = Literal["once", "always", "reject"]
PermissionV2Effect = Literal["allow", "deny", "ask"]


class PermissionV2Source(Struct):
    """The tool call that asked."""

    type: Literal["tool"] = "tool"
    messageID: str
    callID: str


class PermissionV2Request(Struct):
    """One pending question to the user: may `action` touch `resources`? `save` are the patterns `always` keeps."""

    id: PermissionID
    sessionID: SessionID
    action: str
    resources: list[str]
    save: list[str] | None = None
    metadata: dict[str, Any] | None = None
    source: PermissionV2Source | None = None


class PermissionSavedInfo(Struct):
    """An `always` reply remembered for a project: `action` on `resource` (a pattern) is allowed there."""

    id: str
    projectID: str
    action: str
    resource: str


class PermissionV2Rule(Struct):
    action: str
    resource: str
    effect: PermissionV2Effect
