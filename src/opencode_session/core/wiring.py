"""How a runtime runs its sessions: `make_drain_factory` wires the runner to the runtime's services (store,
configuration, providers, permissions, questions, tool output files, session titles, plugins), and `DeferredDrain`
loads that runner in a worker thread on the first drain, so a server answers before any of it is imported."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import anyio

from .execution.coordinator import Drain

if TYPE_CHECKING:
    from .instructions.composition import InstructionSources
    from .llm import model as llm
    from .llm.retry import Clock
    from .runtime import Runtime
    from .tools.registry import ToolRegistry


def make_drain_factory(
    *,
    tools: ToolRegistry | None = None,
    provider: Callable[[llm.ResolvedModel], llm.Provider] | None = None,
    clock: Clock | None = None,
    titles: bool = True,
    instruction_sources: InstructionSources | None = None,
) -> Callable[[Runtime], Drain]:
    """A `RuntimeOptions.drain_factory` running the runner over the runtime's services; defaults are the real
    providers, the built-in tools and instruction sources, the wall clock and background session titles. The runner's
    tools are a registry of its own, read from `tools` when the runtime is built (`tools` itself is left as given):
    its sources, then the runtime's MCP servers and subagents (unless `tools` has them), then the plugins' tools. The
    MCP servers are added (as MCP guidance) to the instruction sources as well."""

    def factory(runtime: Runtime) -> Drain:
        # imported here, not above: importing this module (a server does at start) loads none of the runner
        from .execution.runner import Runner, RunnerDeps
        from .execution.title import SessionTitles
        from .instructions.checkpoint import CheckpointPreparer
        from .instructions.composition import InstructionSources
        from .instructions.nearby import NearbyInstructions
        from .llm.retry import Clock, base_delay_ms
        from .mcp.guidance import McpGuidance
        from .mcp.source import McpToolSource
        from .subagents import Delegation, SubagentTools
        from .tools.registry import ToolRegistry, default_registry

        options = runtime.options
        retry_base = options.retry_base_delay_ms
        plugins = runtime.plugins
        # the MCP guidance of the runtime's servers, then any plugins' sources
        with_mcp = (instruction_sources or InstructionSources()).extended([("mcp", McpGuidance(runtime.mcp,
                                                                                               options.env))])
        sources = with_mcp if plugins is None else plugins.instruction_sources(with_mcp)
        given = tools if tools is not None else default_registry()
        tool_sources = list(given.sources)
        if not any(isinstance(source, McpToolSource) for source in tool_sources):
            tool_sources.append(McpToolSource(runtime.mcp))  # the MCP servers configured at each Step's Location
        if not any(isinstance(source, SubagentTools) for source in tool_sources):
            def interrupt(child: str) -> Awaitable[object]:
                return runtime.execution.interrupt(child, "user")

            tool_sources.append(SubagentTools(Delegation(runtime.sessions, interrupt, options.env,
                                                         runtime.start_anywhere)))
        if plugins is not None:  # the plugins' tools come after the registry's own
            tool_sources += plugins.tool_sources()
        registry = ToolRegistry(tool_sources, max_lines=given.max_lines, max_bytes=given.max_bytes,
                                outputs=runtime.outputs if given.outputs is None else given.outputs)
        runtime.on_close(registry.stop)
        provider_for = provider or runtime.providers.for_model
        deps = RunnerDeps(store=runtime.store, env=options.env, provider_for=provider_for, tools=registry,
                          clock=clock or Clock(),
                          instructions=CheckpointPreparer(runtime.store, options.env, sources=sources),
                          on_read=NearbyInstructions(runtime.store).hook,
                          titles=SessionTitles(runtime.store, options.env, provider_for, runtime.spawn) if titles
                          else None,
                          retry_base_delay_ms=base_delay_ms(options.env) if retry_base is None else retry_base,
                          permissions=runtime.permissions, questions=runtime.questions, config=runtime.config,
                          snapshots=runtime.snapshots, hooks=plugins.hooks if plugins is not None else None,
                          user_hooks=runtime.user_hooks, host=runtime.host)
        return Runner(deps).drain

    return factory


runner_drain_factory = make_drain_factory()


class DeferredDrain:
    """A `RuntimeOptions.drain_factory` whose drain is `load(runtime)` (by default the real runner with the built-in
    tools and providers), called once, in a worker thread, when the first session runs, or earlier when `warm` asks
    (a server does once it is listening, so its first prompt does not wait for the load). One runtime per instance."""

    def __init__(self, load: Callable[[Runtime], Drain] = runner_drain_factory) -> None:
        self._load = load
        self._runtime: Runtime | None = None
        self._loading: asyncio.Future[Drain] | None = None

    def __call__(self, runtime: Runtime) -> Drain:
        self._runtime = runtime

        async def drain(session_id: str, force: bool) -> None:
            # shielded: a cancelled first drain must not cancel the load the next one will await
            real = await asyncio.shield(self._started())
            await real(session_id, force)

        return drain

    def warm(self) -> asyncio.Future[Drain]:
        """Start loading now, in the background (the load is returned, to be awaited or not); a load that fails
        fails the first drain, which reports it."""
        loading = self._started()
        loading.add_done_callback(lambda done: done.cancelled() or done.exception())
        return loading

    def _started(self) -> asyncio.Future[Drain]:
        if self._loading is None:
            if self._runtime is None:
                raise RuntimeError("the drain factory has not been given its runtime yet")
            self._loading = asyncio.ensure_future(anyio.to_thread.run_sync(self._load, self._runtime))
        return self._loading
