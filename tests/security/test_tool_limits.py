"""Item 4 of "Safe by default", for tools: a pathological glob pattern cannot stall the server (its matching never
backtracks, and walks run in a worker thread with bounds), and `read` holds at most a bounded piece of any line."""

from __future__ import annotations

import time

import anyio
import pytest

from tests.security.conftest import TIMEOUT, one_tool_call, peak_rss_mb, run_prompt, settled

pytestmark = pytest.mark.anyio

HUGE_LINE_MB = 300


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("tool-limits")
    work = root / "work"
    work.mkdir()
    for n in range(20):
        (work / ("a" * 60 + str(n))).write_text("x")
    with open(work / "one-line.txt", "wb") as huge:  # no newline anywhere
        block = b"a" * (1024 * 1024)
        for _ in range(HUGE_LINE_MB):
            huge.write(block)
    return root


@pytest.mark.timeout(120)
async def test_a_backtracking_glob_pattern_finishes_and_the_server_stays_responsive(client, provider):
    # Against 60-character names this pattern took minutes with the GIL held: every request timed out.
    pattern = "*" * 31 + "x"
    provider.enqueue(*one_tool_call("glob", {"pattern": pattern}))
    sid = (await client.session.create()).id
    started = time.monotonic()
    await client.session.prompt(sid, prompt={"text": "find"})
    with anyio.fail_after(5):
        assert (await client.health.get()).healthy
    with anyio.fail_after(TIMEOUT):
        await client.session.wait(sid)
    assert time.monotonic() - started < TIMEOUT
    log = [e async for e in client.session.log(sid, follow=False) if e.type != "log.synced"]
    assert settled(log).type == "session.tool.success"
    assert "No files found" in provider.requests[1].json["messages"][-1]["content"]


@pytest.mark.parametrize("pattern", ["{a,b}" * 12, "*{a,b}" * 8 + "c", "**/" * 40 + "*a" * 20 + "x"])
async def test_other_pathological_patterns_are_bounded(client, provider, pattern):
    provider.requests.clear()
    with anyio.fail_after(TIMEOUT):
        _, log = await run_prompt(client, provider, *one_tool_call("glob", {"pattern": pattern}))
    result = settled(log)
    # an over-large brace expansion is refused as a pattern; the others simply match nothing
    assert result.type == "session.tool.success" or "Invalid glob pattern" in result.data.error.message


@pytest.mark.timeout(180)
async def test_read_bounds_memory_per_line(client, provider, ocs):
    with anyio.fail_after(120):
        _, log = await run_prompt(client, provider, *one_tool_call("read", {"path": "one-line.txt"}),
                                  timeout=120)
    result = settled(log)
    assert result.type == "session.tool.success"
    text = provider.requests[1].json["messages"][-1]["content"]
    assert "line truncated to 2000 characters" in text and "End of file: 1 lines" in text
    # The file is 300 MiB; the server held no more than a sliver of it at once.
    assert peak_rss_mb(ocs.proc.pid) < 200, peak_rss_mb(ocs.proc.pid)
