"""Terminals as a front end uses them, over `ocs serve` (a real WebSocket on loopback) and the Embedded host (the same
app in memory): type, read back, resize, exit, reconnect from the buffer, and every process killed on removal."""

from __future__ import annotations

import os
import re
import select
import shutil

import anyio
import pytest

from opencode_session.client import ForbiddenError, InvalidRequestError, OpenCodeClient
from opencode_session.client.websocket import WebSocketSession
from opencode_session.protocol.pty_wire import decode_meta, resize_frame
from opencode_session.schema.errors import PtyNotFoundError
from opencode_session.sdk import OpenCode
from tests.api.conftest import raw_http

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash on PATH")]

BASH = {"command": "bash", "args": ["--norc", "--noprofile", "-i"]}


async def read_until(ws: WebSocketSession, pattern: str, seen: list[str] | None = None, limit: float = 15) -> str:
    """Output text until `pattern` (a regex) appears in it; control frames are skipped."""
    text = "".join(seen or [])
    with anyio.fail_after(limit):
        while not re.search(pattern, text):
            frame = await ws.receive()
            assert frame is not None, f"closed before {pattern!r}: {text!r}"
            if isinstance(frame, str):
                text += frame
    return text


async def replay_and_cursor(ws: WebSocketSession) -> tuple[str, int]:
    """The text sent before the cursor frame, and the cursor."""
    replay = ""
    with anyio.fail_after(15):
        while True:
            frame = await ws.receive()
            assert frame is not None
            if isinstance(frame, bytes):
                cursor = decode_meta(frame)
                assert cursor is not None
                return replay, cursor
            replay += frame


async def read_to_end(ws: WebSocketSession) -> str:
    text = ""
    with anyio.fail_after(15):
        async for frame in ws:
            if isinstance(frame, str):
                text += frame
    return text


def gone_within(fd: int, limit: float = 10) -> bool:
    """Whether the process behind a pidfd ends within `limit` seconds (the pidfd turns readable when it does)."""
    return bool(select.select([fd], [], [], limit)[0])


def pidfd(pid: int) -> int:
    return os.pidfd_open(pid)


needs_pidfd = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="watching another process needs pidfd_open")


async def test_type_read_back_resize_and_exit(api):
    created = await api.pty.create(**BASH, title="shell")
    info = created.data
    assert info.status == "running" and info.pid > 0 and info.title == "shell" and info.command == "bash"
    assert info.id in [p.id for p in (await api.pty.list()).data]
    async with api.pty.connect(info.id) as ws:
        await ws.send("echo hi\r")
        await read_until(ws, r"[\r\n]hi\r\n")  # the echo line, then its output line
        await ws.send(resize_frame(40, 100))
        await ws.send("stty size\r")
        await read_until(ws, r"40 100")
        await ws.send("exit 3\r")
        await read_to_end(ws)
        assert ws.close_code == 1000
    exited = (await api.pty.get(info.id)).data  # the connection closes once the exit is recorded
    assert exited.status == "exited" and exited.exitCode == 3
    renamed = await api.pty.update(info.id, title="done", size={"rows": 10, "cols": 20})
    assert renamed.data.title == "done"


async def test_a_reconnecting_client_gets_the_recent_output(api):
    info = (await api.pty.create(command="sh", args=["-c", "echo ready-1; exec cat"])).data
    async with api.pty.connect(info.id) as ws:
        await read_until(ws, "ready-1")
    async with api.pty.connect(info.id) as again:
        replay, cursor = await replay_and_cursor(again)
        assert "ready-1" in replay and cursor >= len("ready-1")
        await again.send("typed-2\r")
        await read_until(again, "typed-2")
    async with api.pty.connect(info.id, cursor=-1) as tail:
        replay, later = await replay_and_cursor(tail)
        assert replay == "" and later > cursor
    async with api.pty.connect(info.id, cursor=cursor) as resumed:
        replay, _ = await replay_and_cursor(resumed)
        assert "ready-1" not in replay and "typed-2" in replay
    await api.pty.remove(info.id)


@needs_pidfd
async def test_remove_kills_every_process_the_terminal_started(api):
    info = (await api.pty.create(**BASH)).data
    async with api.pty.connect(info.id) as ws:
        await ws.send("nohup sleep 300 >/dev/null 2>&1 &\r")  # deaf to the hangup that closing the terminal sends
        await ws.send("echo bg=$!\r")
        text = await read_until(ws, r"bg=(\d+)\r\n")
    background = int(re.search(r"bg=(\d+)\r\n", text).group(1))
    shell_fd, job_fd = pidfd(info.pid), pidfd(background)  # the job runs in a process group of its own
    try:
        await api.pty.remove(info.id)
        assert gone_within(shell_fd) and gone_within(job_fd)
    finally:
        os.close(shell_fd)
        os.close(job_fd)
    with pytest.raises(PtyNotFoundError):
        await api.pty.get(info.id)
    with pytest.raises(PtyNotFoundError):
        await api.pty.remove(info.id)
    assert info.id not in [p.id for p in (await api.pty.list()).data]


async def test_refusals_and_bad_input(api, tmp_path):
    with pytest.raises(InvalidRequestError) as missing:
        await api.pty.create(command="no-such-command-ocs")
    assert missing.value.field == "command"
    with pytest.raises(InvalidRequestError) as nowhere:
        await api.pty.create(cwd="no-such-directory")
    assert nowhere.value.field == "cwd"
    with pytest.raises(ForbiddenError):  # outside the Location, and no rule allows it
        await api.pty.create(cwd=str(tmp_path))
    with pytest.raises(InvalidRequestError):
        await api.pty.create(env={"A=B": "x"})
    with pytest.raises(InvalidRequestError):
        await api.pty.create(args=["nul\x00byte"])
    for call in (api.pty.get, api.pty.remove, api.pty.connect_token):
        with pytest.raises(PtyNotFoundError):
            await call("pty_unknown")
    with pytest.raises(InvalidRequestError):
        await api.pty.get("not-a-pty")
    with pytest.raises(PtyNotFoundError):
        async with api.pty.connect("pty_unknown"):
            pass
    info = (await api.pty.create(command="sh", args=["-c", "exec cat"])).data
    with pytest.raises(InvalidRequestError):
        await api.pty.update(info.id, size={"rows": 0, "cols": 80})
    async with raw_http(api) as http:
        for path, method, body in (("/api/pty", "POST", {"args": "not-a-list"}), ("/api/pty", "POST", {"env": None}),
                                   (f"/api/pty/{info.id}", "PUT", {"size": None}),
                                   (f"/api/pty/{info.id}", "PUT", {"size": {"rows": 24, "cols": 80.5}})):
            bad = await http.request(method, path, json=body)
            assert bad.status_code == 400 and bad.json()["_tag"] == "InvalidRequestError", (body, bad.text)
    async with raw_http(api) as http:  # the WebSocket route answers a plain request with a typed refusal
        plain = await http.get(f"/api/pty/{info.id}/connect")
        assert plain.status_code == 400 and plain.json()["_tag"] == "InvalidRequestError"
        unknown = await http.get("/api/pty/pty_unknown/connect")
        assert unknown.status_code == 404 and unknown.json()["_tag"] == "PtyNotFoundError"
    await api.pty.remove(info.id)


async def test_terminals_belong_to_their_location(api, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    info = (await api.pty.create(command="sh", args=["-c", "exec cat"])).data
    elsewhere = await api.pty.list(location={"directory": str(other)})
    assert info.id not in [p.id for p in elsewhere.data]
    with pytest.raises(PtyNotFoundError):
        await api.pty.get(info.id, location={"directory": str(other)})
    await api.pty.remove(info.id)


# --- embedded-only --------------------------------------------------------------------------------------------


async def test_pty_environment_merges_caller_then_host_then_forced(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    env = {**os.environ, "A": "runtime", "B": "runtime", "C": "runtime", "TERM": "dumb"}

    def overlay(location, cwd):
        return {"B": "host", "C": "host", "TERM": "vt100", "SEEN": f"{location.directory}|{cwd}"}

    async with OpenCode(directory=work, env=env, pty_environment=overlay) as oc:
        (work / "sub").mkdir()
        info = (await oc.pty.create(command="sh", args=["-c", 'echo "[$A $B $C $TERM $OPENCODE_TERMINAL $SEEN]"'],
                                    cwd="sub", env={"A": "caller", "B": "caller"})).data
        async with oc.pty.connect(info.id) as ws:
            text = await read_to_end(ws)
    resolved = work.resolve()
    assert f"[caller host host xterm-256color 1 {resolved}|{resolved / 'sub'}]" in text


@needs_pidfd
async def test_closing_the_embedded_host_kills_its_terminals(tmp_path):
    async with OpenCode(directory=tmp_path) as oc:
        info = (await oc.pty.create(command="sh", args=["-c", "exec sleep 300"])).data
        fd = pidfd(info.pid)
    try:
        assert gone_within(fd)
    finally:
        os.close(fd)


@needs_pidfd
async def test_the_last_session_of_a_location_going_releases_its_terminals(tmp_path):
    busy, idle = tmp_path / "busy", tmp_path / "idle"
    busy.mkdir()
    idle.mkdir()
    async with OpenCode(directory=tmp_path) as oc:
        await oc.session.create(location={"directory": str(busy)})
        kept = (await oc.pty.create(command="sh", args=["-c", "exec sleep 300"],
                                    location={"directory": str(busy)})).data
        released = (await oc.pty.create(command="sh", args=["-c", "exec sleep 300"],
                                        location={"directory": str(idle)})).data
        fd = pidfd(released.pid)
        try:
            await oc.runtime.session_deleted(busy)  # another session still works there
            await oc.runtime.session_deleted(idle)
            assert gone_within(fd)
        finally:
            os.close(fd)
        assert (await oc.pty.get(kept.id, location={"directory": str(busy)})).data.status == "running"
        with pytest.raises(PtyNotFoundError):
            await oc.pty.get(released.id, location={"directory": str(idle)})


async def test_a_client_of_the_same_host_connects_through_its_websocket_connector(tmp_path):
    async with OpenCode(directory=tmp_path) as oc:
        info = (await oc.pty.create(command="sh", args=["-c", "echo from-host; exec cat"])).data
        async with OpenCodeClient("http://opencode.local", transport=oc.transport, websocket=oc.websockets) as other:
            async with other.pty.connect(info.id) as ws:
                await read_until(ws, "from-host")
