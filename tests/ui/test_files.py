"""The Files views of a session page in a real Chromium: a revert previewed, staged, cleared and committed from the
page (the files on disk follow), and a fork from a prompt that opens the new session."""

from __future__ import annotations

import json
from pathlib import Path

import httpx2
import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_and_wait, shoot

pytestmark = pytest.mark.timeout(90)



def write_turn(api: httpx2.Client, provider: fake.FakeOpenAI, sid: str, name: str, content: str) -> None:
    provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "write", json.dumps({"path": name, "content": content})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas(f"Wrote {name}.")))
    prompt_and_wait(api, sid, f"Write {name}")


def test_a_revert_is_previewed_staged_cleared_and_committed_from_the_page(page, api, ui_provider, tmp_path):
    sid = create(api, title="Reverting")
    work = Path(api.get(f"/api/session/{sid}").json()["data"]["location"]["directory"])
    write_turn(api, ui_provider, sid, "keep.txt", "kept\n")
    write_turn(api, ui_provider, sid, "drop.txt", "one\ntwo\nthree\n")
    page.goto(f"/ui/session/{sid}")
    transcript = page.locator("#transcript")
    transcript.get_by_text("Wrote drop.txt.").wait_for()
    second = transcript.locator(".msg.user").nth(1)
    second.get_by_role("button", name="Revert from here").click()
    preview = second.locator(".revert-preview")
    preview.locator("summary").get_by_text("drop.txt").wait_for()  # what staging would put back, before doing it
    assert "+3" in preview.locator("summary").inner_text() and "keep.txt" not in preview.inner_text()
    assert (work / "drop.txt").exists()  # a preview changes nothing
    shoot(page, tmp_path, "revert-preview")
    preview.get_by_role("button", name="Stage revert").click()
    staged = page.get_by_role("region", name="Staged revert")
    staged.get_by_text("1 file put back as before this prompt").wait_for()
    assert not (work / "drop.txt").exists() and (work / "keep.txt").read_text() == "kept\n"
    shoot(page, tmp_path, "revert-staged")
    staged.get_by_role("button", name="Clear revert").click()
    staged.wait_for(state="detached")
    assert (work / "drop.txt").read_text() == "one\ntwo\nthree\n"  # put back as the agent left it
    second.get_by_role("button", name="Revert from here").click()
    second.locator(".revert-preview").get_by_role("button", name="Stage revert").click()
    page.get_by_role("region", name="Staged revert").get_by_role("button", name="Commit revert").click()
    transcript.get_by_text("Write drop.txt", exact=True).wait_for(state="detached")  # the prompt left the history
    assert transcript.get_by_text("Wrote keep.txt.").is_visible()
    mark = transcript.locator(".marker.revert")  # and the transcript says where history was cut
    assert "Reverted here" in mark.inner_text()
    assert "Wrote keep.txt." in mark.evaluate("m => m.previousElementSibling.innerText")
    assert page.get_by_role("region", name="Staged revert").count() == 0
    assert not (work / "drop.txt").exists() and (work / "keep.txt").exists()
    assert [m["type"] for m in api.get(f"/api/session/{sid}/message?order=asc").json()["data"]] == ["user", "assistant",
                                                                                          "assistant"]


def test_a_fork_before_a_prompt_opens_the_new_session(page, api, ui_provider, tmp_path):
    sid = create(api, title="Forking")
    ui_provider.enqueue(fake.completion(fake.text_deltas("First answer.")))
    prompt_and_wait(api, sid, "First question")
    ui_provider.enqueue(fake.completion(fake.text_deltas("Second answer.")))
    prompt_and_wait(api, sid, "Second question")
    page.goto(f"/ui/session/{sid}")
    transcript = page.locator("#transcript")
    transcript.get_by_text("Second answer.").wait_for()
    assert transcript.locator(".msg.user").first.get_by_role("button", name="Fork before this prompt").count() == 0
    transcript.locator(".msg.user").nth(1).get_by_role("button", name="Fork before this prompt").click()
    page.wait_for_url(lambda url: "/ui/session/" in url and sid not in url)
    forked = page.url.rsplit("/", 1)[-1]
    page.locator("#transcript").get_by_text("First answer.").wait_for()
    assert page.locator("#transcript").get_by_text("Second question").count() == 0
    assert [c["id"] for c in api.get(f"/api/session?parentID={sid}").json()["data"]] == [forked]  # one click, one fork
    shoot(page, tmp_path, "forked")
    page.goto(f"/ui/session/{forked}")
    page.get_by_role("button", name="Fork session").click()  # the whole of it, from the header
    page.wait_for_url(lambda url: forked not in url)
    page.locator("#transcript").get_by_text("First answer.").wait_for()
