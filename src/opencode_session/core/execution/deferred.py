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


class DeferredDrain:
    """A `RuntimeOptions.drain_factory` whose drain is `load(runtime)` (by default the real runner with the built-in
    tools and providers), called once, in a worker thread, when the first session runs, or earlier when `warm` asks
    (a server does once it is listening, so its first prompt does not wait for the load). One runtime per instance."""

    def __init__(self, load: Callable[[Runtime], Drain] = _runner_drain) -> None:
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

    def warm(self) -> None:
        """Start loading now, in the background; a load that fails fails the first drain, which reports it."""
        self._started().add_done_callback(lambda done: done.cancelled() or done.exception())

    def _started(self) -> asyncio.Future[Drain]:
        if self._loading is None:
            if self._runtime is None:
                raise RuntimeError("the drain factory has not been given its runtime yet")
            self._loading = asyncio.ensure_future(anyio.to_thread.run_sync(self._load, self._runtime))
        return self._loading
