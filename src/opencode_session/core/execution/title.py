"""Session titles: after a Session's first Step, one background model call (the configured `small_model`, else the
Step's model) names the Session from its first user message, unless someone has titled it already."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from ...schema import events as ev
from ...schema.session import SessionV2Info
from ..config import Config
from ..llm import model as llm
from ..llm.catalog import model_ref_from_string, resolve_model
from ..llm.errors import ProviderError
from ..llm.providers import load_adapter
from ..session.service import require_session, untitled
from ..store import Lease, SessionFencedError, Store, Tenure, Tx, confirm_lease, current_tenure, set_fence

log = logging.getLogger(__name__)

TITLE_SYSTEM = """\
You write the title of a conversation so that its user can find it again later. Read the user's first message \
below and reply with its title only.

- One line of at most 50 characters, in the language the user wrote in.
- Name the task or the topic; keep technical terms, file names, numbers and error codes exactly as written.
- Leave out filler words and tool names, and do not begin with words like "Summarizing" or "Generating".
- Never answer the message, never use tools, never refuse: a message such as "hi" gets a title such as "Greeting".\
"""
MAX_TITLE_CHARS = 100
MAX_INPUT_CHARS = 4000  # the start of a long first message says what it is about

Spawn = Callable[[Coroutine[Any, Any, None]], None]


def clean_title(raw: str) -> str | None:
    """The first non-empty line of a model's answer, without reasoning tags, quotes or markdown marks."""
    text = re.sub(r"<think>.*?(</think>|$)", "", raw, flags=re.S | re.I)
    for line in text.splitlines():
        line = line.strip().strip("\"'*#_ ").strip()
        if line:
            return line[:MAX_TITLE_CHARS].rstrip()
    return None


class SessionTitles:
    """Starts at most one title call per Session and process; a failed call leaves the default title."""

    def __init__(self, store: Store, env: Mapping[str, str], provider_for: Callable[[llm.ResolvedModel], llm.Provider],
                 spawn: Spawn) -> None:
        self.store = store
        self.env = env
        self.provider_for = provider_for
        self.spawn = spawn
        self._attempted: set[str] = set()

    def after_step(self, session: SessionV2Info, config: Config, step_model: llm.ResolvedModel) -> None:
        if session.id in self._attempted or not untitled(session):
            return
        self._attempted.add(session.id)
        # the drain's tenure: the title is requested only while the lease cannot have lapsed (or once it was released)
        self.spawn(self._generate(session.id, config, step_model, current_tenure()))

    def _model(self, config: Config, step_model: llm.ResolvedModel) -> llm.ResolvedModel:
        ref = model_ref_from_string(config.small_model) if config.small_model else None
        if ref is not None:
            try:
                return resolve_model(config, ref, self.env)
            except ProviderError as unusable:
                log.info("small_model %s is not usable for titles (%s); using the session's model", ref, unusable)
        return step_model

    async def _generate(self, session_id: str, config: Config, step_model: llm.ResolvedModel,
                        tenure: Tenure | None = None) -> None:
        try:
            first = await self.store.read(lambda reader: reader.messages.first_user_text(session_id))
            if not first:
                return
            model = self._model(config, step_model)
            request = llm.LLMRequest(model=model, system=[TITLE_SYSTEM],
                                     messages=[llm.UserMessage([llm.TextPart(first[:MAX_INPUT_CHARS])])],
                                     tool_choice="none")
            parts: list[str] = []
            drain = tenure.fence() if tenure is not None else None  # the drain's lease (LeaseLapsedError once lost)
            await load_adapter(model.protocol)
            await confirm_lease(tenure)
            stream = self.provider_for(model).stream(request)
            try:
                async for event in stream:
                    if isinstance(event, llm.TextDelta):
                        parts.append(event.delta)
            finally:
                aclose = getattr(stream, "aclose", None)
                if aclose is not None:
                    await aclose()
            title = clean_title("".join(parts))
            if title:
                set_fence(None, None)  # checked in the write itself, below
                await self.store.write(lambda tx: _rename_if_untitled(tx, session_id, title, drain))
        except (ProviderError, SessionFencedError) as failed:
            log.info("no title for session %s: %s", session_id, failed)
        except Exception:  # a title is a nicety: never let its failure surface anywhere else
            log.exception("title generation for session %s failed", session_id)


def _rename_if_untitled(tx: Tx, session_id: str, title: str, drain: Lease | None) -> None:
    # a rename that landed while the model was thinking wins
    if not untitled(require_session(tx, session_id)):
        return
    # On a shared database, written while the drain that asked still holds its lease, or once nobody does (a one-Step
    # turn often ends, releasing it, before its title comes back); never once another host holds the session.
    if drain is not None and not tx.leases.holds(drain) and tx.leases.holder(session_id) is not None:
        return
    tx.append(ev.Renamed(sessionID=session_id, title=title))
