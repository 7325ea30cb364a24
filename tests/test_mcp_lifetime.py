"""No MCP server outlives `ocs serve`: stopped with it on SIGTERM, and killed with it even on SIGKILL (the parent-death
signal), including a server that does not exit when its stdin ends."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import httpx2
import pytest

from tests.support.mcp_harness import alive, children, local, wait_until
from tests.support.server import isolated_env, start_server


def serve_with_servers(tmp_path: Path, **environment: str):
    marks = tmp_path / "marks"
    marks.mkdir()
    env = isolated_env(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({"mcp": {
        "one": local("one", MCP_TEST_MARKS=str(marks), **environment),
        "two": local("two", MCP_TEST_MARKS=str(marks), **environment)}}))
    srv = start_server(tmp_path, env=env, workdir=work)
    answer = httpx2.post(f"{srv.url}/api/mcp/connect", timeout=30).json()
    assert {name: s["status"] for name, s in answer["data"].items()} == {"one": "connected", "two": "connected"}
    pids = [int(p.read_text()) for p in marks.iterdir() if p.name.startswith("started-")]
    assert len(pids) == 2 and set(pids) <= set(children(srv.proc.pid))  # the servers are its own children
    return srv, pids


@pytest.mark.parametrize("linger", [False, True], ids=["exits-on-eof", "ignores-eof"])
def test_servers_die_with_a_server_killed_by_sigkill(tmp_path, linger):
    srv, pids = serve_with_servers(tmp_path, **({"MCP_TEST_LINGER": "1"} if linger else {}))
    srv.stop(signal.SIGKILL)
    wait_until(lambda: not any(alive(pid) for pid in pids), 10, "the MCP servers to die with ocs serve")


def test_servers_are_stopped_when_the_server_shuts_down(tmp_path):
    srv, pids = serve_with_servers(tmp_path)
    assert srv.stop(signal.SIGTERM) == 0, "".join(srv.stderr_lines)
    assert not any(alive(pid) for pid in pids)


def test_a_server_that_cannot_start_is_logged_and_reported(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "opencode.json").write_text(json.dumps({"mcp": {"gone": {"type": "local", "command": ["no-such-mcp"]}}}))
    srv = start_server(tmp_path, env=isolated_env(tmp_path), workdir=work)
    try:
        answer = httpx2.post(f"{srv.url}/api/mcp/connect", timeout=30).json()
        assert answer["data"] == {"gone": {"status": "failed", "error": "command not found: no-such-mcp"}}
        assert srv.wait_for_stderr("MCP server gone failed: command not found: no-such-mcp; restarting in 1 s", 10)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
