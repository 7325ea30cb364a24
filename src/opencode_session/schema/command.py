"""Custom commands (OpenCode's `command` config key and command markdown files) as `GET /api/command` lists them."""

from __future__ import annotations

from .base import Struct
from .common import ModelRef


class CommandV2Info(Struct):
    name: str
    template: str
    description: str | None = None
    agent: str | None = None
    model: ModelRef | None = None
    subtask: bool | None = None
