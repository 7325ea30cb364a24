"""Skills as `GET /api/skill` lists them: the `SKILL.md` folders the `skill` tool offers at a Location."""

from __future__ import annotations

from .base import Struct


class SkillV2Info(Struct):
    name: str
    description: str | None = None
    slash: bool | None = None
    location: str  # the SKILL.md file
    content: str
