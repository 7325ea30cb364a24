"""Session titles: after the first Step a background call to the small model (else the session's model) names the
session from its first prompt, once; the result is what `GET /api/session` lists."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest

from opencode_session.core.execution.title import TITLE_SYSTEM, clean_title
from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake

pytestmark = pytest.mark.anyio


@pytest.fixture
def provider(loop_provider):
    return loop_provider


def configure(provider: fake.FakeOpenAI, **extra) -> None:
    folder = Path(os.environ["XDG_CONFIG_HOME"]) / "opencode"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "opencode.json").write_text(json.dumps({
        "model": "loop/fake-model",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible", "options": {"baseURL": provider.base_url},
                              "models": {"fake-model": {}, "small-model": {}}}},
        **extra,
    }))


async def _turn(oc: OpenCode, sid: str, text: str) -> None:
    await oc.session.prompt(sid, prompt={"text": text})
    with anyio.fail_after(30):
        await oc.session.wait(sid)


async def _renamed(oc: OpenCode, sid: str) -> str:
    with anyio.fail_after(30):
        async for event in oc.session.log(sid, follow=True):
            if event.type == "session.renamed":
                return event.data.title
    raise AssertionError("the log ended")


async def test_first_prompt_titles_the_session_with_the_small_model_once(tmp_path, provider):
    configure(provider, small_model="loop/small-model")
    provider.title_requests.clear()
    provider.title = '"Fix the login bug"\n'
    provider.enqueue(fake.completion(fake.text_deltas("On it.")), fake.completion(fake.text_deltas("Done.")))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as oc:
        sid = (await oc.session.create()).id
        assert (await oc.session.get(sid)).title.startswith("New session - ")
        await _turn(oc, sid, "please fix the login bug in auth.py")
        assert await _renamed(oc, sid) == "Fix the login bug"
        await _turn(oc, sid, "and add a test")
        listed = {s.id: s.title for s in (await oc.session.list()).items}
        assert listed[sid] == "Fix the login bug"
    assert len(provider.title_requests) == 1
    sent = provider.title_requests[0].json
    assert sent["model"] == "small-model" and "tools" not in sent
    assert sent["messages"] == [{"role": "system", "content": TITLE_SYSTEM},
                                {"role": "user", "content": "please fix the login bug in auth.py"}]


async def test_without_small_model_the_sessions_model_titles_it(tmp_path, provider):
    configure(provider)
    provider.title_requests.clear()
    provider.title = "<think>short and clear</think>\n\nGreeting"
    provider.enqueue(fake.completion(fake.text_deltas("Hello!")))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as oc:
        sid = (await oc.session.create()).id
        await _turn(oc, sid, "hi")
        assert await _renamed(oc, sid) == "Greeting"
    assert [r.json["model"] for r in provider.title_requests] == ["fake-model"]


async def test_an_empty_title_answer_keeps_the_default(tmp_path, provider):
    configure(provider)
    provider.title_requests.clear()
    provider.title = "   \n"
    provider.enqueue(fake.completion(fake.text_deltas("ok")))
    async with OpenCode(db=tmp_path / "db.sqlite", directory=tmp_path) as oc:
        sid = (await oc.session.create()).id
        await _turn(oc, sid, "hi")
        await oc.runtime.settle_background(30)
        assert len(provider.title_requests) == 1
        assert (await oc.session.get(sid)).title.startswith("New session - ")


def test_clean_title():
    assert clean_title("**Refactor `db.py`**\nmore") == "Refactor `db.py`"
    assert clean_title("<think>hmm\nlong</think>Title") == "Title"
    assert clean_title("<think>never closed") is None
    assert clean_title("x" * 300) == "x" * 100
