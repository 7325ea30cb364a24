"""The usage page (`/ui/usage`): cost and tokens over the last day, week or month, per hour or day as a chart drawn
on the server (inline SVG), per model, per agent, and each tool's calls and failures, in every project or one
Location's. It reads the statistics the stats API serves (core/session/stats.py)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.runtime import Runtime
from ...core.store import now_ms
from ...schema.errors import InvalidRequestError, TaggedError
from ...schema.stats import SessionStats, StatsUsage
from ..state import runtime_of
from . import login
from .pages import html, render

HOUR_MS = 3_600_000
RANGES = {"day": 24 * HOUR_MS, "week": 7 * 24 * HOUR_MS, "month": 30 * 24 * HOUR_MS}  # the page's choices
PROJECTS_LISTED = 500  # sessions read to name the Locations the filter offers
CHART_W, CHART_H = 600, 160  # the chart's drawing units (it scales to the page's width)


@dataclass
class Bucket:
    """One bar of the chart: an hour (the last day) or a local day, and what its Steps used."""

    label: str
    tokens_in: int
    tokens_out: int
    cost: float
    steps: int


def _tokens(u: StatsUsage) -> tuple[int, int]:
    t = u.tokens
    return int(t.input + t.cache.read + t.cache.write), int(t.output + t.reasoning)


async def _hours(runtime: Runtime, start: int, end: int, project: str | None) -> list[Bucket]:
    """The last day hour by hour, in UTC hours (each a range the stats count on their own)."""
    from ...core.session import stats
    first = start - start % HOUR_MS
    found = []
    for at in range(first, end, HOUR_MS):
        part = await stats.session_stats(runtime.store, start=max(at, start), end=min(at + HOUR_MS, end),
                                         project=project, tools=False)
        tin, tout = _tokens(part.total)
        found.append(Bucket(dt.datetime.fromtimestamp(at / 1000, dt.UTC).strftime("%H:00"), tin, tout,
                            part.total.cost, part.total.steps))
    return found


def _days(found: SessionStats, start: int, end: int) -> list[Bucket]:
    """Each day of the range (those without activity too), as the stats count them."""
    from ...core.session import stats
    by_day = {d.day: d for d in found.days}
    tz = stats.zone(found.range.timezone)
    day = dt.datetime.fromtimestamp(start / 1000, tz).date()
    last = dt.datetime.fromtimestamp((end - 1) / 1000, tz).date()
    out = []
    while day <= last:
        d = by_day.get(day.isoformat())
        tin, tout = _tokens(d) if d else (0, 0)
        out.append(Bucket(day.strftime("%b %d"), tin, tout, d.cost if d else 0.0, d.steps if d else 0))
        day += dt.timedelta(days=1)
    return out


def chart(buckets: list[Bucket]) -> dict[str, Any]:
    """The bars to draw: per bucket its tokens in and out stacked (SVG units), with the scale's top."""
    top = max([b.tokens_in + b.tokens_out for b in buckets] + [1])
    width = CHART_W / max(1, len(buckets))
    bars = []
    for n, b in enumerate(buckets):
        h_in = CHART_H * b.tokens_in / top
        h_out = CHART_H * b.tokens_out / top
        bars.append({"x": round(n * width + width * 0.1, 2), "w": round(width * 0.8, 2), "in": round(h_in, 2),
                     "out": round(h_out, 2), "y_in": round(CHART_H - h_in, 2),
                     "y_out": round(CHART_H - h_in - h_out, 2), "bucket": b})
    return {"bars": bars, "top": top, "width": CHART_W, "height": CHART_H,
            "cost_top": max([b.cost for b in buckets] + [0.0])}


async def locations(runtime: Runtime) -> list[dict[str, str]]:
    """The projects sessions were made in, each named by its Locations' directories."""
    found, _ = await runtime.sessions.list(limit=PROJECTS_LISTED)
    dirs: dict[str, set[str]] = {}
    for s in found:
        dirs.setdefault(s.projectID, set()).add(s.location.directory)
    return sorted(({"id": p, "name": ", ".join(sorted(d))} for p, d in dirs.items()), key=lambda x: x["name"])


async def usage_page(request: Request) -> Response:
    """`/ui/usage?range=day|week|month&project=ID&timezone=Zone`: the usage page."""
    from ...core.session import stats  # imported by the first look, as the stats API does

    runtime = runtime_of(request)
    q = request.query_params
    chosen, project, timezone = q.get("range") or "week", q.get("project") or None, q.get("timezone") or None
    values: dict[str, Any] = {"range": chosen, "ranges": list(RANGES), "project": project or "",
                              "timezone": timezone or "UTC", "signed_in": login.COOKIE in request.cookies,
                              "locations": await locations(runtime), "stats": None, "chart": None,
                              "problem": None}
    try:
        if chosen not in RANGES:
            raise InvalidRequestError(f"Unknown range {chosen!r} (day, week or month)", kind="query",
                                      field="range")
        end = now_ms() + 1
        start = end - RANGES[chosen]
        found = await stats.session_stats(runtime.store, start=start, end=end, project=project,
                                          timezone=timezone)
        buckets = await _hours(runtime, start, end, project) if chosen == "day" else _days(found, start, end)
    except TaggedError as err:
        values["problem"] = f"{type(err).__name__}: {err.message}"
        return html(render("usage.html", **values), status=err.status)
    tools = sorted(found.tools or [], key=lambda t: (-t.failures, -t.calls, t.tool))
    values.update(stats=found.model_dump(mode="json", by_alias=True), chart=chart(buckets),
                  tools=[t.model_dump(mode="json") for t in tools],
                  models=sorted(found.models, key=lambda m: -m.cost), agents=sorted(found.agents,
                                                                                 key=lambda a: -a.cost))
    return html(render("usage.html", **values))
