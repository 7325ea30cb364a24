"""The tool registry: the tools the runner offers, composed from tool sources; one Step's ToolSet (their definitions
for providers, settling one call into a result); and the bounds of what the model reads of an output."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from opencode_session.schema import session_errors
from opencode_session.schema.common import SessionErrorInfo
from opencode_session.schema.message import ToolTextContent

from ..config import Config
from ..llm.model import ToolSpec
from .arguments import is_schema_of, registering
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
from .source import StaticTools, ToolSource
from .tool import Tool, ToolContext, ToolFailure, ToolOutput

if TYPE_CHECKING:
    from jsonschema import Draft202012Validator

log = logging.getLogger(__name__)

_MAX_REPORTED_INPUT_ERRORS = 5
# Outputs up to this many characters are checked against the bounds on the event loop (microseconds); larger ones are
# left to `bound` in a worker thread.
QUICK_CHECK_CHARS = 256 * 1024
# Compiled tools kept across boundaries whose sources list different tools (MCP servers of several Locations).
_MAX_REMEMBERED = 4096


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


@dataclass(frozen=True)
class _Compiled:
    """A tool with what checking and offering it needs, made once per tool object."""

    tool: Tool
    schema: str  # parameters as JSON text: decoding it is the cheapest fresh copy
    arguments: type[BaseModel] | None  # what `execute` receives, parsed from input the schema admitted; None: the dict

    @cached_property
    def validator(self) -> Draft202012Validator:
        """The input check, made with the tool's first call: `jsonschema` is not loaded by a Step that calls none."""
        from jsonschema import Draft202012Validator

        return Draft202012Validator(self.tool.parameters)


def _compile(tool: Tool) -> _Compiled:
    """Raises jsonschema's SchemaError for parameters that are not a JSON Schema. Parameters that are exactly what
    `schema_of` made of the tool's arguments model (every typed built-in's) are one by construction: they are not
    checked against the metaschema again, which loading `jsonschema` and checking a dozen schemas cost every process's
    first Step ~60 ms."""
    schema = json.dumps(tool.parameters)
    arguments = getattr(tool, "arguments", None)
    model = arguments if isinstance(arguments, type) and issubclass(arguments, BaseModel) else None
    if model is None or not is_schema_of(schema, model):
        from jsonschema import Draft202012Validator

        Draft202012Validator.check_schema(tool.parameters)
    if arguments is not None and model is None:
        raise TypeError(f"tool {tool.name}: `arguments` is not a pydantic model")
    return _Compiled(tool, schema, model)


def _parse(compiled: _Compiled, input: dict[str, Any]) -> Any:
    """The value `execute` receives: the arguments model parsed from `input` (which the schema, derived from that
    model, admitted: the check above names the field the model got wrong), or the input itself."""
    if compiled.arguments is None:
        return input
    return compiled.arguments.model_validate(input)


def _describe_validation_error(name: str, invalid: ValidationError) -> str:
    """What a model's own validators (the checks its schema cannot say) found wrong, as the schema check says it."""
    lines = [f"{'/'.join(str(p) for p in e['loc']) or 'input'}: {e['msg']}"
             for e in invalid.errors(include_url=False)[:_MAX_REPORTED_INPUT_ERRORS]]
    if invalid.error_count() > _MAX_REPORTED_INPUT_ERRORS:
        lines.append(f"... and {invalid.error_count() - _MAX_REPORTED_INPUT_ERRORS} more")
    return f"Invalid input for tool {name}: " + "; ".join(lines)


class ToolSet:
    """The tools of one Step, by name: what the registry's sources listed at its boundary. The provider's tool
    definitions and every call of the Step use this one list, so a source that changes its tools meanwhile changes the
    next Step's, never this one's."""

    def __init__(self, registry: ToolRegistry, tools: dict[str, _Compiled]) -> None:
        self.registry = registry
        self._tools = tools

    def get(self, name: str) -> Tool | None:
        compiled = self._tools.get(name)
        return None if compiled is None else compiled.tool

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def changes_files(self, name: str) -> bool:
        """Whether a call of `name` may change files (its snapshots depend on it): unless the tool says
        `changes_files = False`, it may."""
        compiled = self._tools.get(name)
        return compiled is not None and bool(getattr(compiled.tool, "changes_files", True))

    def idempotent(self, name: str) -> bool:
        """Whether a call of `name` may run again when its first run's outcome is unknown (its host was lost): only
        when the tool says `idempotent = True`."""
        compiled = self._tools.get(name)
        return compiled is not None and getattr(compiled.tool, "idempotent", False) is True

    def offered(self, config: Config) -> list[str]:
        """The names of the tools offered under `config`: all of them, except tools with an `offered(config)` check
        that says no (e.g. `websearch` without a configured backend)."""
        checks = {name: getattr(c.tool, "offered", None) for name, c in self._tools.items()}
        return [name for name, check in checks.items() if check is None or check(config)]

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        """Definitions in source order (and each source's own order), so the provider sees a stable list (prompt
        caching). `names` filters; names with no tool are skipped."""
        wanted = None if names is None else set(names)
        return [
            # A copy, so an adapter rewriting a schema for its provider cannot change validation.
            ToolDefinition(c.tool.name, c.tool.description, json.loads(c.schema))
            for c in self._tools.values()
            if wanted is None or c.tool.name in wanted
        ]

    async def settle(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        """Run one call and always return a bounded Settlement; only cancellation escapes."""
        return self.registry.bound(await self.run(name, input, ctx))

    async def run(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        """Run one call and return its Settlement before bounding; only cancellation escapes."""
        compiled = self._tools.get(name)
        if compiled is None:
            return _errored(session_errors.TOOL_UNKNOWN, f"Unknown tool: {name}")
        problem = _describe_input_errors(name, compiled.validator, input)
        if problem is not None:
            return _errored(session_errors.TOOL_INVALID_INPUT, problem)
        try:
            arguments = _parse(compiled, input)
        except ValidationError as invalid:
            return _errored(session_errors.TOOL_INVALID_INPUT, _describe_validation_error(name, invalid))
        try:
            output = await compiled.tool.execute(arguments, ctx)
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
        return self.registry.within_bounds(settlement, max_lines, max_bytes)

    def bound(self, settlement: Settlement, max_lines: int | None = None, max_bytes: int | None = None) -> Settlement:
        return self.registry.bound(settlement, max_lines, max_bytes)


class ToolRegistry:
    """The tools the runner offers, composed from tool sources in order (a name the first source offers wins), and
    the bounds of what the model reads of their output. `snapshot` is one Step's ToolSet; `register` adds a Python
    tool to the registry's own source, after the others. The name-taking methods below read a fresh snapshot."""

    def __init__(self, sources: Iterable[ToolSource] = (), *, max_lines: int = DEFAULT_MAX_LINES,
                 max_bytes: int = DEFAULT_MAX_BYTES, outputs: ManagedOutputs | None = None) -> None:
        self._sources: list[ToolSource] = list(sources)
        self._registered: StaticTools | None = None
        self._compiled: dict[int, _Compiled] = {}  # by id(tool); holds the tool, so the id stays its own
        self._started: set[int] = set()  # id(source) of the sources started (or that failed to start)
        self._failed: set[int] = set()  # id(source) of the sources left out: they failed to start
        self._starting = asyncio.Lock()
        self._shadowed: set[tuple[str, str]] = set()  # (source, tool) names already reported as taken
        self.max_lines = max_lines
        self.max_bytes = max_bytes
        self.outputs = outputs  # where complete oversized outputs are kept; None: previews only

    # --- sources -------------------------------------------------------------------------------------

    @property
    def sources(self) -> tuple[ToolSource, ...]:
        return tuple(self._sources)

    def add_source(self, source: ToolSource) -> None:
        """Compose another source after the ones there are; it starts with the next `start`."""
        self._sources.append(source)

    def register(self, tool: Tool) -> None:
        """Add a Python tool. A broken schema or a taken name is a programming error and raises here, not mid-Step."""
        compiled = _compile(tool)
        if tool.name in self.snapshot():
            raise ValueError(f"tool already registered: {tool.name}")
        if self._registered is None:
            self._registered = StaticTools("registered")
            self._sources.append(self._registered)
        self._registered.add(tool)
        self._compiled[id(tool)] = compiled

    def tool(self, function: Callable[..., Any] | None = None, /, *, name: str | None = None,
             description: str | None = None, changes_files: bool = True, idempotent: bool = False) -> Any:
        """Register a typed function as a tool (tools/arguments.py, FunctionTool): `@registry.tool` or
        `@registry.tool(name=..., changes_files=False)`. The function is returned unchanged."""
        return registering(self.register, function, {"name": name, "description": description,
                                                     "changes_files": changes_files, "idempotent": idempotent})

    async def start(self) -> None:
        """Start every source not started yet, concurrently; one that fails is logged and left out (its tools are
        not offered) until the registry is stopped and started again. Cheap once all are started."""
        if all(id(source) in self._started for source in self._sources):
            return
        async with self._starting:
            todo = [source for source in self._sources if id(source) not in self._started]
            results = await asyncio.gather(*(source.start() for source in todo), return_exceptions=True)
            for source, result in zip(todo, results, strict=True):
                self._started.add(id(source))
                if isinstance(result, BaseException):
                    if not isinstance(result, Exception):
                        raise result
                    self._failed.add(id(source))
                    log.error("tool source %s failed to start; its tools are not offered: %s", source.name, result,
                              exc_info=result)

    async def stop(self) -> None:
        """Stop the started sources, last first; a failure to stop is logged."""
        started = [source for source in self._sources if id(source) in self._started]
        self._started.clear()
        self._failed.clear()
        for source in reversed(started):
            try:
                await source.stop()
            except Exception:
                log.exception("tool source %s failed to stop", source.name)

    async def prepare(self, at: Any) -> None:
        """Let the sources whose tools depend on a Step's boundary (`prepare(boundary)`: MCP servers, per Location)
        get ready for the Step at `at`. Cheap when none does or all are ready."""
        for source in self._sources:
            prepare = getattr(source, "prepare", None)
            if prepare is not None and id(source) not in self._failed:
                await prepare(at)

    def snapshot(self, at: Any = None) -> ToolSet:
        """The tools every usable source lists now, in source order: one Step's ToolSet. A source with
        `tools_at(boundary)` lists those of the boundary `at` (none without one). A tool whose name an earlier
        source took, or whose schema is broken, is left out (and logged once)."""
        tools: dict[str, _Compiled] = {}
        compiled: dict[int, _Compiled] = {}
        for source in self._sources:
            if id(source) in self._failed:
                continue
            located = getattr(source, "tools_at", None)
            listed = source.list_tools() if located is None else (located(at) if at is not None else ())
            for tool in listed:
                known = self._compiled.get(id(tool))
                if known is None or known.tool is not tool:
                    try:
                        known = _compile(tool)
                    except Exception as broken:
                        from jsonschema.exceptions import SchemaError  # loaded by the check that raised it

                        if not isinstance(broken, SchemaError):
                            raise
                        self._report(source, tool, f"its parameters are not a JSON Schema: {broken.message}")
                        continue
                compiled[id(tool)] = known
                if tool.name in tools:
                    self._report(source, tool, "an earlier source offers a tool of that name")
                    continue
                tools[tool.name] = known
        if at is None or len(self._compiled) > _MAX_REMEMBERED:
            self._compiled = compiled  # tools no source lists any more are forgotten
        else:  # other boundaries (Locations) list other tools: theirs stay compiled for their next Step
            self._compiled.update(compiled)
        return ToolSet(self, tools)

    def _report(self, source: ToolSource, tool: Tool, why: str) -> None:
        if (source.name, tool.name) not in self._shadowed:
            self._shadowed.add((source.name, tool.name))
            log.warning("tool %s of source %s is not offered: %s", tool.name, source.name, why)

    # --- one call, outside a Step -----------------------------------------------------------------------

    def get(self, name: str) -> Tool | None:
        return self.snapshot().get(name)

    def names(self) -> list[str]:
        return self.snapshot().names()

    def __contains__(self, name: object) -> bool:
        return name in self.snapshot()

    def offered(self, config: Config) -> list[str]:
        return self.snapshot().offered(config)

    def definitions(self, names: Iterable[str] | None = None) -> list[ToolDefinition]:
        return self.snapshot().definitions(names)

    async def settle(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        return await self.snapshot().settle(name, input, ctx)

    async def run(self, name: str, input: dict[str, Any], ctx: ToolContext) -> Settlement:
        return await self.snapshot().run(name, input, ctx)

    # --- output bounds ---------------------------------------------------------------------------------

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


def builtin_tools() -> StaticTools:
    """The built-in tools, in the order providers see them: OpenCode's tool set."""
    return StaticTools("built-in", (ReadTool(), WriteTool(), EditTool(), ApplyPatchTool(), GlobTool(), GrepTool(),
                                    BashTool(), SkillTool(), TodoWriteTool(), QuestionTool(), WebFetchTool(),
                                    WebSearchTool()))


def default_registry() -> ToolRegistry:
    """A registry composed of the built-in tools; `register` adds more."""
    return ToolRegistry([builtin_tools()])
