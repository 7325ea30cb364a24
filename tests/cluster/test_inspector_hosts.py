"""The inspector's sessions list on a cluster: two real `ocs serve` hosts on one PostgreSQL schema. The host that does
not execute a session lists it busy and names the host that does; once that host shuts down gracefully, the session it
interrupted is listed suspended (no host has resumed it), and the status filter finds it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.postgres import fresh_schema
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.timeout(120)

PAGE = {"Accept": "text/html"}


def row(html: str, sid: str) -> str | None:
    """The text of the session's row in a rendered list, if it is listed."""
    found = re.search(rf'<a class="session" href="/ui/session/{sid}">(.*?)</a>', html, re.DOTALL)
    return None if found is None else re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", found.group(1))).strip()


def test_the_list_names_the_executing_host_and_then_the_suspension(tmp_path: Path):
    with fresh_schema() as url, fake.FakeOpenAI.running() as provider:
        env = isolated_env(tmp_path)
        (tmp_path / "config" / "opencode").mkdir(parents=True)
        (tmp_path / "config" / "opencode" / "opencode.json").write_text(
            json.dumps(provider.serve_config({"fake-model": {}}, model="loop/fake-model")))
        work = tmp_path / "work"
        work.mkdir()
        owner = start_server(tmp_path, env=env, db=url, workdir=work)
        other = start_server(tmp_path, env=env, db=url, workdir=work)
        try:
            held = fake.completion(fake.text_deltas("Half", " an answer"), hold_after=1)
            provider.enqueue(held)
            sid = httpx2.post(owner.url + "/api/session", json={"title": "Held"}).json()["data"]["id"]
            assert httpx2.post(f"{owner.url}/api/session/{sid}/prompt",
                               json={"prompt": {"text": "Go"}}).status_code == 200
            assert held.held.wait(30)  # the owner is mid-answer
            host = httpx2.get(f"{other.url}/api/session/{sid}/owner").json()["host"]
            assert host
            listed = row(httpx2.get(other.url + "/", headers=PAGE).text, sid)
            assert listed is not None and "busy" in listed.split() and f"on {host}" in listed
            assert row(httpx2.get(other.url + "/ui/sessions?status=idle").text, sid) is None
            assert owner.stop() == 0, "".join(owner.stderr_lines)  # graceful: it suspends what it runs
            suspended = row(httpx2.get(other.url + "/ui/sessions?status=suspended").text, sid)
            assert suspended is not None and "suspended" in suspended.split() and " on " not in suspended
        finally:
            provider.release_held()
            owner.stop()
            assert other.stop() == 0, "".join(other.stderr_lines)
