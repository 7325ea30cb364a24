"""What a tool is and what it receives and returns: the Tool protocol, ToolContext, ToolOutput, ToolFailure."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Awaitable, Callable, Mapping, Protocol, runtime_checkable

from opencode_session.schema.message import ToolContent, ToolTextContent


@dataclass(frozen=True)
class ToolContext:
    """Where and on whose behalf one tool call runs."""

    session_id: str
    message_id: str
    call_id: str
    agent: str
    directory: Path
    project_root: Path
    on_read: Callable[[Path], Awaitable[None]] | None = None
    env: Mapping[str, str] | None = None  # the runtime's environment (config lookups); None: os.environ

    def resolve(self, raw: str) -> Path:
        """An absolute, normalised path; relative input is taken against the Location directory.

        Symlinks are left alone on purpose: the path the model named is the one it should see again.
        """
        path = Path(raw).expanduser()
        if not path.is_absolute():
            path = Path(self.directory) / path
        return Path(os.path.normpath(path))

    def display(self, path: Path) -> str:
        """A short label for titles: relative to the project root when inside it, absolute otherwise."""
        try:
            relative = path.relative_to(self.project_root)
        except ValueError:
            return str(path)
        return str(relative)


@dataclass
class ToolOutput:
    content: list[ToolContent]
    structured: dict[str, Any] = field(default_factory=dict)
    title: str | None = None

    @classmethod
    def of_text(cls, text: str, structured: dict[str, Any] | None = None, title: str | None = None) -> "ToolOutput":
        return cls(content=[ToolTextContent(text=text)], structured=dict(structured or {}), title=title)

    def text(self) -> str:
        """All text parts joined by newlines; file parts are not text and are skipped."""
        return "\n".join(part.text for part in self.content if isinstance(part, ToolTextContent))


class ToolFailure(Exception):
    """A failure the model should read and can act on (bad path, missing file, ...), not a defect."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@runtime_checkable
class Tool(Protocol):
    """A named capability the model can call. `parameters` is the JSON Schema (2020-12) of its input."""

    name: str
    description: str
    parameters: dict[str, Any]

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...
