"""Compaction around Steps: a Step whose Model Context would not fit the model's window compacts history instead
of being sent (then rebuilt on the checkpoint, no Physical Attempt made); a context overflow the provider reports
before any output compacts once and rebuilds the Step for its second Physical Attempt; and a manual compaction
barrier runs when the drain reaches it."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from ...schema import events as ev
from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ..boundary import Boundary
from ..compaction.compactor import CompactionSettings, Compactor
from ..llm import model as llm
from ..llm.errors import ProviderError
from ..session.history import HistoryCache
from ..store import Store
from ..userhooks import HookRun, UserHooks
from .coordinator import DrainFailure
from .model_context import ModelCall, ModelContext, model_call
from .orphans import close_assistant
from .step import StepOutcome

SUPERSEDED = SessionErrorInfo(type=session_errors.ABORTED,
                              message="Superseded: history was compacted and the Step rebuilt on the checkpoint")


class StepCompaction:
    def __init__(self, store: Store, compactor: Compactor, history: HistoryCache, env: Mapping[str, str],
                 provider_for: Callable[[llm.ResolvedModel], llm.Provider],
                 user_hooks: UserHooks | None = None) -> None:
        self.store = store
        self.user_hooks = user_hooks
        self.compactor = compactor
        self.history = history
        self.env = env
        self.provider_for = provider_for

    async def before_sending(self, b: Boundary, settings: CompactionSettings, assistant_id: str, call: ModelCall,
                             context: ModelContext) -> bool:
        """Whether history was compacted instead of sending `context` (it would not fit): the Step is then rebuilt.
        DrainFailure when that compaction fails."""
        session_id = b.session.id
        cut = self.compactor.over_budget(session_id, assistant_id, settings, call.resolved, context.history,
                                         context.request, context.additions)
        if cut is None:
            return False
        await self._pre_compact(b, "auto")
        failed = await self.compactor.compact(session_id, "auto", settings, call.resolved, call.provider,
                                              context.history, cut, secrets=call.secrets)
        if failed is not None:
            raise DrainFailure(failed)
        return True

    async def after_overflow(self, b: Boundary, settings: CompactionSettings, assistant_id: str, call: ModelCall,
                             context: ModelContext, outcome: StepOutcome) -> None:
        """The provider reported a context overflow before any output, and the Step held it back: one compaction,
        after which the same logical Step is rebuilt. When it fails, the Step fails with the overflow
        (DrainFailure)."""
        session_id = b.session.id
        await self._pre_compact(b, "auto")
        failed = await self.compactor.compact(session_id, "auto", settings, call.resolved, call.provider,
                                              context.history, secrets=call.secrets)
        if failed is None:
            return
        overflow = outcome.error.to_session_error() if outcome.error else failed
        await self.store.write(lambda tx: (
            tx.append(ev.StepStarted(sessionID=session_id, assistantMessageID=assistant_id, agent=b.agent.name,
                                     model=call.model_ref)),
            tx.append(ev.StepFailed(sessionID=session_id, assistantMessageID=assistant_id, error=overflow))))
        raise DrainFailure(overflow)

    async def _pre_compact(self, b: Boundary, trigger: str) -> None:
        """Tell the PreCompact hooks that history is about to be summarised (they decide nothing)."""
        if self.user_hooks is not None and b.config.hooks:
            run = HookRun(b.session.id, b.location.directory, b.location.project_root, self.env, b.config)
            await self.user_hooks.notify(run, "PreCompact", {"trigger": trigger})

    async def supersede(self, session_id: str, assistant_id: str) -> None:
        """A retry's assistant message that now lies before the checkpoint: the rebuilt Step starts a new one."""
        await close_assistant(self.store, session_id, assistant_id, SUPERSEDED)

    async def barrier(self, b: Boundary, input_id: str) -> None:
        """Run the session's pending manual compaction barrier; whatever its result, the barrier is consumed and
        promotion resumes."""
        session_id = b.session.id
        settings = CompactionSettings.of(b.config.compaction)
        try:
            call = await model_call(b, self.env, self.provider_for)
        except ProviderError as error:
            await self.store.append(ev.CompactionFailed(sessionID=session_id, reason="manual",
                                                        error=error.to_session_error(), inputID=input_id))
            return
        history = await self.store.read(lambda reader: self.history.load(reader, session_id))
        await self._pre_compact(b, "manual")
        await self.compactor.compact(session_id, "manual", settings, call.resolved, call.provider, history,
                                     input_id=input_id, secrets=call.secrets)


__all__ = ["SUPERSEDED", "StepCompaction"]
