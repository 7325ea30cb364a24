"""What a tool is and what it receives and returns: the Tool protocol, ToolContext, ToolOutput, ToolFailure."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import anyio

from opencode_session.schema import session_errors
from opencode_session.schema.base import Struct
from opencode_session.schema.message import ToolContent, ToolTextContent

from .. import permission
from ..config import Config
from ..config.trust import ConfigurationPaths
from ..permission import DEFAULT_RULES, AccessRefused, Asker, Authority, Requirement, Ruleset
from .output import structured_text


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
    asker: Asker | None = None  # None: nobody can answer, so an `ask` fails the call as permission.required
    # Live output of a running call (e.g. a command's stdout), shown to clients before the call settles; call it on
    # the event loop's thread (it publishes to the live bus), never from a worker thread.
    on_output: Callable[[str], None] | None = None
    # Publishes a live-only event about the call's session on the instance stream (e.g. `todo.updated`); on the
    # event loop's thread too. None: nobody listens.
    publish_live: Callable[[Struct], None] | None = None
    questioner: Callable[[list[dict[str, Any]]], Awaitable[list[list[str]]]] | None = None
    managed_roots: tuple[Path, ...] = ()  # Managed Tool Output File directories: readable without external_directory
    # Whether the Step's model takes image input, so `read` may return an image as an attachment.
    model_accepts_images: bool = False
    # The configuration in effect at the Step's Safe Step Boundary (a tool never reads the files itself).
    config: Config = field(default_factory=Config)

    @property
    def authority(self) -> Authority:
        """The Location and rules this call's paths are resolved against; changing a configuration file (any the
        loader reads here, by its resolved path) is allowed only by a rule that names it."""
        return Authority(self.directory, self.rules, self.managed_roots, self._configuration)

    def _configuration(self, path: Path) -> bool:
        env = os.environ if self.env is None else self.env
        return ConfigurationPaths.at(self.directory, self.project_root, env).covers(path)

    async def permit_path(self, action: str, raw: str, metadata: dict[str, Any] | None = None) -> Path:
        """The resolved path `raw` names once `action` on it is allowed (asking the user where the rules say
        `ask`), including `external_directory` when it is outside the Location; else ToolFailure."""
        path, needs = await self._resolve(lambda: self.authority.requirements(action, raw))
        await self.satisfy(needs, metadata)
        return path

    def refuse_unreadable(self, path: Path) -> None:
        """ToolFailure when the read rules deny `path`: a tool that changes a file by its content (its context
        lines, its old text) would otherwise tell the model what `read` may not."""
        if self.authority.effect_on("read", path) == "deny":
            raise ToolFailure(f"Permission denied: read {self.display(path)}", session_errors.PERMISSION_REJECTED)

    async def locate(self, raw: str, metadata: dict[str, Any] | None = None) -> Path:
        """The resolved path `raw` names once reaching it is allowed (only `external_directory` is checked)."""
        path, needs = await self._resolve(lambda: self.authority.locate(raw))
        await self.satisfy(needs, metadata)
        return path

    async def permit(self, action: str, resources: Sequence[str], *, save: Sequence[str] | None = None,
                     metadata: dict[str, Any] | None = None) -> None:
        """Return once `action` on every resource is allowed (e.g. `bash` on a command); else ToolFailure.
        `save` defaults to the resources themselves."""
        await self.satisfy([Requirement(action, r) for r in resources], metadata,
                           None if save is None else {action: save})

    async def satisfy(self, needs: Sequence[Requirement], metadata: dict[str, Any] | None = None,
                      save: Mapping[str, Sequence[str]] | None = None) -> None:
        """Check each requirement in order: a `deny` fails at once (before anything is asked); the ones that `ask`
        are asked per action, in order. `save` are an action's patterns an `always` remembers (default: the
        resources asked)."""
        with refusals_as_failures():
            await permission.satisfy(self.rules, self.asker, needs, metadata, save)

    @staticmethod
    async def _resolve(find: Callable[[], tuple[Path, list[Requirement]]]) -> tuple[Path, list[Requirement]]:
        # Resolving touches the file system (realpath, stat), so it runs off the event loop.
        def run() -> tuple[Path, list[Requirement]]:
            with refusals_as_failures():
                return find()
        return await anyio.to_thread.run_sync(run, abandon_on_cancel=True)

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

    def model_text(self) -> str:
        """The text the model reads: the text parts, or with none the structured value's JSON."""
        if any(isinstance(part, ToolTextContent) for part in self.content):
            return self.text()
        return structured_text(self.structured)


class ToolFailure(Exception):
    """A failure the model should read and can act on (bad path, missing file, refused permission), not a defect.
    `type` is the error type the settled call records."""

    def __init__(self, message: str, type: str = session_errors.TOOL_EXECUTION) -> None:
        super().__init__(message)
        self.message = message
        self.type = type


@contextmanager
def refusals_as_failures() -> Iterator[None]:
    """Turn a permission refusal into the typed ToolFailure the model reads."""
    try:
        yield
    except AccessRefused as refused:
        raise ToolFailure(refused.message, refused.type) from None


@runtime_checkable
class Tool(Protocol):
    """A named capability the model can call. `parameters` is the JSON Schema (2020-12) of its input. A tool with
    `arguments` (a pydantic model; `parameters = schema_of(arguments)`, tools/arguments.py) gets that model, parsed
    from the input, in `execute`; one without gets the input dict. A tool that
    never changes files says `changes_files = False` (no snapshot is taken after it). A tool whose call may safely
    run again, because running it twice has the effect of running it once, says `idempotent = True`: a call the host
    was lost during is then re-run when the session continues; without it (the default), such a call stays failed."""

    name: str
    description: str
    parameters: dict[str, Any]

    async def execute(self, input: Any, ctx: ToolContext) -> ToolOutput: ...
