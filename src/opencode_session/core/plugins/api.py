"""What a Python plugin is and what it may contribute: `Plugin` (a name and a `setup`), the `PluginRegistry` its
setup fills (tools, tool sources, instruction sources, provider adapters, hooks) and what each hook is shown."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeAlias, TypeVar, cast

from ...schema.events import EventRecord
from ..boundary import Boundary
from ..instructions.algebra import EMPTY, UNAVAILABLE, Instructions, Source, Unavailable, make, validate_key
from ..instructions.composition import POSITIONS, InstructionProducer
from ..llm.model import LLMRequest
from ..llm.providers import AdapterSpec
from ..tools.arguments import registering
from ..tools.source import StaticTools, ToolSource
from ..tools.tool import Tool, ToolOutput
from ..userhooks.service import ToolVerdict

log = logging.getLogger(__name__)

# Where an instruction source of a plugin goes by default: after MCP guidance, before the API-managed entries.
PLUGIN_POSITION: Final = "plugins"

T = TypeVar("T")
MaybeAwaitable: TypeAlias = T | Awaitable[T]  # a hook may be a plain function or a coroutine function


@dataclass(frozen=True)
class ProviderRequest:
    """What a before-request hook is shown: the provider request of one Step, and whose Step it is. The hook may
    return a changed request (`dataclasses.replace(hooked.request, ...)`) to send instead, or None to send it as
    it is."""

    session_id: str
    assistant_message_id: str
    agent: str
    provider_id: str
    model_id: str
    request: LLMRequest


@dataclass(frozen=True)
class ToolResult:
    """What an after-tool-result hook is shown: a local tool call that succeeded, with its input and output. The
    hook may return another ToolOutput for the model (and the durable record) to get instead, or None."""

    session_id: str
    message_id: str
    call_id: str
    tool: str
    input: Mapping[str, Any]
    output: ToolOutput


@dataclass(frozen=True)
class ToolCallRequest:
    """What a before-tool hook is shown: a local tool call about to run. The hook may return a `ToolVerdict`
    (`core.userhooks`) to refuse it (`decision="deny"` with the reason the model reads), to ask the user, or to
    run another input, or None to let the permission rules decide as usual."""

    session_id: str
    message_id: str
    call_id: str
    tool: str
    input: Mapping[str, Any]


@dataclass(frozen=True)
class InstructionRequest:
    """What a plugin's instruction source is asked at a Safe Step Boundary: whose Step it is and where it runs."""

    session_id: str
    agent: str
    directory: Path
    project_root: Path


@dataclass(frozen=True)
class TerminalRequest:
    """What a PTY Environment hook is shown: the Location a terminal is created in and its resolved working
    directory."""

    directory: Path
    project_root: Path
    cwd: Path


BeforeRequest = Callable[[ProviderRequest], MaybeAwaitable[LLMRequest | None]]
BeforeTool = Callable[[ToolCallRequest], MaybeAwaitable[ToolVerdict | None]]
AfterToolResult = Callable[[ToolResult], MaybeAwaitable[ToolOutput | None]]
OnEvent = Callable[[EventRecord], MaybeAwaitable[None]]
PtyEnvironmentHook = Callable[[TerminalRequest], Mapping[str, str] | None]  # plain functions only
# A plugin's instruction text at a boundary: None means it has none (after some, the model is told it no longer
# applies); raising `PluginInstructionsUnavailable` keeps what the model was told last.
InstructionText = Callable[[InstructionRequest], MaybeAwaitable[str | None]]


class PluginInstructionsUnavailable(Exception):  # noqa: N818 - it is a state, as the algebra's Unavailable
    """Raised by an instruction source that cannot say now (its server is down): the model keeps what it was told,
    and a first baseline waits for it, as for every Unavailable Instruction Source."""


async def call_hook(hook: Callable[[Any], Any], argument: Any) -> Any:
    """A hook's answer, whether it is a plain function or a coroutine function."""
    result = hook(argument)
    if inspect.isawaitable(result):
        result = await result
    return result


@dataclass(frozen=True)
class Hooked:
    """One hook with the plugin that registered it (failures name both)."""

    plugin: str
    hook: Callable[[Any], Any]


@dataclass
class PluginRegistry:
    """What one plugin's `setup` contributes; every method may be called any number of times."""

    plugin: str
    # what opencode.json gave the plugin: its entry `["python:module", {...}]`'s object (empty otherwise)
    options: Mapping[str, Any] = field(default_factory=dict)
    tools: StaticTools = field(init=False)
    tool_sources: list[ToolSource] = field(default_factory=list)
    # (position, source key, producer)
    instruction_producers: list[tuple[str, str, InstructionProducer]] = field(default_factory=list)
    adapters: list[AdapterSpec] = field(default_factory=list)
    before_request_hooks: list[Hooked] = field(default_factory=list)
    before_tool_hooks: list[Hooked] = field(default_factory=list)
    after_tool_result_hooks: list[Hooked] = field(default_factory=list)
    event_hooks: list[Hooked] = field(default_factory=list)
    pty_environment_hooks: list[Hooked] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tools = StaticTools(f"plugin:{self.plugin}")

    def tool(self, tool: Tool | Callable[..., Any] | None = None, /, *, name: str | None = None,
             description: str | None = None, changes_files: bool = True, idempotent: bool = False) -> Any:
        """Offer a Python tool (after the built-ins: a built-in of the same name wins): a tool object, or a typed
        function as `@registry.tool` / `@registry.tool(name=...)` (FunctionTool; the function is returned)."""
        if tool is not None and (hasattr(tool, "execute") or not callable(tool)):
            for attribute in ("name", "description", "parameters", "execute"):
                if not hasattr(tool, attribute):
                    raise TypeError(f"a tool needs {attribute!r}; {tool!r} has none")
            self.tools.add(cast(Tool, tool))
            return tool
        return registering(self.tools.add, tool, {"name": name, "description": description,
                                                  "changes_files": changes_files, "idempotent": idempotent})

    def tool_source(self, source: ToolSource) -> None:
        """Offer the tools of a source with a lifetime (started before the first Step, stopped at shutdown)."""
        if not isinstance(source, ToolSource):
            raise TypeError(f"{source!r} is not a ToolSource (name, start, list_tools, stop)")
        self.tool_sources.append(source)

    def instructions(self, key: str, text: InstructionText, *, position: str = PLUGIN_POSITION) -> None:
        """An Instruction Source `plugin/<plugin>/<key>` whose text `text` gives at each Safe Step Boundary; a change
        reaches the model as an Instruction Update. `position` is one of the runner's declared positions."""
        source_key = validate_key(f"plugin/{self.plugin}/{key}")
        if position not in POSITIONS:
            raise ValueError(f"not a declared instruction position: {position!r} (one of {', '.join(POSITIONS)})")
        self.instruction_producers.append((position, source_key, _text_producer(source_key, text)))

    def adapter(self, spec: AdapterSpec) -> None:
        """A provider adapter for a wire protocol (opencode.json providers whose `npm` is one of `spec.npm` use it)."""
        self.adapters.append(spec)

    def before_request(self, hook: BeforeRequest) -> None:
        """Called with every Step's provider request before it is sent; raising fails that Step."""
        self.before_request_hooks.append(Hooked(self.plugin, hook))

    def before_tool(self, hook: BeforeTool) -> None:
        """Called with every local tool call before it runs (after the user's PreToolUse hooks); its verdict may
        refuse, ask or rewrite the call; raising fails that call."""
        self.before_tool_hooks.append(Hooked(self.plugin, hook))

    def after_tool_result(self, hook: AfterToolResult) -> None:
        """Called with every successful local tool call's output before it settles; raising fails that call."""
        self.after_tool_result_hooks.append(Hooked(self.plugin, hook))

    def on_event(self, hook: OnEvent) -> None:
        """Called with every durable session event after it commits, in commit order; raising is logged only."""
        self.event_hooks.append(Hooked(self.plugin, hook))

    def pty_environment(self, hook: PtyEnvironmentHook) -> None:
        """Additions to every new terminal's environment (the PTY Environment), after the caller's and before the
        host's own overlay; a plain function. One that raises adds nothing to that terminal (logged)."""
        self.pty_environment_hooks.append(Hooked(self.plugin, hook))

    def contributes(self) -> dict[str, list[str]]:
        """What this plugin adds, by kind, for listings (a tool source's tools are known once it started)."""
        hooks = [kind for kind, found in (("before-request", self.before_request_hooks),
                                          ("before-tool", self.before_tool_hooks),
                                          ("after-tool-result", self.after_tool_result_hooks),
                                          ("on-event", self.event_hooks),
                                          ("pty-environment", self.pty_environment_hooks)) if found]
        return {"tools": [tool.name for tool in self.tools.list_tools()],
                "tool_sources": [source.name for source in self.tool_sources],
                "instructions": [f"{key} ({position})" for position, key, _ in self.instruction_producers],
                "adapters": [spec.protocol for spec in self.adapters],
                "hooks": hooks}


@dataclass(frozen=True)
class Plugin:
    """A Python plugin: `setup(registry)` is called once when a runtime loads it. An entry point in the group
    `opencode_session.plugins` (or a `python:module[:attribute]` entry of opencode.json's `plugin`) names a Plugin,
    or a plain `setup` function, which then takes the entry point's (or module's) name."""

    name: str
    setup: Callable[[PluginRegistry], Any]  # returns nothing (a coroutine is refused: setup is not async)
    description: str = ""


def _text_producer(key: str, text: InstructionText) -> InstructionProducer:
    async def produce(boundary: Boundary) -> Instructions:
        asked = InstructionRequest(boundary.session.id, boundary.agent.name, boundary.location.directory,
                                   boundary.location.project_root)
        try:
            value: str | None | Unavailable = await call_hook(text, asked)
        except PluginInstructionsUnavailable:
            value = UNAVAILABLE
        except Exception:  # a defect of the plugin: the model keeps what it was told, the Step goes on
            log.exception("instruction source %s of a plugin failed; it counts as unavailable", key)
            value = UNAVAILABLE
        if value is None or (isinstance(value, str) and not value.strip()):
            value = None
        elif not isinstance(value, str | Unavailable):
            log.error("instruction source %s of a plugin gave %s, not text; it counts as unavailable", key,
                      type(value).__name__)
            value = UNAVAILABLE
        return _text_source(key, value)

    return produce


def _text_source(key: str, value: str | Unavailable | None) -> Instructions:
    if value is None:
        return EMPTY

    async def load() -> str | Unavailable:
        return value

    return make(Source(key=key, encode=lambda text: text, decode=str, load=load, baseline=lambda text: text,
                       update=lambda _previous, text: f"These instructions replace the ones given earlier:\n{text}",
                       removed=lambda _previous: f"The instructions {key} gave earlier no longer apply."))


__all__ = ["PLUGIN_POSITION", "AfterToolResult", "BeforeRequest", "BeforeTool", "Hooked", "InstructionRequest",
           "InstructionText", "OnEvent", "Plugin", "PluginInstructionsUnavailable", "PluginRegistry", "ProviderRequest",
           "PtyEnvironmentHook", "TerminalRequest", "ToolCallRequest", "ToolResult", "call_hook"]
