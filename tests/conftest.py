"""Shared fixtures: the asyncio backend for anyio tests and an isolated environment per test."""

from __future__ import annotations

import pytest

from tests.support import fake_openai as fake


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
                "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENCODE_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(scope="module")
def loop_provider():
    """One loopback Chat Completions server for a test module."""
    with fake.FakeOpenAI.running() as server:
        yield server
