"""Many sessions and many readers at once: prompts/s, admission latency, and whether every reader kept every event.

A real `ocs serve` process (its own core) serves 50 sessions that each get 4 queued prompts at once, answered by a
loopback Chat Completions server (in this process) with a short streamed text, while 20 subscribers read the
instance stream (`/api/event`) and 180 read per-session streams (`/api/session/{id}/event`), all through the
generated client. Prompts/s counts from the first admission until every session is idle; admission latency is each
`POST .../prompt` as the client saw it. The last rows say how many readers received every durable event of their
sessions, in order, how many were cut off, and how many of those saw a clean end of stream instead of an error.
The same scenario without the 20 instance readers runs alongside, as the like-for-like baseline: a server that
cuts those readers off early does less work than one that keeps them.

Run: .venv/bin/python bench/bench_load.py   (BENCH_LOAD_REPS, BENCH_LOAD_SESSIONS, BENCH_LOAD_PROMPTS to scale)
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

from _common import ROOT, emit, median, spread, table

sys.path.insert(0, str(ROOT))  # the scenario lives with the test that asserts it

from tests.support import fake_openai as fake  # noqa: E402
from tests.support.config import write_global_config  # noqa: E402
from tests.support.load import load_config, percentile, run_load  # noqa: E402
from tests.support.server import isolated_env, start_server  # noqa: E402

REPS = int(os.environ.get("BENCH_LOAD_REPS", 3))
SESSIONS = int(os.environ.get("BENCH_LOAD_SESSIONS", 50))
PROMPTS = int(os.environ.get("BENCH_LOAD_PROMPTS", 4))


async def one_run(provider: fake.FakeOpenAI, instance_readers: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory(prefix="bench-load-", dir=os.environ.get("BENCH_TMPDIR")) as tmp:
        root = Path(tmp)
        env = isolated_env(root)
        write_global_config(env["XDG_CONFIG_HOME"], load_config(provider.base_url))
        server = start_server(root, env=env)
        try:
            result = await run_load(server.url, sessions=SESSIONS, prompts=PROMPTS,
                                    instance_subscribers=instance_readers)
        finally:
            server.stop()
    subs = result.subscribers
    return {
        "prompts_per_s": result.prompts / result.elapsed,
        "admission_p50_ms": percentile(result.admission_ms, 50),
        "admission_p99_ms": percentile(result.admission_ms, 99),
        "complete_readers": len(subs) - len(result.missing()),
        "cut_readers": sum(s.stopped for s in subs),
        "cut_silently": sum(s.ended for s in subs),
        "readers": len(subs),
    }


async def main() -> None:
    provider = fake.FakeOpenAI()
    provider.fallback = fake.completion(fake.text_deltas("Sure", ", here ", "it is."))
    provider.start()
    variants = {"all 200 readers": 20, "180 session readers only": 0}
    try:
        # interleaved, so drift on a shared machine hits both variants alike
        runs: dict[str, list[dict[str, float]]] = {name: [] for name in variants}
        for _ in range(REPS):
            for name, instance_readers in variants.items():
                runs[name].append(await one_run(provider, instance_readers))
    finally:
        provider.stop()
    keys = ["prompts_per_s", "admission_p50_ms", "admission_p99_ms", "complete_readers", "cut_readers",
            "cut_silently"]
    print(f"{SESSIONS} sessions x {PROMPTS} queued prompts, 180 session readers and 20 or 0 instance readers, "
          f"{REPS} runs each (medians)")
    print(table(["measure", *variants, "min..max (all readers)"],
                [[k, *(f"{median([r[k] for r in runs[n]]):,.1f}" for n in variants),
                  spread([r[k] for r in runs["all 200 readers"]])] for k in keys]))
    emit("load", {name: {k: median([r[k] for r in rs]) for k in keys} for name, rs in runs.items()}
         | {"runs": runs})


if __name__ == "__main__":
    asyncio.run(main())
