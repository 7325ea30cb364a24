"""Requests waiting in memory for the user's answer (permissions, questions): each holds a future the asking tool call
awaits. Not durable: a restart, or an interrupt of the call, abandons them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar


class _Request(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def sessionID(self) -> str: ...


R = TypeVar("R", bound=_Request)


@dataclass
class Waiting(Generic[R]):
    request: R
    answer: asyncio.Future[Any] = field(default_factory=lambda: asyncio.get_running_loop().create_future())


class WaitingRequests(Generic[R]):
    """The requests of one kind that wait for an answer, by ID, in the order they were asked."""

    def __init__(self) -> None:
        self._waiting: dict[str, Waiting[R]] = {}

    def pending(self, session_id: str | None = None) -> list[R]:
        return [w.request for w in self._waiting.values() if session_id is None or w.request.sessionID == session_id]

    def find(self, session_id: str, request_id: str) -> Waiting[R] | None:
        waiting = self._waiting.get(request_id)
        return waiting if waiting is not None and waiting.request.sessionID == session_id else None

    def of_session(self, session_id: str) -> list[Waiting[R]]:
        return [w for w in self._waiting.values() if w.request.sessionID == session_id]

    def all(self) -> list[Waiting[R]]:
        return list(self._waiting.values())

    def take(self, waiting: Waiting[R]) -> bool:
        """Remove a request to answer it; False when it was answered (or abandoned) already."""
        return self._waiting.pop(waiting.request.id, None) is not None

    def __contains__(self, request_id: object) -> bool:
        return request_id in self._waiting

    def add(self, request: R) -> Waiting[R]:
        """Register `request` for a caller that does not wait on its answer here."""
        waiting = self._waiting[request.id] = Waiting(request)
        # nobody may ever read the answer: read it here, so a refusal is not reported as an unretrieved exception
        waiting.answer.add_done_callback(lambda answer: answer.cancelled() or answer.exception())
        return waiting

    async def wait(self, request: R, on_abandoned: Callable[[R], None]) -> Any:
        """Register `request` and return its answer (or raise what the answer raises). A call cancelled
        while waiting withdraws the request and reports it through `on_abandoned`."""
        waiting = self.add(request)
        try:
            return await waiting.answer
        finally:
            if self.take(waiting):
                on_abandoned(request)
