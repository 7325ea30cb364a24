"""How `ocs stats` (also `ocs sessions stats`) shows usage: the `--since` window, the time zone of its days, and the
tables of sessions, prompts, Steps, tokens and cost per model, day or agent, and of each tool's calls and failures."""

from __future__ import annotations

import os
import re
import zoneinfo
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema.stats import SessionStats, StatsUsage

_UNITS = {"m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 7 * 86_400_000}


def since_ms(text: str, now: int) -> int:
    """The start of a `--since` window like 30m, 12h, 7d or 2w, as epoch ms; ValueError for anything else."""
    match = re.fullmatch(r"([0-9]{1,6})([mhdw])", text.strip())
    if match is None:
        raise ValueError(f"--since takes a number and a unit (m, h, d, w), like 7d, not {text!r}")
    return now - int(match[1]) * _UNITS[match[2]]


def _money(cost: float) -> str:
    return f"${cost:,.4f}" if cost < 1 else f"${cost:,.2f}"


UNANSWERED = "(no step)"  # the row of prompts no Step answered (their execution failed before one)


def stats_table(stats: SessionStats, by: str) -> str:
    """Sessions, prompts, Steps, tokens and cost per model, day or agent, with the total; then the tools."""
    groups: list[tuple[str, StatsUsage]]
    if by == "day":
        groups, title = [(d.day, d) for d in stats.days], "day"
    elif by == "agent":
        groups, title = [(a.agent or UNANSWERED, a) for a in stats.agents], "agent"
    else:
        groups, title = [(f"{m.providerID}/{m.modelID}" if m.providerID or m.modelID else UNANSWERED, m)
                         for m in stats.models], "model"
    head = [title, "sessions", "prompts", "steps", "failed", "input", "output", "reasoning", "cache read",
            "cache write", "cost"]

    def cells(name: str, u: StatsUsage) -> list[str]:
        t = u.tokens
        return [name, *(f"{n:,}" for n in (u.sessions, u.prompts, u.steps, u.failed, t.input, t.output, t.reasoning,
                                           t.cache.read, t.cache.write)), _money(u.cost)]

    rows = [cells(name, u) for name, u in groups] + [cells("total", stats.total)]
    out = _table(head, rows, separate_last=True)
    if stats.tools:
        out += "\n\n" + _table(["tool", "calls", "failures", "failed %"],
                               [[t.tool, f"{t.calls:,}", f"{t.failures:,}",
                                 f"{100 * t.failures / t.calls:.1f}" if t.calls else "-"] for t in stats.tools])
    return out


def _table(head: list[str], rows: list[list[str]], separate_last: bool = False) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(cells, widths,
                                                                                               strict=True)))

    rule = "  ".join("-" * w for w in widths)
    body = [line(r) for r in rows]
    if separate_last and len(body) > 1:
        body.insert(len(body) - 1, rule)
    return "\n".join([line(head), rule, *body])


def _env_zone() -> str | None:
    """$TZ when it names an IANA zone this machine knows (not a POSIX rule like EST5EDT or :/etc/localtime)."""
    name = os.environ.get("TZ", "")
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        return None
    return name if "/" in name or name == "UTC" else None


def stats_zone(timezone: str | None) -> str | None:
    """The zone whose days the statistics count: --timezone, else $TZ when it names an IANA zone, else None (UTC)."""
    return timezone or _env_zone()


def print_stats(stats: SessionStats, since: str | None, by: str) -> None:
    window = f"since {since}" if since else "all time"
    print(f"Usage, {window} ({stats.range.timezone}): {stats.created:,} session{'s' if stats.created != 1 else ''}"
          " created")
    print(stats_table(stats, by))
