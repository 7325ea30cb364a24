"""The load scenario shared by the instance-stream test and `bench/bench_load.py`: many sessions run queued prompts
at once against a loopback model while hundreds of subscribers read the instance stream and per-session streams.

`run_load` drives a running `ocs serve` and returns what every subscriber received, what each session's durable log
holds, and how long admissions and the whole run took."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2

from opencode_session.client import ClientError, OpenCodeClient

LOAD_CONFIG_MODEL = "fake-model"


def load_config(base_url: str) -> dict[str, Any]:
    """The opencode.json of the server under load: one OpenAI-compatible model on the loopback provider."""
    return {
        "model": f"loop/{LOAD_CONFIG_MODEL}",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                              "options": {"baseURL": base_url, "apiKey": "k"},
                              "models": {LOAD_CONFIG_MODEL: {}}}},
    }


@dataclass
class Subscriber:
    """One stream reader: the durable sequences it received per session, in arrival order."""

    kind: str  # "instance" or "session"
    seqs: dict[str, list[int]] = field(default_factory=dict)
    error: BaseException | None = None
    ended: bool = False

    @property
    def stopped(self) -> bool:
        return self.ended or self.error is not None


@dataclass
class LoadResult:
    prompts: int
    elapsed: float  # seconds from the first admission until every session was idle
    admission_ms: list[float]
    expected: dict[str, list[int]]  # per session: every durable seq (the instance stream also carries seq 0)
    public: dict[str, list[int]]  # per session: the seqs of its public durable log
    subscribers: list[Subscriber]

    def missing(self) -> list[str]:
        """A line per subscriber that did not receive exactly every durable event of its sessions, in order."""
        problems = []
        for n, sub in enumerate(self.subscribers):
            wanted = self.expected if sub.kind == "instance" else {s: self.public[s] for s in sub.seqs}
            for sid, seqs in wanted.items():
                got = sub.seqs.get(sid, [])
                if got != seqs:
                    problems.append(f"{sub.kind} subscriber {n}: session {sid}: {len(got)} of {len(seqs)} events"
                                    f"{' (' + repr(sub.error) + ')' if sub.error else ''}")
                    break
        return problems


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


async def _read(stream: Any, sub: Subscriber, progress: asyncio.Event, connected: anyio.Event | None = None) -> None:
    try:
        async for item in stream:
            if item.type == "server.connected" and connected is not None:
                connected.set()
                continue
            durable = getattr(item, "durable", None)
            if durable is not None:
                sub.seqs.setdefault(durable.aggregateID, []).append(durable.seq)
                progress.set()
        sub.ended = True  # the server ended the stream without an error the client could see
    except (ClientError, httpx2.HTTPError) as exc:
        sub.error = exc
    progress.set()


async def run_load(base_url: str, *, sessions: int = 50, prompts: int = 4, instance_subscribers: int = 20,
                   session_subscribers: int = 180, prompt_chars: int = 0, settle_timeout: float = 120) -> LoadResult:
    """`prompt_chars` pads each prompt's text (more bytes through every stream, as pasted code would)."""
    async with OpenCodeClient(base_url, timeout=60) as client:  # its own transport: streams are not capped
        subscribers: list[Subscriber] = []
        progress = asyncio.Event()  # set whenever a reader receives something (or fails)
        async with anyio.create_task_group() as readers:
            for _ in range(instance_subscribers):  # connected before anything happens: no replay on this stream
                sub = Subscriber("instance")
                subscribers.append(sub)
                connected = anyio.Event()
                readers.start_soon(_read, client.event.subscribe(), sub, progress, connected)
                await connected.wait()
            sids = [(await client.session.create()).id for _ in range(sessions)]
            for n in range(session_subscribers):
                sid = sids[n % sessions]
                sub = Subscriber("session", seqs={sid: []})
                subscribers.append(sub)
                readers.start_soon(_read, client.session.events(sid), sub, progress)

            admission_ms: list[float] = []

            async def admit(sid: str, n: int) -> None:
                start = time.perf_counter()
                await client.session.prompt(sid, prompt={"text": f"prompt {n} " + "x" * prompt_chars},
                                            delivery="queue")
                admission_ms.append((time.perf_counter() - start) * 1000)

            started = time.perf_counter()
            async with anyio.create_task_group() as admissions:
                for sid in sids:
                    for n in range(prompts):
                        admissions.start_soon(admit, sid, n)
            with anyio.fail_after(settle_timeout):
                for sid in sids:
                    await client.session.wait(sid)
            elapsed = time.perf_counter() - started

            public: dict[str, list[int]] = {}
            for sid in sids:
                log = [e async for e in client.session.log(sid, follow=False) if e.type != "log.synced"]
                public[sid] = [e.durable.seq for e in log]
            result = LoadResult(sessions * prompts, elapsed, admission_ms,
                                {sid: list(range(0, seqs[-1] + 1)) for sid, seqs in public.items()}, public,
                                subscribers)
            with anyio.move_on_after(settle_timeout):  # a reader that falls short shows up in the result
                while len(result.missing()) > sum(s.stopped for s in subscribers):
                    progress.clear()
                    await progress.wait()
            readers.cancel_scope.cancel()
    return result
