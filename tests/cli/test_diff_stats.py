"""`ocs sessions diff` (a unified diff of what a turn changed, coloured only on a terminal) and `ocs stats` /
`ocs sessions stats` (a table of sessions, tokens and cost), as a user runs them on the default database."""

from __future__ import annotations

import datetime as dt
import json
import sqlite3
import subprocess
from typing import Any

import pytest

from tests.support import fake_openai as fake
from tests.support.cli import Home

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(240)]


def call(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return fake.tool_call_deltas(index, call_id, name, json.dumps(arguments))


def _sid(home: Home) -> str:
    listed = home.run("sessions", "--limit", "1")
    assert listed.returncode == 0, listed.stderr
    return listed.stdout.splitlines()[1].split("\t")[0].strip()  # under the header


def _prompts(home: Home, sid: str) -> list[str]:
    conn = sqlite3.connect(home.db)
    try:
        rows = conn.execute("SELECT id FROM session_message WHERE session_id = ? AND type = 'user' ORDER BY seq",
                            (sid,)).fetchall()
    finally:
        conn.close()
    return [r[0] for r in rows]


def _edited(home: Home, provider) -> str:
    subprocess.run(["git", "init", "-q", str(home.work)], check=True)
    (home.work / "notes.txt").write_text("alpha\nbeta\n")
    provider.enqueue(fake.completion(
        call(0, "c1", "write", {"path": "new.txt", "content": "one\n"}),
        call(1, "c2", "edit", {"path": "notes.txt", "oldString": "beta", "newString": "BETA"}),
        call(2, "c3", "read", {"path": "missing.txt"}),
        finish_reason="tool_calls", usage=fake.usage_block(100, 30, cached_tokens=40, reasoning_tokens=10)),
        fake.completion(fake.text_deltas("edited"), usage=fake.usage_block(200, 10)))
    assert home.run("run", "edit the notes").returncode == 0
    sid = _sid(home)
    provider.enqueue(fake.completion(fake.text_deltas("just words")))
    assert home.run("run", "--session", sid, "say something").returncode == 0
    return sid


def test_sessions_diff_prints_a_plain_unified_diff_into_a_pipe(home, provider):
    sid = _edited(home, provider)
    first, _second = _prompts(home, sid)
    newest = home.run("sessions", "diff", sid)  # the newest turn changed nothing
    assert newest.returncode == 0 and newest.stdout == "" and "No files changed" in newest.stderr
    shown = home.run("sessions", "diff", sid, "--turn", first)
    assert shown.returncode == 0, shown.stderr
    assert "\033[" not in shown.stdout  # no colour into a pipe
    lines = shown.stdout.splitlines()
    assert ["--- /dev/null", "+++ b/new.txt", "@@ -0,0 +1 @@", "+one"] == lines[lines.index("--- /dev/null"):][:4]
    assert ["--- a/notes.txt", "+++ b/notes.txt", "@@ -1,2 +1,2 @@", " alpha", "-beta", "+BETA"] == \
        lines[lines.index("--- a/notes.txt"):][:6]
    assert "2 files changed, +2 -1" in shown.stderr
    missing = home.run("sessions", "diff", sid, "--turn", "msg_doesnotexist")
    assert missing.returncode == 1 and "MessageNotFoundError" in missing.stderr
    unknown = home.run("sessions", "diff", "ses_doesnotexist")
    assert unknown.returncode == 1 and "SessionNotFoundError" in unknown.stderr


def test_sessions_diff_is_coloured_on_a_terminal(home, provider):
    sid = _edited(home, provider)
    child = home.spawn("sessions", "diff", sid, "--turn", _prompts(home, sid)[0])
    child.expect_exact("\033[31m-beta\033[0m")
    child.expect_exact("\033[32m+BETA\033[0m")
    child.wait()


def test_stats_prints_sessions_tokens_and_cost_per_model_day_and_agent(home, provider):
    _edited(home, provider)
    by_model = home.run("stats")
    assert by_model.returncode == 0, by_model.stderr
    lines = by_model.stdout.splitlines()
    assert lines[0].startswith("Usage, all time (UTC): 1 session created")
    assert lines[1].split() == ["model", "sessions", "prompts", "steps", "failed", "input", "output", "reasoning",
                                "cache", "read", "cache", "write", "cost"]
    row = next(line for line in lines if line.startswith("loop/fake-model")).split()
    # 3 Steps: 60+200+the last turn's input, the provider's own count when no usage is scripted; the model's Steps
    # answered both prompts
    assert row[1:5] == ["1", "2", "3", "0"]
    total = next(line for line in lines if line.startswith("total")).split()
    assert total[1:5] == ["1", "2", "3", "0"] and total[7:9] == ["10", "40"]
    tools = {line.split()[0]: line.split()[1:3] for line in lines if line.split()[:1] in (["edit"], ["read"],
                                                                                          ["write"])}
    assert tools == {"edit": ["1", "0"], "read": ["1", "1"], "write": ["1", "0"]}

    today = dt.datetime.now(dt.UTC).date().isoformat()
    by_day = home.run("sessions", "stats", "--since", "7d", "--by", "day")
    assert by_day.returncode == 0, by_day.stderr
    assert "since 7d" in by_day.stdout and any(line.startswith(today) for line in by_day.stdout.splitlines())
    by_agent = home.run("stats", "--by", "agent", "--timezone", "Asia/Kathmandu")
    assert any(line.startswith("build") for line in by_agent.stdout.splitlines()), by_agent.stdout
    bad = home.run("stats", "--since", "a week")
    assert bad.returncode == 1 and "--since" in bad.stderr
    zone = home.run("stats", "--timezone", "Mars/Olympus")
    assert zone.returncode == 1 and "InvalidRequestError" in zone.stderr


def _rows(stdout: str, first: str) -> dict[str, list[str]]:
    """The rows after the header line that starts with `first` (rules left out, the total kept), by first cell."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(first))
    return {line.split()[0]: line.split()[1:] for line in lines[start + 2:] if line and not line.startswith("-")}


def test_stats_rows_per_model_and_per_agent_add_up_to_the_total(home, provider):
    # two runs with two models (one under the plan agent): each model's and agent's row counts its prompts
    provider.enqueue(fake.completion(fake.text_deltas("one")))
    assert home.run("run", "first").returncode == 0
    provider.enqueue(fake.completion(fake.text_deltas("two")))
    assert home.run("run", "--model", "loop/other-model", "--agent", "plan", "second").returncode == 0
    by_model = _rows(home.run("stats").stdout, "model")
    assert by_model["loop/fake-model"][:3] == ["1", "1", "1"]
    assert by_model["loop/other-model"][:3] == ["1", "1", "1"]
    assert by_model["total"][:3] == ["2", "2", "2"]
    by_agent = _rows(home.run("stats", "--by", "agent").stdout, "agent")
    assert by_agent["build"][:3] == ["1", "1", "1"] and by_agent["plan"][:3] == ["1", "1", "1"]
    assert by_agent["total"][:3] == ["2", "2", "2"]
