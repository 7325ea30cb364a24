"""Following one turn of a session from the command line: subscribe, admit prompts, pass every event of the
session to a sink, and settle when the execution that ran every admitted prompt has ended.

Events come from the instance-wide live stream (it alone carries the streamed text); if that stream ends
early, the durable log takes over from the last sequence seen, so no durable event is lost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from ..client.errors import ClientError
from ..client.generated import OpenCodeClient

TERMINAL = {
    "session.execution.succeeded": "succeeded",
    "session.execution.failed": "failed",
    "session.execution.interrupted": "interrupted",
}


@dataclass(frozen=True)
class Outcome:
    status: Literal["succeeded", "failed", "interrupted"]
    error_type: str | None = None
    message: str | None = None


Sink = Callable[[dict[str, Any]], None]


class Turn:
    """`async with Turn(client, sid, sink) as turn: await turn.prompt(...); outcome = await turn.settled()`.

    More prompts may be admitted while it runs (steer or queue); it settles once an execution ends after the
    latest admission with every admitted prompt promoted, or ends in failure or interruption."""

    def __init__(self, client: OpenCodeClient, session_id: str, sink: Sink) -> None:
        self.client = client
        self.session_id = session_id
        self.sink = sink
        self._waiting: set[str] = set()  # admitted here, not yet promoted
        self._promoted: set[str] = set()
        self._seen_seq = -1  # the last durable sequence of this session passed to the sink
        self._first_admitted = -1
        self._admitted_seq = -1
        self._inflight = 0  # admissions sent, not yet answered
        self._terminal: tuple[str, int, dict[str, Any]] | None = None  # the last execution end seen
        self._outcome: asyncio.Future[Outcome] | None = None
        self._reader: asyncio.Task[None] | None = None
        self._live: Any = None

    async def __aenter__(self) -> Turn:
        self._outcome = asyncio.get_running_loop().create_future()
        self._live = self.client.event.subscribe()
        await self._live.__anext__()  # the server.connected frame: from here on nothing is missed
        self._reader = asyncio.create_task(self._read(), name=f"ocs-turn:{self.session_id}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
        if self._live is not None:
            await self._live.aclose()

    async def prompt(self, text: str, delivery: Literal["steer", "queue"] = "steer") -> None:
        await self.submit(text, delivery)

    def submit(self, text: str, delivery: Literal["steer", "queue"] = "steer") -> asyncio.Future[None]:
        """Admit a prompt in the background; the turn does not settle before the admission is answered."""
        self._inflight += 1  # counted now, not when the task first runs: an end arriving meanwhile must wait
        return asyncio.ensure_future(self._admit(text, delivery))

    async def _admit(self, text: str, delivery: Literal["steer", "queue"]) -> None:
        try:
            admission = await self.client.session.prompt(self.session_id, prompt={"text": text}, delivery=delivery)
            self._admitted_seq = max(self._admitted_seq, admission.admittedSeq)
            if self._first_admitted < 0:
                self._first_admitted = admission.admittedSeq
            if admission.promotedSeq is None and admission.id not in self._promoted:
                self._waiting.add(admission.id)
        finally:
            self._inflight -= 1
            self._check()

    @property
    def done(self) -> bool:
        return self._outcome is not None and self._outcome.done()

    async def settled(self) -> Outcome:
        assert self._outcome is not None, "use `async with Turn(...)`"
        return await asyncio.shield(self._outcome)

    # --- reading ----------------------------------------------------------------------------------------------

    async def _read(self) -> None:
        try:
            try:
                async for item in self._live:
                    if self._take(item.wire()):
                        return
            except ClientError:
                pass  # the live stream failed; the durable log below still has everything that matters
            after = max(self._seen_seq, self._first_admitted - 1)
            async for item in self.client.session.log(self.session_id, after=after if after >= 0 else None,
                                                      follow=True):
                if item.type != "log.synced" and self._take(item.wire()):
                    return
            raise ClientError("Transport", "the server ended the session's event stream before the turn settled")
        except Exception as failure:  # noqa: BLE001 - handed to whoever waits for the outcome
            if self._outcome is not None and not self._outcome.done():
                self._outcome.set_exception(failure)

    def _take(self, event: dict[str, Any]) -> bool:
        """Pass one event on; True once the turn has settled."""
        data = event.get("data") or {}
        if data.get("sessionID") != self.session_id:
            return False
        seq = (event.get("durable") or {}).get("seq")
        if seq is not None:
            self._seen_seq = max(self._seen_seq, seq)
        self.sink(event)
        kind = event.get("type")
        input_id = data.get("inputID")
        if kind == "session.input.promoted" and isinstance(input_id, str):
            self._promoted.add(input_id)
            self._waiting.discard(input_id)
        status = TERMINAL.get(kind or "")
        if status is not None and seq is not None:
            self._terminal = (status, seq, data.get("error") or {})
        return self._check()

    def _check(self) -> bool:
        """Settle once an execution ended after the latest admission: having run every admitted prompt, or not."""
        if self._terminal is None or self._inflight or self._admitted_seq < 0:
            return False
        status, seq, error = self._terminal
        if seq < self._admitted_seq or (status == "succeeded" and self._waiting):
            return False  # an earlier execution's end, or a prompt admitted as it ended: the next one runs it
        assert self._outcome is not None
        if not self._outcome.done():
            self._outcome.set_result(Outcome(status, error.get("type"), error.get("message")))  # type: ignore[arg-type]
        return True
