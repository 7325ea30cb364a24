"""Start-up loads what serving needs and nothing heavier: provider SDKs, their HTTP client, the terminal UI, the runner
with its tools and compaction, the JSON Schema validator, MCP, PostgreSQL, file snapshots, fuzzy finding, ignore files,
the shell parser, telemetry and the inspector's templates load when first used (a fast `ocs serve` start and a small
idle footprint depend on it)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import anyio
import pytest

from opencode_session.client import OpenCodeClient
from opencode_session.core.runtime import Runtime
from opencode_session.core.wiring import DeferredDrain
from tests.support import fake_openai as fake
from tests.support.server import configured_home, start_server

LAZY = ("httpx2", "openai", "anthropic", "rich", "jsonschema", "opentelemetry.sdk", "prometheus_client",
        "opencode_session.core.execution.runner",
        "opencode_session.core.execution.step", "opencode_session.core.compaction.compactor",
        "opencode_session.core.tools.builtin", "opencode_session.core.tools.registry",
        "opencode_session.core.instructions.sources")
# what a feature needs: none of it loads for a server on SQLite with no MCP, telemetry or metrics scrape configured,
# neither at start nor once the runner has loaded in the background
FEATURES = ("mcp", "psycopg", "psycopg_pool", "jsonschema", "rapidfuzz", "pathspec", "tree_sitter", "tree_sitter_bash",
            "html2text", "opentelemetry", "prometheus_client", "opencode_session.core.store.postgres",
            "jinja2", "markdown_it", "pygments")  # the last three: the inspector's, with the first page served
# ours, not loaded at start: until the runner loads (or a revert, or an MCP request, asks for them), or until the
# first request that uses them (a shell command, a terminal, an integration, a find, an export or import, stats, the
# references, a generate)
DEFERRED = ("opencode_session.core.mcp", "opencode_session.core.snapshot", "opencode_session.core.pty",
            "opencode_session.core.integrations", "opencode_session.core.session.shell",
            "opencode_session.core.fs.finder", "opencode_session.core.session.transcript",
            "opencode_session.core.session.stats", "opencode_session.core.references",
            "opencode_session.core.execution.generate", "opencode_session.core.plugins")


def test_serving_imports_leave_provider_sdks_rich_and_the_runner_unloaded() -> None:
    code = ("import json, sys\n"
            "from opencode_session.cli.main import main\n"
            "from opencode_session.cli import serving\n"
            "from opencode_session.server import app as server_app, serve\n"
            "from opencode_session.core import runtime\n"
            f"print(json.dumps(sorted(m for m in {LAZY!r} if m in sys.modules)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == []


def test_a_server_on_sqlite_without_mcp_loads_no_feature_at_start_or_once_the_runner_loaded(tmp_path) -> None:
    # the server built as `ocs serve` builds it (a deferred runner, the app), then the runner's background load
    code = textwrap.dedent(f"""
        import asyncio, json, sys
        from pathlib import Path
        from opencode_session.core.runtime import Runtime, RuntimeOptions
        from opencode_session.core.wiring import DeferredDrain
        from opencode_session.server.app import create_app

        def loaded(names):
            return sorted(m for m in names if m in sys.modules)

        async def main():
            drains = DeferredDrain()
            root = Path({str(tmp_path)!r})
            options = RuntimeOptions(db_path=root / "db.sqlite", directory=root, drain_factory=drains)
            async with Runtime(options) as runtime:
                create_app(runtime)
                started = loaded({FEATURES + DEFERRED!r})
                await drains.warm()
                warmed = loaded({FEATURES!r})
                runner = "opencode_session.core.execution.runner" in sys.modules
            print(json.dumps([started, warmed, runner]))

        asyncio.run(main())
        """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout) == [[], [], True]


def watching_ocs(root: Path, watched: tuple[str, ...]) -> tuple[Path, Path]:
    """A script that runs `ocs` with its arguments and, as the process exits, writes to the report file which of
    `watched` it ever imported and whether the cyclic collector (off while the command started) is on again."""
    report = root / "modules.json"
    wrapper = root / "ocs_watched.py"
    wrapper.write_text(textwrap.dedent(f"""
        import atexit, gc, json, sys
        atexit.register(lambda: open({str(report)!r}, "w").write(
            json.dumps([sorted(m for m in {watched!r} if m in sys.modules), gc.isenabled()])))
        from opencode_session.cli.main import main
        sys.argv[0] = "ocs"
        main()
        """))
    return wrapper, report


def test_ocs_serve_on_sqlite_without_mcp_answers_a_prompt_without_loading_mcp_postgres_or_telemetry(
        tmp_path, provider) -> None:
    # the real `ocs serve`, watched
    watched = FEATURES + DEFERRED + ("opencode_session.core.execution.runner",)
    wrapper, report = watching_ocs(tmp_path, watched)
    provider.enqueue(fake.completion(fake.text_deltas("nothing to change")))
    env = configured_home(tmp_path, provider)
    server = start_server(tmp_path, env=env, program=(sys.executable, str(wrapper), "serve"))
    try:
        async def prompt() -> None:
            async with OpenCodeClient(server.url) as client:
                session = await client.session.create()
                await client.session.prompt(session.id, prompt={"text": "anything to do?"})
                with anyio.fail_after(30):
                    await client.session.wait(session.id)
                messages = [e.type async for e in client.session.log(session.id, follow=False)]
                assert "session.execution.succeeded" in messages

        anyio.run(prompt)
    finally:
        assert server.stop() == 0
    loaded, collecting = json.loads(report.read_text())
    assert collecting
    # the runner ran a Step; it offered the built-in tools (whose schemas their arguments models made: not checked
    # again) and the model called none, so the validator did not load; nothing else asked for a feature
    assert "opencode_session.core.execution.runner" in loaded and "jsonschema" not in loaded
    never = {"mcp", "psycopg", "psycopg_pool", "opentelemetry", "prometheus_client", "rapidfuzz", "tree_sitter",
             "html2text", "opencode_session.core.store.postgres", "jinja2", "markdown_it", "pygments"}
    assert never.isdisjoint(loaded), sorted(never & set(loaded))


def test_ocs_run_answers_loading_only_the_sdk_of_its_protocol_and_collects_garbage_again_once_started(
        tmp_path, provider) -> None:
    # the real `ocs run` through its embedded host, watched
    watched = ("openai", "anthropic", "rich", "jsonschema", "jinja2", "markdown_it", "pygments", "websockets",
               "mcp", "opentelemetry", "prometheus_client", "opencode_session.core.store.postgres")
    wrapper, report = watching_ocs(tmp_path, watched)
    provider.enqueue(fake.completion(fake.text_deltas("nothing to change")))
    env = configured_home(tmp_path, provider)
    (tmp_path / "work").mkdir()
    done = subprocess.run([sys.executable, str(wrapper), "run", "--db", str(tmp_path / "db.sqlite"), "anything?"],
                          cwd=tmp_path / "work", env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert "nothing to change" in done.stdout
    loaded, collecting = json.loads(report.read_text())
    # Chat Completions: the openai SDK alone; no prompt was shown, no tool called, no page served, no terminal opened
    assert loaded == ["openai"] and collecting


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
