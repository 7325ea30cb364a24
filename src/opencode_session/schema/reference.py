"""Project references (opencode.json's `references`): directories a session may consult, local or from git."""

from __future__ import annotations

from typing import Literal

from .base import Struct


class ReferenceLocalSource(Struct):
    type: Literal["local"]
    path: str
    description: str | None = None
    hidden: bool | None = None


class ReferenceGitSource(Struct):
    type: Literal["git"]
    repository: str
    branch: str | None = None
    description: str | None = None
    hidden: bool | None = None


ReferenceSource = ReferenceLocalSource | ReferenceGitSource


class ReferenceInfo(Struct):
    name: str
    path: str
    description: str | None = None
    hidden: bool | None = None
    source: ReferenceSource
