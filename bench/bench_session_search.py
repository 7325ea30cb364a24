"""Session search at scale: 10,000 sessions of 50 messages each (user prompts and completed assistant answers, words
drawn from a Zipf-like vocabulary), written through the store's own rows (as the projector writes them, search
documents included); then the median latency of one page of `search` results (20 sessions, ranked) for words of
each frequency, a second page through its cursor, and the unfiltered list for comparison. Target: < 50 ms.

Run: .venv/bin/python bench/bench_session_search.py  (BENCH_SEARCH_SESSIONS / BENCH_SEARCH_MESSAGES / BENCH_SEARCH_REPS
to scale; BENCH_SEARCH_BACKENDS=sqlite,postgres adds PostgreSQL at OCS_TEST_POSTGRES, in a schema of its own;
BENCH_SEARCH_DB=file.sqlite keeps the seeded SQLite database there and measures a database already there again)
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import random
import string
import sys
import time
from collections.abc import Iterator
from typing import Any

from _common import ROOT, emit, median, spread, table, workspace

sys.path.insert(0, str(ROOT))  # the PostgreSQL schema helper lives with the tests

from opencode_session.core.store import Store  # noqa: E402
from opencode_session.core.store.keyset import PageRequest  # noqa: E402
from opencode_session.core.store.rows import SessionFilter  # noqa: E402

SESSIONS = int(os.environ.get("BENCH_SEARCH_SESSIONS", 10_000))
MESSAGES = int(os.environ.get("BENCH_SEARCH_MESSAGES", 50))
REPS = int(os.environ.get("BENCH_SEARCH_REPS", 15))
BACKENDS = os.environ.get("BENCH_SEARCH_BACKENDS", "sqlite").split(",")
KEPT = os.environ.get("BENCH_SEARCH_DB")
BATCH = 50  # sessions per write transaction
PAGE = 20
TARGET_MS = 50.0
VOCABULARY = 20_000
RARE = "zanzibarquill"  # planted in the messages of 10 sessions


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < VOCABULARY:
        words.add("".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 9))))
    return sorted(words)


class Corpus:
    """Deterministic text: words by Zipf-like frequency (the first the most frequent)."""

    def __init__(self) -> None:
        self.rng = random.Random(7)
        self.words = _vocabulary(self.rng)
        self.rng.shuffle(self.words)
        self.cumulative = list(itertools.accumulate(1 / (rank + 1) for rank in range(VOCABULARY)))

    def text(self, n: int) -> str:
        return " ".join(self.rng.choices(self.words, cum_weights=self.cumulative, k=n))


def _session(n: int, corpus: Corpus) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    sid = f"ses_{n:08d}"
    created = 1_700_000_000_000 + n * 1000
    info = {"id": sid, "projectID": "prj", "title": corpus.text(4), "location": {"directory": "/work/p"},
            "time": {"created": created, "updated": created}, "agent": "build", "cost": 0,
            "tokens": {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}}
    messages: list[dict[str, Any]] = []
    for m in range(MESSAGES):
        at = created + m + 1
        text = corpus.text(corpus.rng.randint(8, 40))
        if m == 10 and n % (SESSIONS // 10) == 0:
            text += f" {RARE}"
        if m % 2 == 0:
            messages.append({"id": f"msg_{n:08d}_{m:03d}", "time": {"created": at}, "type": "user", "text": text})
        else:
            messages.append({"id": f"msg_{n:08d}_{m:03d}", "time": {"created": at, "completed": at},
                             "type": "assistant", "agent": "build", "model": {"id": "m", "providerID": "p"},
                             "content": [{"type": "text", "id": f"t{m}", "text": text}]})
    return info, messages


async def _seed(store: Store) -> float:
    corpus = Corpus()
    started = time.perf_counter()
    for first in range(0, SESSIONS, BATCH):
        batch = [_session(n, corpus) for n in range(first, min(first + BATCH, SESSIONS))]

        def _write(tx: Any, batch: list[tuple[dict[str, Any], list[dict[str, Any]]]] = batch) -> None:
            for info, messages in batch:
                tx.sessions.insert(info)
                for seq, message in enumerate(messages):
                    tx.messages.insert(info["id"], seq, message)

        await store.write(_write)
    return time.perf_counter() - started


def _queries() -> dict[str, str]:
    corpus = Corpus()
    return {
        f"rare word (10 sessions): {RARE}": RARE,
        "uncommon word (rank 2000)": corpus.words[2000],
        "mid word (rank 200)": corpus.words[200],
        "two words (ranks 50, 300)": f"{corpus.words[50]} {corpus.words[300]}",
        "prefix (4 letters of rank 100)": corpus.words[100][:4],
        "frequent word (rank 10)": corpus.words[10],
        "most frequent word (rank 0)": corpus.words[0],
    }


async def _timed(store: Store, where: SessionFilter, request: PageRequest) -> tuple[float, Any]:
    started = time.perf_counter()
    page = await store.read(lambda r: r.sessions.page(where, request))
    return (time.perf_counter() - started) * 1000, page


async def _measure(store: Store) -> list[tuple[str, float, str, int]]:
    rows: list[tuple[str, float, str, int]] = []
    cases = [("no search (the plain list)", None), *_queries().items()]
    for label, text in cases:
        where = SessionFilter(search=text)
        times = []
        for _ in range(REPS):
            ms, page = await _timed(store, where, PageRequest("desc", PAGE))
            times.append(ms)
        rows.append((label, median(times), spread(times), len(page.items)))
        if text is not None and page.last is not None and label.startswith("mid"):
            times = []
            for _ in range(REPS):
                ms, second = await _timed(store, where, PageRequest("desc", PAGE, page.last, "next"))
                times.append(ms)
            rows.append((f"{label}, page 2 by cursor", median(times), spread(times), len(second.items)))
    return rows


@contextlib.contextmanager
def _database(backend: str, ws: dict[str, Any]) -> Iterator[tuple[Any, Any]]:
    """The database, and what to do once it is seeded: on PostgreSQL, ANALYZE (as autovacuum soon would on a live
    database), so the planner knows how rare a word is."""
    if backend == "postgres":
        import psycopg

        from opencode_session.core.store.postgres import PostgresBackend
        from tests.support.postgres import fresh_schema

        def analyze(url: str) -> None:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("ANALYZE")

        with fresh_schema() as url:
            yield PostgresBackend(url), lambda: analyze(url)
    else:
        yield KEPT or ws["db"], lambda: None


async def _run(backend: str) -> dict[str, Any]:
    with workspace("ocs-bench-search-") as ws, _database(backend, ws) as (database, seeded_hook):
        async with Store(database) as store:
            kept = backend == "sqlite" and KEPT and await store.read(
                lambda r: r.sessions.page(SessionFilter(), PageRequest("desc", 1)).items)
            seeded = 0.0 if kept else await _seed(store)
            seeded_hook()
            what = "kept" if kept else f"seeded in {seeded:.1f} s:"
            print(f"{backend}: {what} {SESSIONS:,} sessions x {MESSAGES} messages", flush=True)
            rows = await _measure(store)
    print(table([f"{backend}: query", "median ms", "min..max", "sessions"],
                [[label, f"{ms:.1f}", s, n] for label, ms, s, n in rows]))
    plain = rows[0][1]
    searched = [ms for label, ms, _, _ in rows[1:]]
    print(f"{backend}: worst search median {max(searched):.1f} ms ({max(searched) / plain:.1f}x the plain list), "
          f"target < {TARGET_MS:.0f} ms\n", flush=True)
    return {"seed_s": round(seeded, 1), "medians_ms": {label: round(ms, 2) for label, ms, _, _ in rows}}


async def main() -> None:
    results = {backend: await _run(backend) for backend in BACKENDS}
    emit("session_search", {"sessions": SESSIONS, "messages": MESSAGES, "page": PAGE, "reps": REPS, **results})


if __name__ == "__main__":
    asyncio.run(main())
