"""Start-up loads what serving needs and nothing heavier: provider SDKs, their HTTP client, the terminal UI, the runner
with its tools and compaction, and the JSON Schema validator load when first used (a fast `ocs serve` start and a
small idle footprint depend on it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import cast

import anyio
import pytest

from opencode_session.core.runtime import Runtime
from opencode_session.core.wiring import DeferredDrain

LAZY = ("httpx2", "openai", "anthropic", "rich", "jsonschema", "opentelemetry.sdk", "prometheus_client",
        "opencode_session.core.execution.runner",
        "opencode_session.core.execution.step", "opencode_session.core.compaction.compactor",
        "opencode_session.core.tools.builtin", "opencode_session.core.tools.registry",
        "opencode_session.core.instructions.sources")


def test_serving_imports_leave_provider_sdks_rich_and_the_runner_unloaded() -> None:
    code = ("import json, sys\n"
            "from opencode_session.cli.main import main\n"
            "from opencode_session.cli import serving\n"
            "from opencode_session.server import app as server_app, serve\n"
            "from opencode_session.core import runtime\n"
            f"print(json.dumps(sorted(m for m in {LAZY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []



@pytest.mark.anyio
async def test_the_deferred_runner_loads_once_for_sessions_that_start_together() -> None:
    loads: list[object] = []
    ran: list[str] = []

    def load(runtime: object) -> Callable[[str, bool], Awaitable[None]]:
        loads.append(runtime)

        async def drain(session_id: str, _force: bool) -> None:
            ran.append(session_id)

        return drain

    drain = DeferredDrain(load)(cast(Runtime, "rt"))
    await asyncio.gather(*(drain(sid, False) for sid in ("a", "b", "c")))
    await drain("d", False)
    assert loads == ["rt"] and sorted(ran) == ["a", "b", "c", "d"]


@pytest.mark.anyio
async def test_a_warmed_runner_is_loaded_before_the_first_session_runs() -> None:
    loaded = threading.Event()
    loads: list[object] = []

    def load(runtime: object) -> Callable[[str, bool], Awaitable[None]]:
        loads.append(runtime)
        loaded.set()

        async def drain(session_id: str, _force: bool) -> None:
            return None

        return drain

    drains = DeferredDrain(load)
    drain = drains(cast(Runtime, "rt"))
    drains.warm()  # what `ocs serve` does once it is listening
    assert await anyio.to_thread.run_sync(loaded.wait, 10)  # loaded with no session run at all
    await drain("a", False)
    assert loads == ["rt"]


def test_a_provider_sdk_is_imported_off_the_event_loop_when_first_needed() -> None:
    # importing an SDK takes hundreds of milliseconds: on the loop's thread it would stall every request meanwhile
    code = ("import asyncio, json, sys, threading\n"
            "from opencode_session.core.llm.providers import load_adapter\n"
            "seen = {}\n"
            "class Watch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name in ('openai', 'anthropic'):\n"
            "            seen[name] = threading.current_thread() is threading.main_thread()\n"
            "        return None\n"
            "sys.meta_path.insert(0, Watch())\n"
            "async def main():\n"
            "    await load_adapter('chat')\n"
            "    await load_adapter('messages')\n"
            "    await load_adapter('chat')  # already loaded: nothing to do\n"
            "asyncio.run(main())\n"
            "print(json.dumps(seen))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == {"openai": False, "anthropic": False}


def test_sessions_starting_together_load_the_adapter_and_build_one_tls_context() -> None:
    # each TLS context costs ~0.1 s of CPU: fifty first Steps building their own stalled a fresh server under load
    code = ("import asyncio, json, httpx2\n"
            "from opencode_session.core.llm import providers\n"
            "built = []\n"
            "real = httpx2.create_ssl_context\n"
            "httpx2.create_ssl_context = lambda *a, **k: built.append(1) or real(*a, **k)\n"
            "async def main():\n"
            "    await asyncio.gather(*(providers.load_adapter('chat') for _ in range(20)))\n"
            "asyncio.run(main())\n"
            "print(json.dumps(len(built)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == 1
