"""A 500-Step session on a 32k-token model: does every request stay under the budget, how often does it compact,
and what does compaction cost the runtime?

One prompt starts a tool loop: each Step calls a local tool that returns about 3,000 characters, so the loop
passes the window many times. The provider is in-process and instant: it answers Steps with the next tool call
(the last one with text) and compaction summaries with a valid summary, and it measures every request itself (a
quarter token per character of the JSON of its system text, messages and tools — independent of the runtime's
estimate) against the model's window minus its output limit.

Timed per run: the whole session (admit until idle); the runtime's budget check before each Step (estimation,
incremental over the cached history); and each compaction (split, serialization, summary requests, events),
the provider's own time being near zero. The overhead is budget checks plus compactions as a share of the
session. Medians over BENCH_RUNS runs (default 3); the machine is shared, so the numbers are noisy.

Run: .venv/bin/python bench/bench_compaction.py   (BENCH_STEPS / BENCH_RUNS to scale)
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import dataclass, field
from typing import Any

from _common import emit, median, spread, table, workspace

from opencode_session.core.compaction import compactor as compaction
from opencode_session.core.compaction.render import SUMMARY_SYSTEM
from opencode_session.core.llm import model as llm
from opencode_session.core.runtime import Runtime, RuntimeOptions
from opencode_session.core.tools.registry import ToolRegistry
from opencode_session.core.tools.tool import ToolContext, ToolOutput
from opencode_session.core.wiring import make_drain_factory
from opencode_session.schema.prompt import PromptInput

STEPS = int(os.environ.get("BENCH_STEPS", 500))
RUNS = int(os.environ.get("BENCH_RUNS", 3))
WINDOW = 32_000
OUTPUT = 4_000
CONFIG: dict[str, Any] = {
    "model": "local/m32k",
    "compaction": {"buffer": 4_000, "tokens": 4_000},
    "provider": {"local": {"npm": "@ai-sdk/openai-compatible",
                           "options": {"baseURL": "http://127.0.0.1:9/v1", "apiKey": "x"},
                           "models": {"m32k": {"limit": {"context": WINDOW, "output": OUTPUT}}}}},
}
SUMMARY = "## Objective\n- Run the work tool repeatedly.\n\n## Work State\n### Active\n- Still looping.\n\n" \
          "## Next Move\n- Call the work tool again."
LINE = "step {n}: compiled module {m} of the project; 3 warnings in src/module_{m}.py, all about unused imports.\n"


class WorkTool:
    name = "work"
    description = "Does one unit of work and reports on it"
    parameters: dict[str, Any] = {"type": "object", "properties": {"n": {"type": "integer"}}}

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        n = int(input.get("n", 0))
        return ToolOutput.of_text("".join(LINE.format(n=n, m=m) for m in range(30)))


def measure(request: llm.LLMRequest) -> int:
    def part(p: Any) -> Any:
        return getattr(p, "text", None) or getattr(p, "input", None) or getattr(p, "mime", "")

    messages = [[part(p) for p in getattr(m, "parts", [])] + [getattr(m, "text", "")] for m in request.messages]
    tools = [[t.name, t.description, t.parameters] for t in request.tools]
    return len(json.dumps([request.system, messages, tools], ensure_ascii=False, default=str)) // 4


@dataclass
class LoopProvider:
    """Instant answers; measures every request and counts the ones over the window minus the output limit."""

    steps: int
    step_calls: int = 0
    summary_calls: int = 0
    largest: int = 0
    over: int = 0
    own: float = 0.0

    async def stream(self, request: llm.LLMRequest):
        t = time.perf_counter()
        size = measure(request)
        self.largest = max(self.largest, size)
        self.over += size + (request.max_output_tokens or 0) > WINDOW
        usage = llm.Usage(size, 20)
        if request.system and request.system[0] == SUMMARY_SYSTEM:
            self.summary_calls += 1
            items: list[llm.StreamEvent] = [llm.TextStart("s"), llm.TextDelta("s", SUMMARY), llm.TextEnd("s"),
                                            llm.Finish("stop", usage)]
        else:
            self.step_calls += 1
            if self.step_calls >= self.steps:
                items = [llm.TextStart("t"), llm.TextDelta("t", "Done."), llm.TextEnd("t"), llm.Finish("stop", usage)]
            else:
                items = [llm.ToolCall(f"call_{self.step_calls}", "work", {"n": self.step_calls}),
                         llm.Finish("tool-calls", usage)]
        self.own += time.perf_counter() - t
        for item in items:
            yield item


@dataclass
class Timers:
    checks: list[float] = field(default_factory=list)
    compactions: list[float] = field(default_factory=list)


def instrument(timers: Timers) -> None:
    """Time the Compactor's budget check and its compactions (class-level wrappers, for this process only)."""
    check, compact = compaction.Compactor.over_budget, compaction.Compactor.compact

    def timed_check(self: compaction.Compactor, *args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return check(self, *args, **kw)
        finally:
            timers.checks.append(time.perf_counter() - t)

    async def timed_compact(self: compaction.Compactor, *args: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return await compact(self, *args, **kw)
        finally:
            timers.compactions.append(time.perf_counter() - t)

    compaction.Compactor.over_budget = timed_check  # type: ignore[method-assign]
    compaction.Compactor.compact = timed_compact  # type: ignore[method-assign]


async def run_once(timers: Timers) -> dict[str, Any]:
    with workspace("ocs-bench-compaction-") as ws:
        (ws["root"] / "config" / "opencode" / "opencode.json").write_text(json.dumps(CONFIG))
        provider = LoopProvider(STEPS)
        tools = ToolRegistry()
        tools.register(WorkTool())
        options = RuntimeOptions(db_path=ws["db"], directory=ws["workdir"], env=ws["env"],
                                 drain_factory=make_drain_factory(provider=lambda _m: provider, tools=tools,
                                                                  titles=False))
        async with Runtime(options) as rt:
            assert rt.execution is not None
            sid = (await rt.sessions.create()).id
            timers.checks.clear()
            timers.compactions.clear()
            t0 = time.perf_counter()
            await rt.sessions.admit(sid, PromptInput(text="Call the work tool until told otherwise."))
            await rt.execution.wait(sid)
            total = time.perf_counter() - t0
            info = await rt.sessions.get(sid)
        assert provider.step_calls == STEPS, f"expected {STEPS} Steps, the provider saw {provider.step_calls}"
        return {"total_s": total - provider.own, "checks_s": sum(timers.checks),
                "check_median_us": median(timers.checks) * 1e6, "compactions": len(timers.compactions),
                "compaction_median_ms": median(timers.compactions) * 1e3 if timers.compactions else 0.0,
                "compactions_s": sum(timers.compactions), "largest_request": provider.largest,
                "over_budget_requests": provider.over, "summary_calls": provider.summary_calls,
                "input_tokens": info.tokens.input if info.tokens else 0}


async def main() -> None:
    timers = Timers()
    instrument(timers)
    runs = [await run_once(timers) for _ in range(RUNS)]

    def col(key: str) -> list[float]:
        return [float(r[key]) for r in runs]

    overhead = [(r["checks_s"] + r["compactions_s"]) / r["total_s"] * 100 for r in runs]
    rows = [
        [f"session, {STEPS} Steps (s)", f"{median(col('total_s')):.2f}", spread(col("total_s"))],
        ["budget check per Step (us)", f"{median(col('check_median_us')):.0f}", spread(col("check_median_us"))],
        ["budget checks, total (s)", f"{median(col('checks_s')):.3f}", spread(col("checks_s"))],
        ["compactions", f"{median(col('compactions')):.0f}", spread(col("compactions"))],
        ["per compaction (ms)", f"{median(col('compaction_median_ms')):.1f}", spread(col("compaction_median_ms"))],
        ["compactions, total (s)", f"{median(col('compactions_s')):.2f}", spread(col("compactions_s"))],
        ["overhead: checks + compactions (% of session)", f"{median(overhead):.1f}", spread(overhead)],
        ["largest request (tokens, provider's measure)", f"{median(col('largest_request')):.0f}",
         spread(col("largest_request"))],
    ]
    print(f"{STEPS} Steps on a {WINDOW:,}-token model (output limit {OUTPUT:,}); medians of {RUNS} runs")
    print(table(["measure", "median", "min..max"], rows))
    every_under = all(r["over_budget_requests"] == 0 for r in runs)
    print(f"every request under budget: {every_under} (largest + output = "
          f"{max(col('largest_request')) + OUTPUT:,.0f} of {WINDOW:,})")
    emit("compaction", {"steps": STEPS, "runs": runs, "every_request_under_budget": every_under,
                        "overhead_pct_median": median(overhead)})


if __name__ == "__main__":
    asyncio.run(main())
