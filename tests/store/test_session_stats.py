"""Usage statistics counted by the store (`experimental.session.stats`'s SQL) on SQLite and PostgreSQL, over sessions
seeded directly as projection rows at chosen times: totals, per model, per agent, per local day in a time zone
(a day boundary between two Steps, and a daylight-saving change), tool reliability, ranges and projects."""

from __future__ import annotations

import contextlib
import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest

from opencode_session.core.session.projector import project
from opencode_session.core.session.stats import session_stats, shifts, zone
from opencode_session.core.store import Store
from opencode_session.schema.errors import InvalidRequestError
from tests.store.backends import BACKENDS, BackendFactory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NY = zone("America/New_York")


def ms(text: str) -> int:
    """Epoch ms of an ISO time with its offset."""
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


@pytest.fixture(params=BACKENDS, ids=lambda factory: factory.name)
def factory(request, tmp_path) -> Iterator[BackendFactory]:
    made: BackendFactory = request.param
    with contextlib.ExitStack() as stack:
        made.prepare(tmp_path, stack)
        yield made


def _tool(n: int, name: str, status: str) -> dict[str, Any]:
    state: dict[str, Any] = {"status": status, "input": {}, "content": [], "structured": {}}
    if status == "error":
        state["error"] = {"type": "tool", "message": "failed"}
    return {"type": "tool", "id": f"call_{n}", "name": name, "state": state, "time": {"created": 1}}


def seed(tx: Any, sid: str, created: int, turns: list[tuple[int, list[dict[str, Any]]]],
         project_id: str = "prj") -> None:
    """A session created at `created` with, per turn, a user message at its time and its Steps (each a dict of
    `at`, `model`, `agent`, `tokens` (input, output, reasoning, cache read, cache write), `cost`, `tools`
    [(name, status)], `error`)."""
    tx.sessions.insert({"id": sid, "projectID": project_id, "title": "t", "location": {"directory": "/w"},
                        "time": {"created": created, "updated": created}, "agent": "build"})
    seq = 0
    for t, steps in turns:
        seq += 1
        tx.messages.insert(sid, seq, {"id": f"msg_{sid}_{seq}", "time": {"created": t}, "type": "user",
                                      "text": "do it"})
        for step in steps:
            seq += 1
            i, o, r, cr, cw = step["tokens"]
            message: dict[str, Any] = {
                "id": f"msg_{sid}_{seq}", "time": {"created": step["at"], "completed": step["at"] + 5},
                "type": "assistant", "agent": step.get("agent", "build"),
                "model": {"id": step.get("model", "m1"), "providerID": "p"},
                "content": [{"type": "text", "id": "t", "text": "ok"},
                            *(_tool(n, name, status) for n, (name, status) in enumerate(step.get("tools", ())))],
                "finish": "stop", "cost": step["cost"],
                "tokens": {"input": i, "output": o, "reasoning": r, "cache": {"read": cr, "write": cw}}}
            if step.get("error"):
                message["error"] = {"type": "provider", "message": "broke"}
                message["finish"] = "error"
            tx.messages.insert(sid, seq, message)


# Two sessions around midnight in New York (05:00 UTC in winter): one turn late on 9 January local, one early on
# 10 January local, and a third session in another project.
EVENING = ms("2026-01-09T23:30:00-05:00")
MORNING = ms("2026-01-10T00:30:00-05:00")


def _scripted(tx: Any) -> None:
    seed(tx, "ses_a", EVENING - 60_000, [
        (EVENING, [
            {"at": EVENING + 1000, "model": "m1", "tokens": (100, 20, 5, 10, 2), "cost": 0.25,
             "tools": [("bash", "completed"), ("read", "error")]},
            {"at": EVENING + 2000, "model": "m1", "tokens": (150, 30, 0, 40, 0), "cost": 0.5,
             "tools": [("bash", "error"), ("bash", "running")]},  # a call still running is not settled
        ]),
    ])
    seed(tx, "ses_b", MORNING - 60_000, [
        (MORNING, [
            {"at": MORNING + 1000, "model": "m2", "agent": "plan", "tokens": (7, 3, 1, 0, 1), "cost": 0.125,
             "tools": [("read", "completed")]},
        ]),
        (MORNING + 10_000, [
            {"at": MORNING + 11_000, "model": "m2", "agent": "plan", "tokens": (1, 1, 0, 0, 0), "cost": 0.0,
             "error": True},
        ]),
    ])
    seed(tx, "ses_c", MORNING, [(MORNING + 5000, [
        {"at": MORNING + 6000, "model": "m1", "tokens": (1000, 1000, 0, 0, 0), "cost": 2.0}])],
        project_id="other")


def _tokens(stats: Any) -> tuple[int, ...]:
    t = stats.tokens
    return (t.input, t.output, t.reasoning, t.cache.read, t.cache.write)


async def test_stats_count_exactly_what_the_scripted_turns_used(factory):
    async with Store(factory.backend(), project=project) as store:
        await store.write(_scripted)
        stats = await session_stats(store, project="prj", timezone="America/New_York")
        assert stats.created == 2
        total = stats.total
        assert (total.sessions, total.prompts, total.steps, total.failed) == (2, 3, 4, 1)
        assert _tokens(total) == (258, 54, 6, 50, 3) and total.cost == pytest.approx(0.875)
        by_model = {m.modelID: m for m in stats.models}
        assert sorted(by_model) == ["m1", "m2"]
        # a prompt counts for the model and agent of the first Step that answered it: the rows add up to the total
        assert (by_model["m1"].steps, by_model["m1"].sessions, by_model["m1"].prompts) == (2, 1, 1)
        assert by_model["m2"].prompts == 2 and sum(m.prompts for m in stats.models) == total.prompts
        assert {a.agent: a.prompts for a in stats.agents} == {"build": 1, "plan": 2}
        assert _tokens(by_model["m1"]) == (250, 50, 5, 50, 2) and by_model["m1"].cost == pytest.approx(0.75)
        assert (by_model["m2"].steps, by_model["m2"].failed) == (2, 1)
        assert {a.agent: a.steps for a in stats.agents} == {"build": 2, "plan": 2}
        # the days are New York's: the two turns 30 minutes either side of its midnight fall on two days
        assert [(d.day, d.sessions, d.prompts, d.steps) for d in stats.days] == [
            ("2026-01-09", 1, 1, 2), ("2026-01-10", 1, 2, 2)]
        assert [_tokens(d) for d in stats.days] == [(250, 50, 5, 50, 2), (8, 4, 1, 0, 1)]
        assert [(t.tool, t.calls, t.failures) for t in stats.tools or ()] == [("bash", 2, 1), ("read", 2, 1)]

        # in UTC both turns are on 10 January; every project counts without the filter
        utc = await session_stats(store)
        assert [(d.day, d.steps) for d in utc.days] == [("2026-01-10", 5)]
        assert (utc.created, utc.total.sessions, utc.total.cost) == (3, 3, pytest.approx(2.875))
        # Tokyo is 14 hours ahead of New York: the evening turn is already on 10 January there
        tokyo = await session_stats(store, project="prj", timezone="Asia/Tokyo")
        assert [(d.day, d.steps) for d in tokyo.days] == [("2026-01-10", 4)]

        # a range counts what was created inside it: the morning only, without the tools
        morning = await session_stats(store, start=MORNING - 60_000, end=MORNING + 60_000, project="prj",
                                      tools=False)
        assert (morning.created, morning.total.prompts, morning.total.steps, morning.tools) == (1, 2, 2, None)
        assert (await session_stats(store, start=1, end=2)).total.steps == 0


async def test_days_follow_a_daylight_saving_change(factory):
    # New York moved its clocks on 8 March 2026 at 02:00 local (07:00 UTC): 23:30 local is 03:30 UTC before, 04:30
    # UTC after
    before = ms("2026-03-07T23:30:00-05:00")
    after = ms("2026-03-08T23:30:00-04:00")

    def _seeded(tx: Any) -> None:
        for n, at in enumerate((before, after)):
            seed(tx, f"ses_{n}", at, [(at, [{"at": at + 1, "tokens": (1, 1, 0, 0, 0), "cost": 0.0}])])

    async with Store(factory.backend(), project=project) as store:
        await store.write(_seeded)
        stats = await session_stats(store, start=before - 3_600_000, end=after + 3_600_000,
                                    timezone="America/New_York")
        assert [(d.day, d.steps) for d in stats.days] == [("2026-03-07", 1), ("2026-03-08", 1)]


async def test_an_unknown_zone_and_an_empty_range_are_refused(factory):
    async with Store(factory.backend(), project=project) as store:
        with pytest.raises(InvalidRequestError) as refused:
            await session_stats(store, timezone="Mars/Olympus")
        assert refused.value.values.get("field") == "timezone"
        with pytest.raises(InvalidRequestError):
            await session_stats(store, start=10, end=10)
        await store.write(_scripted)
        widest = await session_stats(store, start=0, end=2**63 - 1, timezone="America/New_York")
        assert widest.total.steps == 5  # the zone's offsets are looked up until now, not until the range's end


def test_offsets_change_where_the_zone_changes():
    steps, last = shifts(NY, ms("2026-01-01T00:00:00+00:00"), ms("2026-12-31T00:00:00+00:00"))
    assert [(until, offset // 3_600_000) for until, offset in steps] == [
        (ms("2026-03-08T07:00:00+00:00"), -5), (ms("2026-11-01T06:00:00+00:00"), -4)]
    assert last // 3_600_000 == -5
