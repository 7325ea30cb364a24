"""Who owns the runtime's background tasks: a chore that crashes is logged once, by the scope that owns it, and
neither stops its siblings nor the runtime's close."""

from __future__ import annotations

import logging
from pathlib import Path

import anyio
import pytest

from opencode_session.core.runtime import Runtime, RuntimeOptions

pytestmark = pytest.mark.anyio


async def test_a_crashing_chore_is_logged_once_by_the_runtime_and_its_sibling_still_finishes(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    finished = anyio.Event()

    async def crash() -> None:
        raise RuntimeError("the title model went away")

    async def sibling() -> None:
        await anyio.sleep(0)
        finished.set()

    caplog.set_level(logging.WARNING)
    async with Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path, env={})) as runtime:
        runtime.spawn(crash())
        runtime.spawn(sibling())
        with anyio.fail_after(10):
            await runtime.settle_background(10)
            await finished.wait()
    crashes = [r for r in caplog.records if r.exc_info and "the title model went away" in str(r.exc_info[1])]
    assert len(crashes) == 1, [r.getMessage() for r in caplog.records]
    assert crashes[0].name == "opencode_session.core.cancellation"
    assert crashes[0].getMessage().startswith("runtime:")  # named by its owner


async def test_closing_the_runtime_ends_its_chores_and_starts_none_after(tmp_path: Path) -> None:
    started = anyio.Event()
    ended: list[str] = []

    async def forever() -> None:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            ended.append("forever")

    async def late() -> None:
        ended.append("late")  # never runs: the runtime had closed

    runtime = Runtime(RuntimeOptions(db_path=tmp_path / "db.sqlite", directory=tmp_path, env={}))
    async with runtime:
        runtime.spawn(forever())
        with anyio.fail_after(10):
            await started.wait()
    assert ended == ["forever"]
    runtime.spawn(late())
    assert ended == ["forever"]
