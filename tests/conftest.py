"""Shared fixtures: the asyncio backend for anyio tests and an isolated environment per test; which tests are
`slow` and the order the suite hands them to its workers."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.server import isolated_env as server_env
from tests.support.server import start_server

TESTS = Path(__file__).resolve().parent
# The suite's repositories are its own: every Location's project configuration has its authority, as for an embedder
# or CI that opts out of trust (docs/security.md), in this process and every `ocs` it starts. The tests of trust
# itself (tests/security/test_trust.py) run without it.
os.environ["OCS_TRUST_ALL"] = "1"
# Whole folders and modules whose tests start processes (`ocs`, several hosts, a browser, OpenCode's own clients, a
# fresh venv, servers killed and restarted), run a fuzzer for a minute or wait out timers: `python3 run.py test --fast`
# leaves them out.
SLOW = ("cli", "cluster", "ui", "api/test_opencode_run_attach.py", "api/test_opencode_tui.py",
        "api/test_opencode_v1_bus.py", "api/test_opencode_sdk_scope.py", "api/test_integrations.py",
        "api/test_session_management.py", "test_packaging.py", "test_schemathesis.py", "test_mcp.py",
        "test_mcp_lifetime.py", "test_continuation.py", "test_restart.py", "test_undo_restart.py", "test_startup.py",
        "test_subagents.py", "security/test_terminal_socket.py", "security/test_throttle.py",
        "test_readme.py", "security/test_connections.py", "security/test_child_secrets.py",
        "security/test_data_at_rest.py", "test_instance_stream_load.py")


def _in_slow(path: Path) -> bool:
    try:
        where = path.relative_to(TESTS).as_posix()
    except ValueError:
        return False
    return any(where == s or where.startswith(s + "/") for s in SLOW)


def _slow(item: pytest.Item) -> bool:
    return _in_slow(item.path) or item.get_closest_marker("slow") is not None


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """With `-m "not slow"` (`run.py test --fast`) the folders and modules of SLOW are not even imported: every test
    in them is slow, and importing them cost each worker seconds of its collection."""
    if config.getoption("markexpr", "") == "not slow" and _in_slow(collection_path):
        return True
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks the tests of SLOW `slow`, and hands the modules holding slow tests to the workers first (a stable sort:
    the order within a module is kept), so that the longest modules do not start last and leave one worker alone at
    the end."""
    slow_modules = set()
    for item in items:
        if _slow(item):
            item.add_marker(pytest.mark.slow)
            slow_modules.add(item.path)
    items.sort(key=lambda item: item.path not in slow_modules)


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
