"""Runtime overhead per Step with an instant provider, at small and at large prior history.

A prompt is timed from just before `Sessions.admit` (resume=True, which wakes the runner) until
`SessionExecution.wait` returns; the provider's own time (measured inside it, between its yields: near zero) is
subtracted. What is left is the runtime: admission, execution start/end, the Safe Step Boundary (session, config,
agent, instructions), promotion, loading and lowering the history, and the durable writes of the step's events
(8 fsync'd transactions per prompt: admitted, execution.started, promoted, step.started, text.started,
text.ended, step.ended, execution.succeeded).

History is built fast and realistically: one real prompt runs on a template session, its 8 durable events are
cloned (fresh message IDs, same projector) in batched transactions, and every measured session then runs one real
unmeasured prompt (so its instruction checkpoint exists) before the measured ones. History sizes are messages
(user + assistant per round). At 10 messages every measured prompt gets its own session (exactly 10 messages of
history); at 2,000, 5 sessions take 10 prompts each (history grows by 2 per prompt: 2,000..2,018). The prompts
of the two sizes are interleaved, so background load on the machine hits both alike.

Then, to show where the time goes, one extra session per size runs 10 prompts with every store.read / store.write
callback and every projection timed on the SQLite threads (which cProfile does not see), and one more session at
the large size runs 10 prompts under cProfile (event-loop thread; top 10 cumulative of the project's code, and the
unfiltered top 10).

Wall times are noisy on a shared machine; the process CPU per prompt (time.process_time: every thread, no waits) is
the steadier figure to compare commits by.

Run: .venv/bin/python bench/bench_step_overhead.py   (BENCH_PROMPTS / BENCH_SMALL / BENCH_LARGE to scale)
"""

from __future__ import annotations

import asyncio
import cProfile
import functools
import io
import os
import pstats
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from _common import emit, median, reference_ms, table, workspace

from opencode_session.core.llm import model as llm
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.store import Store
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.events import EventRecord
from opencode_session.schema.ids import message_id
from opencode_session.schema.prompt import PromptInput

PROMPTS = int(os.environ.get("BENCH_PROMPTS", 50))
SMALL = int(os.environ.get("BENCH_SMALL", 10))
LARGE = int(os.environ.get("BENCH_LARGE", 2_000))
LARGE_SESSIONS = 5  # PROMPTS spread over this many sessions at the large size
PROFILE_PROMPTS = 10
CLONE_ROUNDS_PER_TX = 50
PROMPT_TEXT = "Please summarise the changes in src/ and list the files you touched. " * 2  # ~140 chars
SCRIPT = [llm.TextStart("t"), llm.TextDelta("t", "Done: nothing to change."), llm.TextEnd("t"),
          llm.Finish("stop", llm.Usage(10, 5))]


class InstantProvider:
    """Yields a short text and Finish at once; records its own CPU-side time and when it was entered/exhausted."""

    def __init__(self) -> None:
        self.calls = 0
        self.own = 0.0  # seconds spent in this generator's own code, between resumptions
        self.entered = 0.0
        self.exhausted = 0.0
        self.request_messages = 0

    async def stream(self, request: llm.LLMRequest):
        t = time.perf_counter()
        self.calls += 1
        self.entered = t
        self.request_messages = len(request.messages)
        own = 0.0
        for item in SCRIPT:
            own += time.perf_counter() - t
            yield item
            t = time.perf_counter()
        now = time.perf_counter()
        self.own += own + (now - t)
        self.exhausted = now


@dataclass
class Sample:
    total: float  # admit call -> execution.wait returned, provider time subtracted (seconds)
    admit: float  # the admit call itself (one fsync'd transaction)
    before_provider: float  # admit returned -> provider entered (boundary, instructions, promotion, history, lowering)
    streaming: float  # provider entered -> exhausted, minus its own time (the step's durable writes per event)
    after_provider: float  # provider exhausted -> wait returned (step.ended, execution.succeeded)
    provider: float
    cpu: float  # CPU time of the whole process (every thread) over the prompt: steadier than wall time under load
    history: int  # messages in the request the provider received


@dataclass
class Bench:
    rt: Runtime
    provider: InstantProvider
    template: list[EventRecord] = field(default_factory=list)

    async def prompt(self, sid: str) -> Sample:
        p = self.provider
        calls, own = p.calls, p.own
        c0 = time.process_time()
        t0 = time.perf_counter()
        await self.rt.sessions.admit(sid, PromptInput(text=PROMPT_TEXT))
        t1 = time.perf_counter()
        assert self.rt.execution is not None
        await self.rt.execution.wait(sid)
        t2 = time.perf_counter()
        cpu = time.process_time() - c0
        assert p.calls == calls + 1, "expected exactly one provider call (one Step) per prompt"
        provider = p.own - own
        return Sample(total=t2 - t0 - provider, admit=t1 - t0, before_provider=p.entered - t1,
                      streaming=p.exhausted - p.entered - provider, after_provider=t2 - p.exhausted,
                      provider=provider, cpu=cpu, history=p.request_messages)

    async def make_template(self) -> None:
        """One real round on a scratch session; its durable events become the clone template."""
        sid = (await self.rt.sessions.create()).id
        await self.prompt(sid)
        self.template = await self.rt.store.events_after(sid, 0, limit=1_000)  # every durable event but created
        types = [r.type for r in self.template]
        assert types[0] == "session.input.admitted" and types[-1] == "session.execution.succeeded", types

    async def session_with_history(self, messages: int) -> str:
        """A new session whose projected history has exactly `messages` messages (the last round real)."""
        assert messages >= 2 and messages % 2 == 0
        sid = (await self.rt.sessions.create()).id
        rounds = messages // 2 - 1
        template_sid = self.template[0].aggregate_id
        old_input = self.template[0].data.inputID
        old_assistant = next(r.data.assistantMessageID for r in self.template if r.type == "session.step.started")

        def clone(tx, count: int) -> None:
            for _ in range(count):
                swap = {template_sid: sid, old_input: message_id(), old_assistant: message_id()}
                for record in self.template:
                    data = type(record.data).model_validate(_replace(record.data.wire(), swap))
                    tx.append(data)

        done = 0
        while done < rounds:
            count = min(CLONE_ROUNDS_PER_TX, rounds - done)
            await self.rt.store.write(lambda tx, count=count: clone(tx, count))
            done += count
        await self.prompt(sid)  # real, unmeasured: initializes the instruction checkpoint
        count = await self.rt.store.read(lambda conn: conn.execute(
            "SELECT count(*) FROM session_message WHERE session_id = ?", (sid,)).fetchone()[0])
        assert count == messages, (count, messages)
        return sid


def _replace(value: Any, swap: dict[str, str]) -> Any:
    if isinstance(value, str):
        return swap.get(value, value)
    if isinstance(value, dict):
        return {k: _replace(v, swap) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace(v, swap) for v in value]
    return value


async def build(bench: Bench, messages: int, sessions: int) -> tuple[list[str], float]:
    t0 = time.perf_counter()
    sids = [await bench.session_with_history(messages) for _ in range(sessions)]
    return sids, time.perf_counter() - t0


async def measure(bench: Bench, small: list[str], large: list[str]) -> tuple[list[Sample], list[Sample]]:
    """PROMPTS prompts per size, interleaved small/large so that machine drift hits both sizes alike."""
    at_small: list[Sample] = []
    at_large: list[Sample] = []
    for i in range(PROMPTS):
        at_small.append(await bench.prompt(small[i % len(small)]))
        at_large.append(await bench.prompt(large[i % len(large)]))
    return at_small, at_large


class StoreTimer:
    """Times what runs on the SQLite threads, which cProfile (event-loop thread only) does not see: each
    store.read / store.write callback keyed by its qualname, and the projection of each event keyed by type."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._saved = (Store.read, Store.write, Store.project)

    def _add(self, name: str, t0: float) -> None:
        self.seconds[name] += time.perf_counter() - t0
        self.calls[name] += 1

    def _wrap(self, kind: str, fn):
        target = fn.func if isinstance(fn, functools.partial) else fn  # a partial's repr names its arguments
        name = f"{kind} {getattr(target, '__qualname__', repr(target))}"

        def timed(arg):
            t0 = time.perf_counter()
            try:
                return fn(arg)
            finally:
                self._add(name, t0)

        return timed

    def __enter__(self) -> StoreTimer:
        timer = self
        read, write, project = self._saved

        async def _read(store, fn):
            return await read(store, timer._wrap("read", fn))

        async def _write(store, fn):
            return await write(store, timer._wrap("write", fn))

        def _project(store, tx, record):
            t0 = time.perf_counter()
            try:
                project(store, tx, record)
            finally:
                timer._add(f"  project {record.type}", t0)

        # timing the store's own methods for this run only, by swapping them on the class
        Store.read, Store.write, Store.project = _read, _write, _project  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        Store.read, Store.write, Store.project = self._saved  # type: ignore[method-assign]  # put them back


async def store_profile(bench: Bench, messages: int) -> dict[str, tuple[int, float]]:
    """{callback: (calls per prompt, ms per prompt)} over PROFILE_PROMPTS prompts on one fresh session."""
    sid = await bench.session_with_history(messages)
    with StoreTimer() as timer:
        for _ in range(PROFILE_PROMPTS):
            await bench.prompt(sid)
    return {k: (timer.calls[k] // PROFILE_PROMPTS, 1e3 * v / PROFILE_PROMPTS) for k, v in timer.seconds.items()}


async def loop_profile(bench: Bench, messages: int) -> tuple[list[list[Any]], float, str]:
    """cProfile of PROFILE_PROMPTS prompts: the project's functions by cumulative time, and the raw top 10."""
    sid = await bench.session_with_history(messages)
    profiler = cProfile.Profile()
    t0 = time.perf_counter()
    profiler.enable()
    for _ in range(PROFILE_PROMPTS):
        await bench.prompt(sid)
    profiler.disable()
    wall = time.perf_counter() - t0
    stats = pstats.Stats(profiler)
    marker = os.sep + "opencode_session" + os.sep
    # pstats keeps its table in an attribute its stubs do not declare
    ours = [(func, st) for func, st in stats.stats.items() if marker in func[0]]  # type: ignore[attr-defined]
    ours.sort(key=lambda item: -item[1][3])
    rows = []
    for (filename, line, name), (_cc, ncalls, tottime, cumtime, _callers) in ours[:10]:
        where = filename.split(marker, 1)[1]
        rows.append([f"{where}:{line}({name})", ncalls // PROFILE_PROMPTS,
                     f"{1e3 * tottime / PROFILE_PROMPTS:.2f}", f"{1e3 * cumtime / PROFILE_PROMPTS:.2f}"])
    raw = io.StringIO()
    pstats.Stats(profiler, stream=raw).strip_dirs().sort_stats("cumulative").print_stats(10)
    text = "\n".join(line for line in raw.getvalue().splitlines() if line.strip()
                     and not line.lstrip().startswith(("Ordered by", "List reduced")))
    # calls, unlike times, do not drift with the machine's load: what a commit adds to every Step shows here
    total = sum(st[1] for st in stats.stats.values()) // PROFILE_PROMPTS  # type: ignore[attr-defined]
    by_package: dict[str, int] = defaultdict(int)
    for (filename, _line, _name), st in ours:
        by_package[os.path.dirname(filename.split(marker, 1)[1]) or "."] += st[1]
    packages = ", ".join(f"{name} {calls // PROFILE_PROMPTS}" for name, calls in
                         sorted(by_package.items(), key=lambda item: -item[1])[:12])
    text += (f"\n\nPython function calls per prompt on the event-loop thread: {total} (the project's: "
             f"{sum(by_package.values()) // PROFILE_PROMPTS}); by package: {packages}")
    return rows, wall / PROFILE_PROMPTS, text


def summarize(samples: list[Sample]) -> dict[str, float]:
    ms = lambda attr: 1e3 * median([getattr(s, attr) for s in samples])  # noqa: E731
    return {"total_ms": ms("total"), "admit_ms": ms("admit"), "before_provider_ms": ms("before_provider"),
            "streaming_ms": ms("streaming"), "after_provider_ms": ms("after_provider"),
            "provider_us": 1e3 * ms("provider"), "cpu_ms": ms("cpu"), "history_min": min(s.history for s in samples),
            "history_max": max(s.history for s in samples)}


async def main() -> None:
    ref = reference_ms()
    with workspace("ocs-bench-step-") as ws:
        provider = InstantProvider()
        options = RuntimeOptions(db_path=ws["db"], directory=ws["workdir"], env=ws["env"],
                                 drain_factory=make_drain_factory(provider=lambda _model: provider, titles=False))
        async with Runtime(options) as rt:
            bench = Bench(rt, provider)
            await bench.make_template()
            warm = await bench.session_with_history(SMALL)
            for _ in range(5):
                await bench.prompt(warm)  # warm-up: imports, codecs, config parsing caches, page cache
            small_sids, small_build = await build(bench, SMALL, PROMPTS)
            large_sids, large_build = await build(bench, LARGE, LARGE_SESSIONS)
            small, large = await measure(bench, small_sids, large_sids)
            store_small = await store_profile(bench, SMALL)
            store_large = await store_profile(bench, LARGE)
            prof_rows, prof_per_prompt, prof_raw = await loop_profile(bench, LARGE)

    s, big = summarize(small), summarize(large)
    print(f"Step overhead with an instant provider: median of {PROMPTS} prompts per size, one Step each; "
          f"times in ms per prompt")
    cols = [("total_ms", "runtime total (excl. provider)"), ("admit_ms", "  admit call"),
            ("before_provider_ms", "  admit -> provider called"), ("streaming_ms", "  provider stream handling"),
            ("after_provider_ms", "  provider done -> wait returns"), ("provider_us", "provider own time (us)"),
            ("cpu_ms", "process CPU per prompt (all threads)")]
    print(table(["", f"{SMALL} msgs", f"{LARGE} msgs", "ratio"],
                [[label, f"{s[k]:.2f}", f"{big[k]:.2f}", f"{big[k] / s[k]:.2f}" if s[k] else "-"] for k, label in cols]
                + [["messages in the request (history + prompt)", f"{s['history_min']}..{s['history_max']}",
                    f"{big['history_min']}..{big['history_max']}", ""]]))
    print(f"(history built in {small_build:.1f}s for {PROMPTS} sessions x {SMALL} msgs, {large_build:.1f}s for "
          f"{LARGE_SESSIONS} sessions x {LARGE} msgs)")
    print(f"(reference loop {ref:.0f} ms: the machine's speed just now; compare runs by their ratios)")
    ratio = big["total_ms"] / s["total_ms"]
    print(f"\nratio {LARGE} vs {SMALL} messages: {ratio:.2f}x  "
          f"(+{(big['total_ms'] - s['total_ms']) / (LARGE - SMALL) * 1e3:.1f} us per extra history message)")
    print(f"\nWhere the time goes, SQLite threads ({PROFILE_PROMPTS} prompts on one session per size; "
          f"'project X' rows are inside the write callbacks above them)")
    keys = sorted(store_large, key=lambda k: -store_large[k][1])
    store_rows = []
    for k in keys[:14]:
        calls, large_ms = store_large[k]
        small_ms = store_small.get(k, (0, 0.0))[1]
        store_rows.append([k, calls, f"{small_ms:.2f}", f"{large_ms:.2f}",
                           f"{large_ms / small_ms:.1f}" if small_ms else "-"])
    print(table(["store callback / projection", "calls/prompt", f"ms/prompt @{SMALL}", f"ms/prompt @{LARGE}",
                 "ratio"], store_rows))
    print(f"\nEvent-loop thread, cProfile of {PROFILE_PROMPTS} prompts at {LARGE} messages "
          f"({1e3 * prof_per_prompt:.2f} ms/prompt under the profiler); top 10 cumulative, project code only:")
    print(table(["function", "calls/prompt", "tottime ms/prompt", "cumtime ms/prompt"], prof_rows))
    print("\nSame run, unfiltered top 10 cumulative (asyncio frames include time waiting on the SQLite threads):")
    print(prof_raw)
    emit("step_overhead", {
        "prompts": PROMPTS, "reference_ms": round(ref, 1), "small_messages": SMALL, "large_messages": LARGE,
        "small": {k: round(v, 3) for k, v in s.items()}, "large": {k: round(v, 3) for k, v in big.items()},
        "ratio_total_large_over_small": round(ratio, 3),
        "store_ms_per_prompt": {k.strip(): {"small": round(store_small.get(k, (0, 0.0))[1], 3),
                                            "large": round(store_large[k][1], 3)} for k in keys},
        "profile_ms_per_prompt": round(1e3 * prof_per_prompt, 3),
        "profile_top_cumulative": [[r[0], float(r[3])] for r in prof_rows],
    })


if __name__ == "__main__":
    asyncio.run(main())
