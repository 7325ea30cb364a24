"""Fixtures for driving `ocs`: the module's loopback provider, checked for unused scripts, and a configured home."""

from __future__ import annotations

import pytest

from tests.support.cli import make_home


@pytest.fixture
def provider(loop_provider):
    loop_provider.requests.clear()
    yield loop_provider
    assert loop_provider.pending == 0, "a scripted provider response was never requested"


@pytest.fixture
def home(tmp_path, provider):
    """An isolated user whose global opencode.json makes the loopback provider the default model."""
    h = make_home(tmp_path)
    h.configure(provider)
    return h
