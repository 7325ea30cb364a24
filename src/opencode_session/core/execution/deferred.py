"""A drain factory that loads the runner (Steps, tools, compaction, provider adapters) on the first drain, in a
worker thread, so a server answers before any of it is imported and the event loop keeps serving while it loads."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from .coordinator import Drain

if TYPE_CHECKING:
    from ..runtime import Runtime


def _runner_drain(runtime: Runtime) -> Drain:
    from .runner import runner_drain_factory

    return runner_drain_factory(runtime)


def deferred_drain_factory(load: Callable[[Runtime], Drain] = _runner_drain) -> Callable[[Runtime], Drain]:
    """A `RuntimeOptions.drain_factory` whose drain is `load(runtime)`, called once, off the loop, when the first
    session runs (`load` defaults to the real runner with the built-in tools and providers)."""

    def factory(runtime: Runtime) -> Drain:
        loading: asyncio.Future[Drain] | None = None

        async def drain(session_id: str, force: bool) -> None:
            nonlocal loading
            if loading is None:
                loading = asyncio.ensure_future(anyio.to_thread.run_sync(load, runtime))
            # shielded: a cancelled first drain must not cancel the load the next one will await
            real = await asyncio.shield(loading)
            await real(session_id, force)

        return drain

    return factory
