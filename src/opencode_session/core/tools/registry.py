"""The tool registry: which tools exist, their definitions for providers, and settling one call into a result."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

from opencode_session.schema import session_errors
from opencode_session.schema.common import SessionErrorInfo
from opencode_session.schema.message import ToolTextContent

from ..config import Config
from ..llm.model import ToolSpec
from .builtin import (
    ApplyPatchTool,
    BashTool,
    EditTool,
    GlobTool,
    GrepTool,
    QuestionTool,
    ReadTool,
    SkillTool,
    TodoWriteTool,
    WebFetchTool,
    WebSearchTool,
    WriteTool,
)
from .managed import ManagedOutputs
from .output import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINES, bound_text, fits
from .tool import Tool, ToolContext, ToolFailure, ToolOutput

log = logging.getLogger(__name__)

_MAX_REPORTED_INPUT_ERRORS = 5
# Outputs up to this many characters are checked against the bounds on the event loop (microseconds); larger ones are
# left to `bound` in a worker thread.
QUICK_CHECK_CHARS = 256 * 1024


# what a provider adapter sends to the model for one tool: the LLM request's own tool record
ToolDefinition = ToolSpec


@dataclass(frozen=True)
class ToolSucceeded:
    output: ToolOutput
    truncated: bool = False  # the text the model sees is not the whole output
    output_path: str | None = None  # the Managed Tool Output File holding the whole text (None: none, or lossy)


@dataclass(frozen=True)
class ToolErrored:
    error: SessionErrorInfo


Settlement = ToolSucceeded | ToolErrored


def _errored(type_: str, message: str) -> ToolErrored:
    return ToolErrored(SessionErrorInfo(type=type_, message=message))


def _describe_input_errors(name: str, validator: Draft202012Validator, input: Any) -> str | None:
    errors = sorted(validator.iter_errors(input), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return None
    lines = []
    for error in errors[:_MAX_REPORTED_INPUT_ERRORS]:
        where = "/".join(str(p) for p in error.absolute_path) or "input"
        lines.append(f"{where}: {error.message}")
    if len(errors) > _MAX_REPORTED_INPUT_ERRORS:
        lines.append(f"... and {len(errors) - _MAX_REPORTED_INPUT_ERRORS} more")
    return f"Invalid input for tool {name}: " + "; ".join(lines)


class ToolRegistry:
    """Holds tools by name and turns one call into exactly one Settlement."""

    def __init__(self, *, max_lines: int = DEFAULT_MAX_LINES, max_bytes: int = DEFAULT_MAX_BYTES,
                 outputs: ManagedOutputs | None = None) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, Draft202012Validator] = {}
        self._schemas: dict[str, str] = {}  # parameters as JSON text: decoding it is the cheapest fresh copy
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.outputs = outputs  # where complete oversized outputs are kept; None: previews only

    def register(self, tool: Tool) -> None:
        """Add a tool. A broken schema or a taken name is a programming error and raises here, not mid-Step."""
        if tool.name in self._tools:
            raise ValueError(f"tool already registered: {tool.name}")
        Draft202012Validator.check_schema(tool.parameters)
        self._tools[tool.name] = tool
        self._validators[tool.name] = Draft202012Validator(tool.parameters)
        self._schemas[tool.name] = json.dumps(tool.parameters)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def changes_files(self, name: str) -> bool:
        """Whether a call of `name` may change files (its snapshots depend on it): unless the tool says
        `changes_files = False`, it may."""
        tool = self._tools.get(name)
        return tool is not None and bool(getattr(tool, "changes_files", True))

    def offered(self, config: Config) -> list[str]:
        """The names of the tools offered under `config`: all of them, except tools with an `offered(config)` check
        that says no (e.g. `websearch` without a configured backend)."""
        checks = {name: getattr(tool, "offered", None) for name, tool in self._tools.items()}
        return [name for name, check in checks.items() if check is None or check(config)]

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        """Definitions in registration order, so the provider sees a stable list (prompt caching).

        `names` filters; names with no registered tool are skipped.
        """
        wanted = None if names is None else set(names)
        return [
            # A copy, so an adapter rewriting a schema for its provider cannot change validation.
            ToolDefinition(tool.name, tool.description, json.loads(self._schemas[tool.name]))
            for tool in self._tools.values()
            if wanted is None or tool.name in wanted
        ]

    async def settle(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        """Run one call and always return a bounded Settlement; only cancellation escapes."""
        return self.bound(await self.run(name, input, ctx))

    async def run(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        """Run one call and return its Settlement before bounding; only cancellation escapes."""
        tool = self._tools.get(name)
        if tool is None:
            return _errored(session_errors.TOOL_UNKNOWN, f"Unknown tool: {name}")
        problem = _describe_input_errors(name, self._validators[name], input)
        if problem is not None:
            return _errored(session_errors.TOOL_INVALID_INPUT, problem)
        try:
            output = await tool.execute(input, ctx)
        except ToolFailure as failure:
            return _errored(failure.type, failure.message)
        except Exception as defect:
            # CancelledError is a BaseException, so it is not caught here and still propagates.
            log.exception("tool %s failed unexpectedly (call %s)", name, ctx.call_id)
            return _errored(session_errors.TOOL_EXECUTION, f"{type(defect).__name__}: {defect}")
        if not isinstance(output, ToolOutput):
            return _errored(session_errors.TOOL_EXECUTION,
                            f"TypeError: tool {name} returned {type(output).__name__}, not ToolOutput")
        return ToolSucceeded(output)

    def within_bounds(self, settlement: Settlement, max_lines: int | None = None,
                      max_bytes: int | None = None) -> bool:
        """Whether `bound` would hand the settlement back as it is (writing no file). Cheap enough for the event
        loop: an output too large to check quickly answers False, and `bound`, off the loop, decides."""
        if not isinstance(settlement, ToolSucceeded) or settlement.truncated:
            return True
        output = settlement.output
        if not any(isinstance(part, ToolTextContent) for part in output.content):
            return not output.structured  # its JSON is what the model reads: measured by `bound`, off the loop
        text = output.text()
        return len(text) <= QUICK_CHECK_CHARS and fits(text, self._lines(max_lines), self._bytes(max_bytes))

    def _lines(self, max_lines: int | None) -> int:
        return self.max_lines if max_lines is None else max_lines

    def _bytes(self, max_bytes: int | None) -> int:
        return self.max_bytes if max_bytes is None else max_bytes

    def bound(self, settlement: Settlement, max_lines: int | None = None, max_bytes: int | None = None) -> Settlement:
        """The Model Tool Output of a settlement: the text the model reads (joined text parts, or a structured-only
        result's JSON) over `max_lines` or `max_bytes` (the registry's own bounds by default) keeps its head and
        tail, and the complete text goes to a Managed Tool Output File that the preview names. The structured value
        stays as it is. Blocking (it may write that file): run it off the event loop."""
        if not isinstance(settlement, ToolSucceeded) or settlement.truncated:
            return settlement
        output = settlement.output
        lines, size = self._lines(max_lines), self._bytes(max_bytes)
        text = output.model_text()
        if fits(text, lines, size):
            return settlement
        path = self.outputs.keep(text) if self.outputs is not None else None
        note = (f"the complete output is in {path}" if path is not None
                else "the complete output could not be kept")
        preview = ToolTextContent(text=bound_text(text, lines, size, note)[0])
        texts = [i for i, part in enumerate(output.content) if isinstance(part, ToolTextContent)]
        if texts:
            # The text parts collapse into one bounded part where the first one was; file parts keep their place.
            content = [part for i, part in enumerate(output.content) if i not in texts[1:]]
            content[texts[0]] = preview
        else:
            content = [preview, *output.content]  # the JSON preview is the text; file parts follow it
        return ToolSucceeded(ToolOutput(content=content, structured=output.structured, title=output.title), True,
                             None if path is None else str(path))


def default_registry() -> ToolRegistry:
    """A registry with the built-in tools."""
    registry = ToolRegistry()
    tools = (ReadTool(), WriteTool(), EditTool(), ApplyPatchTool(), GlobTool(), GrepTool(), BashTool(), SkillTool(),
             TodoWriteTool(), QuestionTool(), WebFetchTool(), WebSearchTool())
    for tool in tools:
        registry.register(tool)
    return registry
