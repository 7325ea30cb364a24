"""How the runtime's tasks are owned and stopped: a long-lived task scope that owns background tasks (and logs each
one's failure once), a task group whose host keeps its own exception, and work that must finish even when its caller
is cancelled (the durable write that settles a Step or a compaction, a provider connection's close)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

log = logging.getLogger(__name__)


async def shielded(coro: Awaitable[Any]) -> Any:
    """Run `coro` to completion even when the caller is being cancelled (the cancellation is raised after it). The
    anyio shield keeps a cancel scope's cancellation out (it is delivered again at the caller's next checkpoint);
    asyncio's keeps out a native `Task.cancel` from a caller outside any scope (a server's request task)."""
    task = asyncio.ensure_future(coro)
    with anyio.CancelScope(shield=True):
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await task
            raise


@contextlib.asynccontextmanager
async def owned_tasks() -> AsyncIterator[TaskGroup]:
    """A task group whose tasks settle their own failures: an exception of the host block (the group's only one)
    leaves it as itself, not wrapped in an exception group, so its handlers stay as they were."""
    try:
        async with anyio.create_task_group() as group:
            yield group
    except BaseExceptionGroup as failed:
        if len(failed.exceptions) == 1:
            raise failed.exceptions[0] from None
        raise


class TaskScope:
    """The tasks a long-lived owner (the Runtime, a coordinator) runs beside its callers: one anyio task group,
    hosted from the first task started until `aclose`, which cancels what is left and waits for it. A task's failure
    is logged here, once, with the task's name, and never cancels its siblings; a cancellation ends only that task."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._group: TaskGroup | None = None
        self._host: asyncio.Task[None] | None = None
        self._waiting: list[tuple[contextvars.Context, Callable[[], Awaitable[object]], str, bool]] = []
        self._running = 0
        self._idle: anyio.Event | None = None
        self._closed = False

    def start_soon(self, work: Callable[[], Awaitable[object]], name: str,
                   context: contextvars.Context | None = None, *, lasting: bool = False) -> bool:
        """Run `work()` in this scope (in `context`, by default a copy of the caller's); False once it is closed. A
        `lasting` task (a sweep) runs until the scope closes: `settle` does not wait for it."""
        if self._closed:
            return False
        context = context if context is not None else contextvars.copy_context()
        if not lasting:
            self._running += 1
        if self._group is not None:
            context.run(self._start, self._group, work, name, lasting)
        else:
            self._waiting.append((context, work, name, lasting))
            if self._host is None:
                # the one task no group starts: the scope lives from its owner's first call to its `aclose`, across
                # calls from several tasks, which no `async with` block in one of them can span
                self._host = contextvars.Context().run(asyncio.get_running_loop().create_task, self._hosting(),
                                                       name=self.name)
        return True

    async def _hosting(self) -> None:
        async with anyio.create_task_group() as group:
            self._group = group
            for context, work, name, lasting in self._waiting:
                context.run(self._start, group, work, name, lasting)
            self._waiting.clear()
            await anyio.sleep_forever()

    def _start(self, group: TaskGroup, work: Callable[[], Awaitable[object]], name: str, lasting: bool) -> None:
        group.start_soon(self._run, work, name, lasting, name=name)  # (in the context it is called in)

    async def _run(self, work: Callable[[], Awaitable[object]], name: str, lasting: bool) -> None:
        try:
            await work()
        except Exception:
            log.exception("%s: %s failed", self.name, name)
        except asyncio.CancelledError:
            if self._group is None or self._group.cancel_scope.cancel_called:
                raise
            # a cancellation of this task alone (not this scope's) ends it, not its siblings
            log.warning("%s: %s was cancelled", self.name, name)
        finally:
            if not lasting:
                self._running -= 1
                if self._running == 0 and self._idle is not None:
                    self._idle.set()

    async def settle(self, timeout: float) -> None:
        """Give the running tasks up to `timeout` seconds to finish."""
        with anyio.move_on_after(timeout):
            while self._running:
                self._idle = anyio.Event()
                await self._idle.wait()

    async def aclose(self) -> None:
        """Start nothing more; cancel the running tasks and wait for them to end."""
        self._closed = True
        if self._host is None:
            return
        if self._group is not None:
            self._group.cancel_scope.cancel()
        else:
            self._host.cancel()  # not yet entered: it starts nothing
        await asyncio.wait({self._host})  # (the host ends normally or cancelled; the caller's cancel propagates)
