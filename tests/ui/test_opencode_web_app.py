"""OpenCode's own web app (1.18.33) against `ocs serve`, in headless chromium: the app's static files are OpenCode's
(its binary embeds them and serves them at `/`), so a real `opencode serve` in a scratch HOME hands them out and the
browser loads them under ocs's origin, where every API call the app makes goes to ocs."""

from __future__ import annotations

import base64
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.api.test_opencode_run_attach import _client_env, opencode  # noqa: F401 (the installed CLI fixture)
from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, start_configured

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def app_files(opencode) -> Iterator[str]:  # noqa: F811
    """The URL of a real `opencode serve` whose only use here is its web app's static files."""
    scratch = Path(tempfile.mkdtemp(prefix="opencode-web-"))
    proc = subprocess.Popen([str(opencode), "serve", "--port", "0"], cwd=scratch, env=_client_env(scratch),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "listening on" in line:
                yield line.rsplit(" ", 1)[-1].strip()
                break
        else:
            pytest.fail("opencode serve printed no address")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture(scope="module")
def ocs_v1(tmp_path_factory, loop_provider) -> Iterator[tuple[ServerProcess, Path]]:
    proc, work = start_configured(tmp_path_factory.mktemp("ocs-web"),
                                  loop_provider.serve_config({"fake-model": {}}, model="loop/fake-model"))
    yield proc, work
    assert proc.stop() == 0, "".join(proc.stderr_lines)


def _is_app_file(request: Any) -> bool:
    path = urlsplit(request.url).path
    return (request.resource_type == "document" or path.startswith("/assets/")
            or ("." in path.rsplit("/", 1)[-1] and request.resource_type not in ("fetch", "xhr", "eventsource")))


def test_the_web_app_loads_against_ocs_and_sends_a_prompt(browser, app_files, ocs_v1, loop_provider):
    proc, work = ocs_v1
    loop_provider.requests.clear()
    loop_provider.enqueue(fake.completion(fake.text_deltas("Hello ", "from ocs")))
    refused: list[str] = []

    def serve_app_files(route: Any) -> None:
        if _is_app_file(route.request):
            parts = urlsplit(route.request.url)
            route.fulfill(response=route.fetch(url=app_files + parts.path + (f"?{parts.query}" if parts.query else "")))
        else:
            route.continue_()

    context = browser.new_context(viewport={"width": 1100, "height": 800})
    context.set_default_timeout(20_000)
    try:
        page = context.new_page()
        page.route("**/*", serve_app_files)
        page.on("response", lambda r: refused.append(f"{r.status} {r.request.method} {r.url}")
                if r.status >= 400 and not _is_app_file(r.request) else None)
        scope = base64.urlsafe_b64encode(str(work).encode()).decode().rstrip("=")
        with page.expect_response(lambda r: "/question" in r.url):  # the last thing the app reads as it starts
            page.goto(f"{proc.url}/{scope}/session")
        editor = page.locator('[contenteditable="true"]').first
        editor.click()
        editor.type("say hello")
        with page.expect_response(lambda r: r.url.endswith("/prompt_async")) as sent:
            page.keyboard.press("Enter")
        assert sent.value.status == 204
        (session,) = httpx2.get(f"{proc.url}/api/session", timeout=10).json()["data"]
        assert session["location"]["directory"] == str(work)
        answered = httpx2.post(f"{proc.url}/api/session/{session['id']}/wait", timeout=60)
        assert answered.status_code < 300, answered.text
        history = httpx2.get(f"{proc.url}/session/{session['id']}/message", timeout=10).json()
        assert [m["info"]["role"] for m in history] == ["user", "assistant"]
        assert history[1]["parts"][1]["text"] == "Hello from ocs"
        assert "say hello" in str(loop_provider.requests[-1].json["messages"])
        assert refused == []  # every call the app made while starting and prompting was answered
    finally:
        for tab in context.pages:  # a file still being fetched for the app when the test ends is not an error
            tab.unroute_all(behavior="ignoreErrors")
        context.close()
