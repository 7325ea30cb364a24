"""Durable event log throughput: appends into a real SQLite file, and replay over real HTTP on loopback.

(a) append: one event per transaction (`Sessions.switch_agent`, `Sessions.admit(resume=False)`), and 100 events per
    `Store.write`; each N=2,000 events, 5 repetitions, median events/s. The store runs WAL with synchronous=FULL,
    so every COMMIT fsyncs the WAL: one-per-transaction appends pay one fsync per event, batches one per 100.
(b) replay: `GET /api/session/{id}/event` (no `after`, i.e. from the start; the API rejects `after=-1` with 400:
    `after` must be a non-negative Seq, and omitting it means -1) of a 10,000-event session through `serve(...)` on
    127.0.0.1,
    read until the last seq arrives, by the generated client (SSE parse + JSON + pydantic validation per event)
    by raw httpx2 line reading (no SSE parse, no JSON, no pydantic on the client), and by a hand-written HTTP/1.1
    GET on an asyncio socket that only scans bytes (almost pure server cost); plus, without HTTP, the in-process
    `Sessions.log` iterator (store read + decode) and the same with the server's per-event `wire()` + SSE `frame`.
    5 repetitions, median events/s. Server and readers share one event loop, as `serve` runs in-process.

Run: .venv/bin/python bench/bench_eventlog.py   (BENCH_REPS / BENCH_APPEND_N / BENCH_REPLAY_N to scale)
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import httpx2
from _common import emit, median, spread, table, workspace

from opencode_session.client.generated import OpenCodeClient
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.session import admission
from opencode_session.schema import events as ev
from opencode_session.schema.prompt import Prompt, PromptInput
from opencode_session.server.serve import serve
from opencode_session.server.sse import frame

REPS = int(os.environ.get("BENCH_REPS", 5))
APPEND_N = int(os.environ.get("BENCH_APPEND_N", 2_000))
BATCH = 100
REPLAY_N = int(os.environ.get("BENCH_REPLAY_N", 10_000))
PROMPT_TEXT = "Please summarise the changes in src/ and list the files you touched. " * 2  # ~140 chars


# --- (a) append --------------------------------------------------------------------------------------------


async def append_single_switch(rt: Runtime, n: int) -> float:
    sid = (await rt.sessions.create()).id
    agents = ("build", "plan")
    t0 = time.perf_counter()
    for i in range(n):
        await rt.sessions.switch_agent(sid, agents[i & 1])
    return time.perf_counter() - t0


async def append_single_admit(rt: Runtime, n: int) -> float:
    sid = (await rt.sessions.create()).id
    prompt = PromptInput(text=PROMPT_TEXT)
    t0 = time.perf_counter()
    for _ in range(n):
        await rt.sessions.admit(sid, prompt, resume=False)
    return time.perf_counter() - t0


async def append_batched(rt: Runtime, n: int) -> float:
    sid = (await rt.sessions.create()).id
    agents = ("build", "plan")

    def batch(tx) -> None:
        for i in range(BATCH):
            tx.append(ev.AgentSelected(sessionID=sid, agent=agents[i & 1]))

    t0 = time.perf_counter()
    for _ in range(n // BATCH):
        await rt.store.write(batch)
    return time.perf_counter() - t0


def fsync_probe(directory: Path, n: int = 300) -> float:
    """Median seconds of one 4 KiB append + fsync in `directory`: the floor under a one-event transaction."""
    path = directory / "fsync-probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    times = []
    try:
        block = b"x" * 4096
        for _ in range(n):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    return median(times)


async def bench_append(db: Path, workdir: Path, env: dict[str, str]) -> dict[str, list[float]]:
    kinds = {
        "switch_agent (1 event/tx)": append_single_switch,
        "admit resume=False (1 event/tx)": append_single_admit,
        f"store.write batch ({BATCH} events/tx)": append_batched,
    }
    rates: dict[str, list[float]] = {k: [] for k in kinds}
    async with Runtime(RuntimeOptions(db_path=db, directory=workdir, env=env)) as rt:
        await append_single_switch(rt, 50)  # warm-up: schema, statement cache, imports
        for _ in range(REPS):
            for name, fn in kinds.items():  # interleaved, so drift hits every kind alike
                rates[name].append(APPEND_N / await fn(rt, APPEND_N))
    return rates


# --- (b) replay --------------------------------------------------------------------------------------------


async def build_replay_session(db: Path, workdir: Path, env: dict[str, str], n: int) -> tuple[str, int]:
    """A session of `n` public events after session.created (seq 0): admissions and agent switches alternating,
    written 1,000 per transaction. The last event (seq n) is public, so a reader sees it."""
    async with Runtime(RuntimeOptions(db_path=db, directory=workdir, env=env)) as rt:
        sid = (await rt.sessions.create()).id
        stored = admission.resolve_prompt(PromptInput(text=PROMPT_TEXT))
        assert isinstance(stored, Prompt)
        written = 0

        def chunk(tx, count: int) -> None:
            for i in range(count):
                if i & 1:
                    tx.append(ev.AgentSelected(sessionID=sid, agent="plan" if i & 2 else "build"))
                else:
                    admission.admit(tx, sid, f"msg_bench{written + i:08d}", ev.UserInput(data=stored, delivery="queue"))

        while written < n:
            count = min(1_000, n - written)
            await rt.store.write(lambda tx, count=count: chunk(tx, count))
            written += count
        last = await rt.store.latest_seq(sid)
    return sid, last


async def read_generated(url: str, sid: str, last: int) -> tuple[float, int]:
    async with OpenCodeClient(url, timeout=60) as client:
        t0 = time.perf_counter()
        stream = client.session.events(sid)  # no `after`: the server replays from -1
        count = 0
        async with stream:
            async for _item in stream:
                count += 1
                if stream.last_event_id == str(last):
                    break
        return time.perf_counter() - t0, count


async def read_raw(url: str, sid: str, last: int) -> tuple[float, int]:
    stop_line = f"id: {last}"
    async with httpx2.AsyncClient(timeout=60) as http:
        t0 = time.perf_counter()
        count = 0
        async with http.stream("GET", f"{url}/api/session/{sid}/event",
                               headers={"Accept": "text/event-stream"}) as response:
            assert response.status_code == 200, response.status_code
            async for line in response.aiter_lines():
                if line.startswith("id: "):
                    count += 1
                    if line == stop_line:
                        break
        return time.perf_counter() - t0, count


async def read_socket(url: str, sid: str, last: int) -> tuple[float, int]:
    """The cheapest possible HTTP reader: a hand-written HTTP/1.1 GET on an asyncio socket, scanning the bytes for
    the last frame's `id:` line. What remains is (almost) the server's own cost per event."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    marker = f"id: {last}\n".encode()
    t0 = time.perf_counter()
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write(f"GET /api/session/{sid}/event HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n\r\n"
                 .encode())
    chunks: list[bytes] = []
    tail = b""
    try:
        while True:
            chunk = await reader.read(1 << 16)
            if not chunk:
                raise RuntimeError("the server closed the stream before the last event")
            chunks.append(chunk)
            if marker in tail + chunk:
                break
            tail = chunk[-len(marker):]
    finally:
        writer.close()
    elapsed = time.perf_counter() - t0
    body = b"".join(chunks)
    assert body.startswith(b"HTTP/1.1 200"), body[:80]
    return elapsed, body.count(b"\nid: ")  # every frame starts after a line end (or a chunk-size line)


async def read_core(rt: Runtime, sid: str, last: int) -> tuple[float, int]:
    t0 = time.perf_counter()
    count = 0
    stream = await rt.sessions.log(sid, -1, follow=False)
    async for record in stream:
        count += 1
        if record.seq == last:
            break
    await stream.aclose()
    return time.perf_counter() - t0, count


async def read_core_framed(rt: Runtime, sid: str, last: int) -> tuple[float, int]:
    """The core iterator plus the server's per-event encoding (`EventRecord.wire()` and the SSE `frame`)."""
    t0 = time.perf_counter()
    count = size = 0
    stream = await rt.sessions.log(sid, -1, follow=False)
    async for record in stream:
        count += 1
        size += len(frame(record.wire(), id=record.seq))
        if record.seq == last:
            break
    await stream.aclose()
    return time.perf_counter() - t0, count


async def bench_replay(db: Path, workdir: Path, env: dict[str, str]) -> tuple[dict[str, list[float]], int, float]:
    t0 = time.perf_counter()
    sid, last = await build_replay_session(db, workdir, env, REPLAY_N)
    build_s = time.perf_counter() - t0
    ready: asyncio.Future = asyncio.get_running_loop().create_future()
    stop = asyncio.Event()
    server = asyncio.create_task(serve(RuntimeOptions(db_path=db, directory=workdir, env=env), "127.0.0.1", 0,
                                       on_ready=lambda url, rt: ready.set_result((url, rt)), stop=stop))
    done, _ = await asyncio.wait({server, ready}, return_when=asyncio.FIRST_COMPLETED)
    if server in done:
        server.result()
    url, rt = ready.result()
    readers = {
        "generated client (OpenCodeClient.session.events)": lambda: read_generated(url, sid, last),
        "raw httpx2 aiter_lines": lambda: read_raw(url, sid, last),
        "raw asyncio socket (bytes scan)": lambda: read_socket(url, sid, last),
        "core Sessions.log (no HTTP)": lambda: read_core(rt, sid, last),
        "core Sessions.log + wire() + SSE frame (no HTTP)": lambda: read_core_framed(rt, sid, last),
    }
    rates: dict[str, list[float]] = {k: [] for k in readers}
    try:
        for fn in readers.values():
            await fn()  # warm-up (codecs, TypeAdapters, page cache)
        for _ in range(REPS):
            for name, fn in readers.items():
                seconds, count = await fn()
                assert count == last, (name, count, last)  # seq 0 (session.created) is not public
                rates[name].append(count / seconds)
    finally:
        stop.set()
        await server
    return rates, last, build_s


async def main() -> None:
    with workspace("ocs-bench-append-") as ws:
        fsync_s = fsync_probe(ws["root"])
        appended = await bench_append(ws["db"], ws["workdir"], ws["env"])
    with workspace("ocs-bench-replay-") as ws:
        replayed, events, build_s = await bench_replay(ws["db"], ws["workdir"], ws["env"])

    print(f"(a) durable append, N={APPEND_N} events x {REPS} reps, WAL + synchronous=FULL (fsync per COMMIT); "
          f"raw 4 KiB write+fsync here: {1e6 * fsync_s:.0f} us median")
    print(table(["kind", "median events/s", "min..max", "median us/event"],
                [[k, f"{median(v):,.0f}", spread(v), f"{1e6 / median(v):,.0f}"] for k, v in appended.items()]))
    print()
    print(f"(b) replay GET /api/session/{{id}}/event (from the start), {events} events x {REPS} reps, loopback HTTP "
          f"(session built in {build_s:.1f}s)")
    print(table(["reader", "median events/s", "min..max", "median ms/10k events"],
                [[k, f"{median(v):,.0f}", spread(v), f"{1e7 / median(v):,.0f}"] for k, v in replayed.items()]))
    print()
    single = median(appended["switch_agent (1 event/tx)"])
    batched = median(appended[f"store.write batch ({BATCH} events/tx)"])
    client = median(replayed["generated client (OpenCodeClient.session.events)"])
    raw = median(replayed["raw httpx2 aiter_lines"])
    sock = median(replayed["raw asyncio socket (bytes scan)"])
    framed = median(replayed["core Sessions.log + wire() + SSE frame (no HTTP)"])
    ratios = {
        "replay_client_over_append_single": client / single,
        "replay_client_over_append_batched": client / batched,
        "append_batched_over_single": batched / single,
        "raw_httpx_over_client": raw / client,
        "socket_over_client": sock / client,
        "core_framed_over_socket": framed / sock,
    }
    print(table(["ratio", "value"], [[k, f"{v:.2f}"] for k, v in ratios.items()]))
    emit("eventlog", {
        "reps": REPS, "append_n": APPEND_N, "batch": BATCH, "replay_events": events,
        "fsync_us": round(1e6 * fsync_s, 1),
        "append_events_per_s": {k: round(median(v)) for k, v in appended.items()},
        "replay_events_per_s": {k: round(median(v)) for k, v in replayed.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
    })


if __name__ == "__main__":
    asyncio.run(main())
