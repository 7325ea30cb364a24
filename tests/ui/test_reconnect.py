"""The inspector's live transcript outlives the server: after a restart on the same address the page reconnects by
itself and shows what happened since."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.timeout(120)


def test_the_page_reconnects_after_the_server_restarts(browser, tmp_path):
    with fake.FakeOpenAI.running() as provider:
        env = isolated_env(tmp_path)
        (tmp_path / "config" / "opencode").mkdir(parents=True)
        (tmp_path / "config" / "opencode" / "opencode.json").write_text(
            json.dumps(provider.serve_config({"fake-model": {}}, model="loop/fake-model")))
        first = start_server(tmp_path, env=env)
        port = str(urlsplit(first.url).port)
        try:
            sid = httpx2.post(first.url + "/api/session", json={"title": "Survivor"}).json()["data"]["id"]
            context = browser.new_context(base_url=first.url)
            context.set_default_timeout(30_000)
            page = context.new_page()
            opened: list[str] = []
            page.on("request", lambda request: opened.append(request.url) if "/live" in request.url else None)
            page.goto(f"/ui/session/{sid}")
            page.get_by_text("Nothing here yet").wait_for()
        finally:
            assert first.stop() == 0, "".join(first.stderr_lines)
        second = start_server(tmp_path, env=env, args=("--port", port))  # the same database, the same address
        try:
            assert second.url == first.url
            provider.enqueue(fake.completion(fake.text_deltas("Still here after the restart.")))
            answer = httpx2.post(f"{second.url}/api/session/{sid}/prompt", json={"prompt": {"text": "Are you there?"}})
            assert answer.status_code == 200
            page.locator("#transcript").get_by_text("Still here after the restart.").wait_for()
            assert len(opened) >= 2  # the stream was opened again, by the page itself
            context.close()
        finally:
            assert second.stop() == 0, "".join(second.stderr_lines)
