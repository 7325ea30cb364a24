"""Shared fixtures: the asyncio backend for anyio tests and an isolated environment per test."""

from __future__ import annotations

import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.server import isolated_env as server_env
from tests.support.server import start_server


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def isolated_env(tmp_path, monkeypatch):
    """Point every config/data lookup at a scratch home so no test reads the developer's files."""
    home = tmp_path / "home"
    (home / "config").mkdir(parents=True)
    (home / "data").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / "data"))
    for var in ("OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME", "OPENCODE_DISABLE_PROJECT_CONFIG",
                "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENCODE_CONFIG", "OCS_RESUME_BUDGET", "OCS_LEASE_TTL_MS"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="module")
def loop_provider():
    """One loopback Chat Completions server for a test module."""
    with fake.FakeOpenAI.running() as server:
        yield server


@pytest.fixture
def provider():
    """A loopback Chat Completions server for one test; answers still held at its end are let go first."""
    with fake.FakeOpenAI.running() as server:
        yield server
        server.release_held()


@pytest.fixture(params=["server", "embedded"])
async def secured(request, tmp_path):
    """A factory of clients, `secured(auth, headers=None)`, of an instance (a real `ocs serve`, or an Embedded host
    with its WebSocket connector) that requires the password 's3cret' of user 'alice'."""
    env = server_env(tmp_path, OPENCODE_SERVER_PASSWORD="s3cret", OPENCODE_SERVER_USERNAME="alice")
    if request.param == "server":
        srv = start_server(tmp_path, env=env)
        try:
            yield lambda auth, headers=None: OpenCodeClient(srv.url, auth=auth, headers=headers)
        finally:
            assert srv.stop() == 0, "".join(srv.stderr_lines)
    else:
        workdir = tmp_path / "work"
        workdir.mkdir()
        async with OpenCode(db=tmp_path / "db.sqlite", directory=workdir, env=env) as host:
            yield lambda auth, headers=None: OpenCodeClient("http://opencode.local", auth=auth, headers=headers,
                                                            transport=host.transport, websocket=host.websockets)
