"""Helpers for the security suite: every test here drives a real `ocs serve` subprocess the way an attacker on the
same machine, or a web page in the user's browser, would."""

from __future__ import annotations

import json
import resource
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import requests

from opencode_session.client import OpenCodeClient
from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, isolated_env, start_server

TIMEOUT = 30  # seconds for one HTTP exchange; the machine may be busy


@pytest.fixture(scope="module")
def provider() -> Iterator[fake.FakeOpenAI]:
    server = fake.FakeOpenAI()
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def ocs(root, provider):
    """`ocs serve` on the module's `root`, using the loopback provider, its memory capped."""
    srv = serve(root, provider=provider, memory_mb=1536)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


@pytest.fixture
async def client(ocs, root, provider):
    """A client of the module's `ocs` server, whose config starts every test from the default permission rules."""
    write_provider_config(root, provider)
    provider.requests.clear()
    async with OpenCodeClient(ocs.url) as c:
        yield c
    assert provider.pending == 0, "a scripted provider response was never requested"


@pytest.fixture
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        session.trust_env = False  # loopback only: no proxy from the environment
        yield session


def _memory_limit(megabytes: int) -> Callable[[], None]:
    def apply() -> None:
        limit = megabytes * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return apply


def write_provider_config(root: Path, provider: fake.FakeOpenAI, **extra: Any) -> None:
    """A global opencode.json pointing the default model at the loopback Chat Completions server."""
    config = {
        "model": "loop/fake-model",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                              "options": {"baseURL": provider.base_url, "apiKey": "test-key"},
                              "models": {"fake-model": {}}}},
        **extra,
    }
    folder = root / "config" / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps(config))


def serve(root: Path, *args: str, provider: fake.FakeOpenAI | None = None, memory_mb: int | None = None,
          preexec_fn: Callable[[], None] | None = None, **env: str) -> ServerProcess:
    """`ocs serve` under `root` (Location `root/work`), optionally configured for the loopback provider. With
    `memory_mb` its address space is capped, so a server that buffers without bound fails loudly instead of taking
    the machine's memory (few malloc arenas: each would reserve 64 MiB of the cap)."""
    if memory_mb is not None:
        preexec_fn = _memory_limit(memory_mb)
        env = {"MALLOC_ARENA_MAX": "2", **env}
    environment = isolated_env(root, **env)
    if provider is not None:
        write_provider_config(root, provider)
    return start_server(root, env=environment, args=args, preexec_fn=preexec_fn)


async def run_prompt(client, provider: fake.FakeOpenAI, *scripts: fake.Script, timeout: float = 60,
                     agent: str | None = None) -> tuple[str, list]:
    """Prompt a new session (of `agent`, else the default one) with the provider scripted, wait for it to settle; its
    id and durable log."""
    provider.enqueue(*scripts)
    sid = (await client.session.create(agent=agent)).id
    await client.session.prompt(sid, prompt={"text": "go"})
    with anyio.fail_after(timeout):
        await client.session.wait(sid)
    return sid, await _durable_log(client, sid)


async def run_refused_prompt(client, provider: fake.FakeOpenAI, *scripts: fake.Script, feedback: str | None = None,
                             timeout: float = 60, agent: str | None = None) -> tuple[dict[str, Any], list]:
    """Like `run_prompt` for a turn that asks the user once: they reject that request (with `feedback`, which the
    model reads, if given). The request asked and the session's durable log."""
    provider.enqueue(*scripts)
    events = client.event.subscribe()
    try:
        with anyio.fail_after(timeout):
            async for event in events:
                if event.type == "server.connected":
                    sid = (await client.session.create(agent=agent)).id
                    await client.session.prompt(sid, prompt={"text": "go"})
                elif event.type == "permission.v2.asked":
                    asked = dict(event.data)
                    await client.session.permission_reply(sid, asked["id"], reply="reject", message=feedback)
                    await client.session.wait(sid)
                    break
    finally:
        await events.aclose()
    return asked, await _durable_log(client, sid)


async def _durable_log(client, sid: str) -> list:
    # the background title lands any time: it is not part of what these tests check
    return [e async for e in client.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]


def one_tool_call(name: str, arguments: dict[str, Any]) -> list[fake.Script]:
    """The model calls one tool, then answers "done" once it has the result."""
    call = fake.tool_call_deltas(0, "call_1", name, json.dumps(arguments))
    return [fake.completion(call, finish_reason="tool_calls"), fake.completion(fake.text_deltas("done"))]


def steps_of_calls(*calls: tuple[str, dict[str, Any]]) -> list[fake.Script]:
    """The model makes each call in its own Step, then answers "done"."""
    steps = [fake.completion(fake.tool_call_deltas(0, f"call_{i}", name, json.dumps(arguments)),
                             finish_reason="tool_calls") for i, (name, arguments) in enumerate(calls)]
    return [*steps, fake.completion(fake.text_deltas("done"))]


def settled(log: list) -> Any:
    """The one tool settlement (`session.tool.success` or `session.tool.failed`) in a log."""
    events = [e for e in log if e.type in ("session.tool.success", "session.tool.failed")]
    assert len(events) == 1, [e.type for e in log]
    return events[0]


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM in /proc status")
