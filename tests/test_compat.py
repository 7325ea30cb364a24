"""The patches of dependencies' private names are checked against the releases they were tested with, which are the
releases pyproject.toml admits: the locked versions pass; with another release installed (as a user's pip may pick)
the start-up check names it and every patch takes the public path, so Steps still run, for every protocol; only a
package missing altogether is refused, at start-up in one line. Importing the module reads nothing."""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import httpx2
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from opencode_session import compat
from opencode_session.core.llm import LLMRequest, ResolvedModel, TextDelta, TextPart, UserMessage
from opencode_session.core.llm.providers import Providers
from tests.support import fake_openai as fake
from tests.support.fake_openai import FakeOpenAI
from tests.support.fake_wire import m_text, messages, r_text, responses

ROOT = Path(__file__).resolve().parents[1]
NEXT_RELEASES = {"openai": "3.52.0", "anthropic": "2.11.0", "httpx2": "2.17.0", "httpcore2": "2.17.0",
                 "uvicorn": "0.55.0"}


def test_the_locked_versions_are_the_ones_the_patches_were_written_for():
    assert compat.check_versions() == []
    lock = (ROOT / "requirements.lock").read_text().splitlines()
    pinned = dict(line.strip().split("==") for line in lock if "==" in line)
    assert {package: pinned[package] for package in compat.WRITTEN_FOR} == dict(compat.WRITTEN_FOR)


def test_pyproject_admits_the_tested_release_of_each_patched_package_and_no_other():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    bounds = {re.split(r"[<>=\[]", spec, maxsplit=1)[0]: spec for spec in declared}
    for package, version in compat.WRITTEN_FOR.items():
        major, minor, _ = version.split(".")
        assert bounds[package] == f"{package}>={version},<{major}.{int(minor) + 1}"
    unbounded = [spec for spec in declared if ">=" not in spec]
    assert unbounded == []


def test_another_release_is_named_at_start_up_and_a_missing_package_refused():
    assert compat.check_versions({"openai": "0.0.1"}) == [
        f"openai {importlib.metadata.version('openai')} is not the release opencode_session.compat was tested with "
        "(0.0.1): it uses openai's public path instead"]
    assert compat.check_versions({"openai": importlib.metadata.version("openai")[:-1] + "9"}) == []  # a patch release
    with pytest.raises(compat.IncompatibleDependencyError, match="no-such-package is not installed"):
        compat.check_versions({"no-such-package": "1.0"})


@pytest.fixture
def next_releases(monkeypatch):
    """The SDKs and httpx report the next minor release, as if pip had installed them: the patches' check is read
    afresh, and again after the test."""
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: NEXT_RELEASES.get(name) or real(name))
    compat.patched.cache_clear()
    compat._said.clear()
    yield
    compat.patched.cache_clear()
    compat._said.clear()


def answer(protocol: str, text: str) -> fake.Script:
    if protocol == "chat":
        return fake.completion(fake.text_deltas(text))
    return responses(r_text(text)) if protocol == "responses" else messages(m_text(text))


@pytest.mark.anyio
@pytest.mark.timeout(60)
@pytest.mark.parametrize("protocol", ["chat", "responses", "messages"])
async def test_with_untested_releases_steps_take_the_public_path_and_succeed(next_releases, caplog, protocol):
    caplog.set_level(logging.WARNING, logger="opencode_session.compat")
    async with FakeOpenAI() as server:
        model = ResolvedModel("p", "fake-model", server.base_url, api_key="sk-test-key", protocol=protocol,
                              headers={"X-Team": "blue"})  # type: ignore[arg-type]
        providers = Providers()
        try:
            adapter = providers.for_model(model)
            server.enqueue(*(answer(protocol, text) for text in ("one", "two", "three")))
            said = []
            for text in ("first", "second", "third"):
                request = LLMRequest(model=model, system=["s"], messages=[UserMessage([TextPart(text)])])
                said.append("".join([e.delta async for e in adapter.stream(request) if isinstance(e, TextDelta)]))
            assert adapter._first is None  # no request was sent again outside the SDK's own post
        finally:
            await providers.aclose()
    assert said == ["one", "two", "three"]
    assert [r.headers["x-team"] for r in server.requests] == ["blue"] * 3
    package = "anthropic" if protocol == "messages" else "openai"
    logged = [r.getMessage() for r in caplog.records]
    assert any(m.startswith(f"{package} {NEXT_RELEASES[package]} is not the release") and "SDK's own post" in m
               for m in logged), logged
    assert any(m.startswith("httpx2 2.17.0") and "httpcore's own network backend" in m for m in logged), logged


async def _serve_once(caplog: pytest.LogCaptureFixture) -> tuple[str, list[str]]:
    app = Starlette(routes=[Route("/", lambda request: PlainTextResponse("up"))])
    config = uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off", log_level="warning",
                            http=compat.read_deadline_protocol(5.0))
    ready = asyncio.Event()
    server = compat.ready_server(config, ready)
    serving = asyncio.create_task(server.serve())
    await ready.wait()
    try:
        port = server.servers[0].sockets[0].getsockname()[1]
        async with httpx2.AsyncClient() as client:
            text = (await client.get(f"http://127.0.0.1:{port}/")).text
    finally:
        server.should_exit = True
        await serving
    return text, [r.getMessage() for r in caplog.records if r.name == "opencode_session.compat"]


@pytest.mark.anyio
@pytest.mark.timeout(30)
async def test_the_server_serves_with_the_tested_uvicorn_and_with_another_release(caplog, request):
    caplog.set_level(logging.WARNING, logger="opencode_session.compat")
    assert compat.read_deadline_protocol(5.0) != "h11"
    assert await _serve_once(caplog) == ("up", [])
    request.getfixturevalue("next_releases")
    assert compat.read_deadline_protocol(5.0) == "h11"
    text, logged = await _serve_once(caplog)
    assert text == "up"
    assert any(m.startswith("uvicorn 0.55.0") and "without a deadline" in m for m in logged), logged


def test_importing_reads_no_version_and_a_patch_of_another_release_never_raises():
    code = ("import importlib.metadata as metadata\n"
            "real = metadata.version\n"
            "reads = []\n"
            "metadata.version = lambda name: reads.append(name) or ('9.9.9' if name == 'anthropic' else real(name))\n"
            "from opencode_session.core import runtime\n"
            "from opencode_session.compat import pin_sdk_headers, sdk_custom_headers\n"
            "assert reads == [], reads\n"
            "import anthropic\n"
            "client = anthropic.AsyncAnthropic(api_key='k', default_headers={'X-Env': 'e'})\n"
            "pin_sdk_headers(client, {'X-Team': 'blue'}, drop_credential_headers=True)\n"
            "print(dict(sdk_custom_headers(client)))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "{'X-Team': 'blue'}"
