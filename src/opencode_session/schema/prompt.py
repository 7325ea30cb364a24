"""Prompts as clients send them (PromptInput) and as they are stored (Prompt)."""

from __future__ import annotations

from pydantic import Field

from .base import Struct


class PromptSource(Struct):
    start: float
    end: float
    text: str


# A file, http(s) or data URI, or a path without a scheme: what admission attaches. The scheme is read as
# urllib.parse reads it (after leading control characters and spaces, a letter, then letters, digits, `+`, `-`, `.`
# up to the first `:`).
ATTACHMENT_URI = (r"^[\x00-\x20]*(?:(?:[Ff][Ii][Ll][Ee]|[Hh][Tt][Tt][Pp][Ss]?|[Dd][Aa][Tt][Aa]):"
                  r"|[^A-Za-z\x00-\x20]|[A-Za-z][A-Za-z0-9+.-]*(?:[^A-Za-z0-9+.:-]|$))")


class PromptInputFileAttachment(Struct):
    uri: str = Field(min_length=1, pattern=ATTACHMENT_URI)
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
