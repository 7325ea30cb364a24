"""Prompts as clients send them (PromptInput) and as they are stored (Prompt)."""

from __future__ import annotations

from pydantic import Field

from .base import Struct


class PromptSource(Struct):
    start: float
    end: float
    text: str


class PromptInputFileAttachment(Struct):
    uri: str = Field(min_length=1)
    name: str | None = None
    description: str | None = None
    source: PromptSource | None = None


class PromptFileAttachment(Struct):
    uri: str
    mime: str
    name: str | None = None
    description: str | None = None
    source: PromptSource | None = None


class PromptAgentAttachment(Struct):
    name: str = Field(min_length=1)
    source: PromptSource | None = None


class PromptInput(Struct):
    text: str
    files: list[PromptInputFileAttachment] | None = None
    agents: list[PromptAgentAttachment] | None = None


class Prompt(Struct):
    text: str
    files: list[PromptFileAttachment] | None = None
    agents: list[PromptAgentAttachment] | None = None
