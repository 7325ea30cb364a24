"""A one-off generation with a session's context (`POST .../generate`): the session's model answers a prompt after
its active history, and nothing of it is recorded (history, usage and the log stay as they were)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ...schema.errors import ServiceUnavailableError
from ..agents import AgentNotFoundError, resolve_agent
from ..config import ConfigError, ConfigSource
from ..llm import model as llm
from ..llm.catalog import configured_secrets, model_ref_from_string, resolve_model
from ..llm.errors import ProviderError
from ..llm.providers import load_adapter
from ..location import resolve_location
from ..session.history import active_history
from ..session.service import require_session
from ..store import Reader, Store
from ..store.codec import as_data
from .lowering import lower_message

GENERATE_SYSTEM = (
    "You are answering a one-off request about the conversation below. Answer the last user message directly, "
    "using the conversation as context. No tools are available."
)


async def generate(store: Store, configs: ConfigSource, env: Mapping[str, str],
                   provider_for: Callable[[llm.ResolvedModel], llm.Provider], session_id: str, prompt: str) -> str:
    """The text the session's model (its own, else its agent's, else the configured default) answers `prompt`
    with, after the session's active history; ServiceUnavailableError when no model can be called or the call
    fails (its message redacted of the configured keys)."""
    info = await store.read(lambda reader: require_session(reader, session_id))
    try:
        config = await configs.at(resolve_location(info.location.directory, info.location.workspaceID))
        try:
            agent_model = resolve_agent(config, info.agent).model
        except AgentNotFoundError:  # an agent no configuration here declares: the session's or default model
            agent_model = None
        ref = info.model or agent_model or (model_ref_from_string(config.model) if config.model else None)
        resolved = resolve_model(config, ref, env)
    except (ConfigError, ProviderError) as unusable:
        raise ServiceUnavailableError(f"No model can answer for this session: {unusable}",
                                      service="provider") from None
    secrets = tuple(configured_secrets(config, env, resolved))

    def _history(reader: Reader) -> list[llm.LLMMessage]:
        out: list[llm.LLMMessage] = []
        for text in active_history(reader, session_id):
            out.extend(lower_message(as_data(text), info.model))
        return out

    history = await store.read(_history)
    request = llm.LLMRequest(model=resolved, system=[GENERATE_SYSTEM],
                             messages=[*history, llm.UserMessage([llm.TextPart(prompt)])], tool_choice="none",
                             controls=llm.GenerationControls(max_output_tokens=resolved.output_limit),
                             options=resolved.options)
    parts: list[str] = []
    try:
        await load_adapter(resolved.protocol)
        stream = provider_for(resolved).stream(request)
        try:
            async for event in stream:
                if isinstance(event, llm.TextDelta):
                    parts.append(event.delta)
        finally:
            aclose: Callable[[], Any] | None = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()
    except ProviderError as failed:
        raise ServiceUnavailableError(f"The model call failed: {failed.redacted(secrets)}",
                                      service="provider") from None
    return "".join(parts)
