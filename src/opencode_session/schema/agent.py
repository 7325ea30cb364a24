"""The public shape of an agent as `GET /api/agent` lists it."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Struct
from .common import ModelRef
from .permission import PermissionV2Rule


class ProviderRequest(Struct):
    """Extra headers and body fields the agent sends with each provider request."""

    headers: dict[str, str]
    body: dict[str, Any]


class AgentV2Info(Struct):
    id: str
    model: ModelRef | None = None
    request: ProviderRequest
    system: str | None = None
    description: str | None = None
    mode: Literal["subagent", "primary", "all"]
    hidden: bool
    color: str | None = None
    steps: int | None = Field(None, gt=0)
    permissions: list[PermissionV2Rule]
