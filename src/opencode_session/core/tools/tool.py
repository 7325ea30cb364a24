"""What a tool is and what it receives and returns: the Tool protocol, ToolContext, ToolOutput, ToolFailure."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from opencode_session.schema import session_errors
from opencode_session.schema.message import ToolContent, ToolTextContent

from ..authority import AccessRefused, Authority
from ..permission import DEFAULT_RULES, Ruleset

# The tool failure type of each kind of refusal: a denial, or a permission only the user could grant.
_REFUSALS = {"deny": session_errors.PERMISSION_REJECTED, "ask": session_errors.PERMISSION_REQUIRED}


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
    rules: Ruleset = DEFAULT_RULES  # the permission rules of the Step that issued the call

    @property
    def authority(self) -> Authority:
        """What this call may touch; its checks touch the file system, so run them off the event loop, inside
        `refusals_as_failures()`."""
        return Authority(self.directory, self.rules)

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
    def of_text(cls, text: str, structured: dict[str, Any] | None = None, title: str | None = None) -> ToolOutput:
        return cls(content=[ToolTextContent(text=text)], structured=dict(structured or {}), title=title)

    def text(self) -> str:
        """All text parts joined by newlines; file parts are not text and are skipped."""
        return "\n".join(part.text for part in self.content if isinstance(part, ToolTextContent))


class ToolFailure(Exception):
    """A failure the model should read and can act on (bad path, missing file, refused permission), not a defect.
    `type` is the error type the settled call records."""

    def __init__(self, message: str, type: str = session_errors.TOOL_EXECUTION) -> None:
        super().__init__(message)
        self.message = message
        self.type = type


@contextmanager
def refusals_as_failures() -> Iterator[None]:
    """Turn an authority refusal into the typed ToolFailure the model reads."""
    try:
        yield
    except AccessRefused as refused:
        raise ToolFailure(refused.message, _REFUSALS.get(refused.effect, session_errors.TOOL_EXECUTION)) from None


@runtime_checkable
class Tool(Protocol):
    """A named capability the model can call. `parameters` is the JSON Schema (2020-12) of its input."""

    name: str
    description: str
    parameters: dict[str, Any]

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput: ...
