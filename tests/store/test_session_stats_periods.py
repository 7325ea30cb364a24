"""Usage statistics read from quarter-hour sums and the rows at a range's ends count exactly what the messages hold,
on SQLite and PostgreSQL: Steps on and beside quarter-hour boundaries (around a daylight-saving change) over ranges
that start and end on, just beside and inside quarter hours; and a zone whose offset is not whole quarter hours
(Monrovia before 1972), which counts row by row; a session moved to another project counts there."""

from __future__ import annotations

import contextlib
import datetime as dt
import zoneinfo
from collections.abc import Iterator
from typing import Any

import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.session.stats import session_stats
from opencode_session.core.store import Store
from tests.store.backends import BACKENDS, BackendFactory
from tests.store.test_session_stats import ms, seed

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

Q = 900_000  # a quarter hour, in ms


@pytest.fixture(params=BACKENDS, ids=lambda factory: factory.name)
def factory(request, tmp_path) -> Iterator[BackendFactory]:
    made: BackendFactory = request.param
    with contextlib.ExitStack() as stack:
        made.prepare(tmp_path, stack)
        yield made


def _plan(base: int) -> list[tuple[str, int, list[int]]]:
    """Sessions: (id, the prompt's time, its Steps' times), on and beside quarter hours from `base`."""
    plan = []
    for n, offset in enumerate((0, 1, Q - 1, Q, Q + Q // 2, 2 * Q - 1, 5 * Q, 7 * Q + 3, 12 * Q - 2)):
        at = base + offset
        plan.append((f"ses_{n:02d}", at, [at + 1, at + Q - 1, at + 3 * Q + 7]))
    return plan


def _seeded(plan: list[tuple[str, int, list[int]]]) -> Any:
    def write(tx: Any) -> None:
        for n, (sid, at, steps) in enumerate(plan):
            seed(tx, sid, at, [(at, [{"at": t, "model": ("m1", "m2")[i % 2], "tokens": (n + 1, 1, 0, 0, 0),
                                      "cost": 0.5, "tools": [("bash", ("completed", "error")[i % 2])],
                                      "error": i == 2} for i, t in enumerate(steps)])])
    return write


def _expected(plan: list[tuple[str, int, list[int]]], start: int, end: int, tz: dt.tzinfo,
              only: set[str] | None = None) -> dict[str, Any]:
    """What the statistics must say, counted here from the plan (`only`: of these sessions)."""
    def day(t: int) -> str:
        return dt.datetime.fromtimestamp(t / 1000, dt.UTC).astimezone(tz).date().isoformat()

    sessions: set[str] = set()
    prompts = steps = failed = tokens = calls = failures = 0
    days: dict[str, tuple[set[str], list[int]]] = {}
    for n, (sid, at, times) in enumerate(plan):
        if only is not None and sid not in only:
            continue
        if start <= at < end:
            sessions.add(sid)
            prompts += 1
            days.setdefault(day(at), (set(), [0, 0]))[0].add(sid)
            days[day(at)][1][0] += 1
        for i, t in enumerate(times):
            if start <= t < end:
                sessions.add(sid)
                steps += 1
                failed += i == 2
                tokens += n + 1
                calls += 1
                failures += i % 2
                days.setdefault(day(t), (set(), [0, 0]))[0].add(sid)
                days[day(t)][1][1] += 1
    return {"total": (len(sessions), prompts, steps, failed, tokens),
            "days": sorted((d, len(s), *counts) for d, (s, counts) in days.items()),
            "tools": [("bash", calls, failures)] if calls else []}


def _counted(stats: Any) -> dict[str, Any]:
    t = stats.total
    return {"total": (t.sessions, t.prompts, t.steps, t.failed, t.tokens.input),
            "days": [(d.day, d.sessions, d.prompts, d.steps) for d in stats.days],
            "tools": [(x.tool, x.calls, x.failures) for x in stats.tools or ()]}


async def _check(store: Store, plan: list[tuple[str, int, list[int]]], base: int, zone: str,
                 ranges: list[tuple[int, int]]) -> None:
    tz = zoneinfo.ZoneInfo(zone)
    for start, end in ranges:
        stats = await session_stats(store, start=base + start, end=base + end, timezone=zone)
        assert _counted(stats) == _expected(plan, base + start, base + end, tz), (start, end)
    whole = await session_stats(store, timezone=zone)
    assert _counted(whole) == _expected(plan, 0, 2**62, tz)


RANGES = [(0, 20 * Q), (1, 20 * Q), (-1, 12 * Q - 1), (Q, 2 * Q), (Q + 1, 2 * Q - 1), (Q - 1, Q + 1),
          (3, 4), (2 * Q, 5 * Q), (Q // 2, 7 * Q + 4), (-100 * Q, 100 * Q)]


async def test_quarter_hours_and_their_ends_count_every_step_once(factory):
    # New York's clocks go forward at 02:00 local on 8 March 2026: the Steps span the change
    base = ms("2026-03-08T01:15:00-05:00")
    plan = _plan(base)
    async with Store(factory.backend(), project=project) as store:
        await store.write(_seeded(plan))
        await _check(store, plan, base, "America/New_York", RANGES)
        await _check(store, plan, base, "Asia/Kathmandu", RANGES)  # +05:45


async def test_a_zone_off_the_quarter_hours_counts_row_by_row(factory):
    # Monrovia kept -00:44:30 until 1972: its days start off the quarter hours; a day boundary falls among the Steps
    base = ms("1971-06-01T23:30:00-00:44:30")
    plan = _plan(base)
    async with Store(factory.backend(), project=project) as store:
        await store.write(_seeded(plan))
        await _check(store, plan, base, "Africa/Monrovia", RANGES)


async def test_a_moved_session_counts_in_its_new_project(factory):
    base = ms("2026-03-08T01:15:00-05:00")
    plan = _plan(base)

    def move(tx: Any) -> None:
        info = tx.sessions.load_data("ses_03")
        info["projectID"] = "elsewhere"
        tx.sessions.save_data("ses_03", info)

    async with Store(factory.backend(), project=project) as store:
        await store.write(_seeded(plan))
        await store.write(move)
        tz = zoneinfo.ZoneInfo("UTC")
        for start, end in RANGES:
            moved = await session_stats(store, start=base + start, end=base + end, project="elsewhere")
            assert _counted(moved) == _expected(plan, base + start, base + end, tz, {"ses_03"}), (start, end)
            stayed = await session_stats(store, start=base + start, end=base + end, project="prj")
            rest = {sid for sid, _, _ in plan} - {"ses_03"}
            assert _counted(stayed) == _expected(plan, base + start, base + end, tz, rest), (start, end)
