"""Model Context assembly: the complete model-visible input of one Step, built into its provider request (the agent's
system text and the Instruction Baseline, Session History lowered for the model with its local attachments loaded
under the Step's rules, the tools offered, and step-local additions such as the last-step notice), and the model a
Step calls (resolved from the boundary, its adapter loaded)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import anyio

from ...schema.common import ModelRef
from ..agents import BUILD_PROMPT
from ..attachments import load_attachments
from ..boundary import Boundary
from ..llm import model as llm
from ..llm.catalog import configured_secrets, model_ref_from_string, resolve_model
from ..llm.providers import load_adapter
from ..permission import Authority, Ruleset, disabled
from ..session.history import HistoryCache, HistoryEntry
from ..store import Store
from ..tools.registry import ToolRegistry, ToolSet
from .lowering import LoweredHistory

MAX_STEPS_NOTICE = (
    "You have reached the maximum number of steps this agent may take, so tools are no longer available. "
    "Reply with text only: say that the step limit was reached, summarise what has been done, list what "
    "remains, and recommend how to continue."
)


@dataclass(frozen=True)
class ModelCall:
    """The model a Step (or a compaction) calls: resolved from the configuration, its adapter, and the configured
    credentials to cut from its error messages."""

    ref: ModelRef | None  # as the boundary names it (None: the configuration names none)
    resolved: llm.ResolvedModel
    provider: llm.Provider
    secrets: tuple[str, ...]

    @property
    def model_ref(self) -> ModelRef:
        """The model as the Step's events record it."""
        return ModelRef(id=self.resolved.model_id, providerID=self.resolved.provider_id,
                        variant=self.ref.variant if self.ref else None)


def named_model(b: Boundary) -> ModelRef | None:
    """The model a boundary names: the session's, else its agent's, else the configured default."""
    return b.session.model or b.agent.model or (model_ref_from_string(b.config.model) if b.config.model else None)


async def model_call(b: Boundary, env: Mapping[str, str],
                     provider_for: Callable[[llm.ResolvedModel], llm.Provider]) -> ModelCall:
    """The model the boundary names, resolved and ready to call (its SDK loaded off the event loop); ProviderError
    when the configuration cannot call it."""
    ref = named_model(b)
    resolved = resolve_model(b.config, ref, env)
    await load_adapter(resolved.protocol)
    return ModelCall(ref, resolved, provider_for(resolved), tuple(configured_secrets(b.config, env, resolved)))


@dataclass(frozen=True)
class ModelContext:
    """One Step's Model Context, and what it was built from."""

    request: llm.LLMRequest
    history: list[HistoryEntry]  # the Session History it lowers (compaction measures and cuts this)
    additions: list[llm.LLMMessage]  # step-local additions after the history
    tools: ToolSet  # the Step's tools: what the registry's sources listed at its boundary
    rules: Ruleset  # what the Step's tools and attachments run under
    last_step: bool  # the agent's allowance ends with this Step: it is offered no tools


class ModelContextBuilder:
    """Builds each Step's Model Context; keeps per session the history read and lowered last, so a Step reads and
    lowers only what changed."""

    def __init__(self, store: Store, env: Mapping[str, str], tools: ToolRegistry, history: HistoryCache) -> None:
        self.store = store
        self.env = env
        self.tools = tools
        self.history = history
        self.lowered = LoweredHistory()

    async def build(self, b: Boundary, baseline: str, step: int, call: ModelCall) -> ModelContext:
        session_id = b.session.id
        history = await self.store.read(lambda reader: self.history.load(reader, session_id))
        last_step = b.agent.steps is not None and step >= b.agent.steps
        rules = b.rules(self.env)
        messages, unread = self.lowered.lower(session_id, history, call.model_ref, call.resolved.capabilities.images)
        if unread:
            # re-checked under this Step's rules: the file, or the rules, may have changed since admission
            authority = Authority(b.location.directory, rules)
            loaded = await anyio.to_thread.run_sync(load_attachments, messages, authority, abandon_on_cancel=True)
            messages = self.lowered.keep_loaded(session_id, loaded)
        additions: list[llm.LLMMessage] = [llm.UserMessage([llm.TextPart(MAX_STEPS_NOTICE)])] if last_step else []
        messages.extend(additions)
        await self.tools.prepare(b)  # sources whose tools belong to the Location (MCP servers) get ready for it
        toolset = self.tools.snapshot(b)  # this Step's tools, whatever a source lists meanwhile
        offered = [] if last_step else [n for n in toolset.offered(b.config) if not disabled(rules, n)]
        resolved = call.resolved
        request = llm.LLMRequest(
            model=resolved, system=[s for s in (b.agent.prompt or BUILD_PROMPT, baseline) if s], messages=messages,
            tools=toolset.definitions(offered), tool_choice="none" if last_step else "auto",
            prompt_cache_key=session_id, controls=_controls(b, resolved), options=resolved.options,
        )
        return ModelContext(request, history, additions, toolset, rules, last_step)


def _controls(b: Boundary, model: llm.ResolvedModel) -> llm.GenerationControls:
    """The agent's sampling controls over the model's own, and its output limit; a model that refuses a temperature
    is sent none from the agent."""
    agent = llm.GenerationControls(
        temperature=b.agent.temperature if model.capabilities.temperature else None,
        top_p=b.agent.top_p,
    )
    return agent.over(model.controls).over(llm.GenerationControls(max_output_tokens=model.output_limit))


__all__ = ["MAX_STEPS_NOTICE", "ModelCall", "ModelContext", "ModelContextBuilder", "model_call", "named_model"]
