"""Blocking work that is usually quick runs on the event loop while it stays quick, and in a worker thread once it is
slow, so a slow disk holds the loop up at most once before the work moves off it (and back once it is quick again)."""

from __future__ import annotations

import threading
import time

import pytest

from opencode_session.core.execution.offload import QuickOrThread

pytestmark = pytest.mark.anyio


def where(seconds: float = 0.0):
    def work() -> str:
        time.sleep(seconds)  # stands for a slow read (a network disk): the work under test, not a synchronisation
        return threading.current_thread().name

    return work


async def test_quick_work_runs_inline_and_slow_work_moves_to_a_thread_and_back():
    offload = QuickOrThread(limit_s=0.005)
    main = threading.main_thread().name
    assert await offload.run(where()) == main
    assert await offload.run(where(0.05)) == main  # only a run tells it that the work has become slow
    assert await offload.run(where()) != main  # so the next one leaves the loop
    threads = [await offload.run(where()) for _ in range(20)]  # quick again: back on the loop
    assert main in threads


async def test_an_error_reaches_the_caller_either_way():
    offload = QuickOrThread()

    def broken() -> None:
        raise ValueError("unreadable config")

    with pytest.raises(ValueError, match="unreadable config"):
        await offload.run(broken)
    offload.average_s = 1.0  # as if the disk had been slow
    with pytest.raises(ValueError, match="unreadable config"):
        await offload.run(broken)
