"""Older pages of a long transcript in a real headless Chromium: each page begins at a prompt, the gauge and the
status line stay above every page, and a prompt on an older page can be reverted from or forked before."""

from __future__ import annotations

import pytest

from opencode_session.schema.ids import message_id, session_id

from .conftest import create

pytestmark = pytest.mark.timeout(120)

TURNS = 120  # a prompt and two answers each: 360 messages, and 100 is not a multiple of 3


def imported(api) -> str:
    """A session of TURNS turns (a prompt, an answer with a tool's worth of text, a second answer), imported."""
    blank = create(api, title="Three-message turns")
    exported = api.get(f"/api/experimental/session/{blank}/export").json()["data"]
    messages, clock = [], 1_700_000_000_000
    for turn in range(1, TURNS + 1):
        for kind in ("user", "first", "second"):
            clock += 1
            base = {"id": message_id(), "time": {"created": clock}}
            if kind == "user":
                messages.append({**base, "type": "user", "text": f"Prompt {turn}"})
            else:
                messages.append({**base, "type": "assistant", "agent": "build",
                                 "model": {"providerID": "loop", "id": "fake-model"},
                                 "content": [{"type": "text", "id": "text-0", "text": f"Answer {turn} ({kind})"}],
                                 "time": {**base["time"], "completed": clock}})
    info = {**exported["info"], "id": session_id(), "title": "Three-message turns"}
    answer = api.post("/api/experimental/session/import", json={"info": info, "messages": messages}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["id"]


def test_older_pages_begin_at_a_prompt_under_the_summary_with_their_actions(page, api, tmp_path):
    sid = imported(api)
    page.goto(f"/ui/session/{sid}")
    transcript = page.locator("#transcript")
    transcript.get_by_text(f"Answer {TURNS} (second)").wait_for()
    # the newest page begins at a prompt: no answer whose prompt is out of sight
    assert "user" in (transcript.locator("article.msg").first.get_attribute("class") or "")
    first_prompt = transcript.locator("article.msg.user h3 + .text").first.inner_text()
    turn = int(first_prompt.split()[-1])
    page.get_by_role("button", name="Load earlier messages").first.click()
    earlier = page.locator("#earlier")
    earlier.get_by_text(f"Answer {turn - 1} (second)").wait_for()
    assert "user" in (earlier.locator("article.msg").first.get_attribute("class") or "")
    shown = page.locator(".live article.msg .markdown, .live article.msg.user h3 + .text").all_inner_texts()
    assert len(shown) == len(set(shown)), "a message shown twice"
    # the gauge and the status line sit above the older pages, not between them and the newest
    summary_y = page.locator(".stats").bounding_box()["y"]
    assert summary_y < earlier.locator("article.msg").first.bounding_box()["y"]
    assert page.locator(".stats").count() == 1 and page.locator(".gauge").count() == 1
    # a prompt on the older page has the actions of one on the newest
    older = earlier.locator("article.msg.user").filter(has_text=f"Prompt {turn - 1}")
    assert older.get_by_role("button", name="Revert from here…").count() == 1
    older.scroll_into_view_if_needed()
    view = tmp_path / "older-page.png"  # what the reader sees there (the whole page is 200 messages tall)
    page.screenshot(path=str(view))
    print(f"screenshot: {view}")
    older.get_by_role("button", name="Fork before this prompt").click()
    page.wait_for_url(lambda url: sid not in url and "/ui/session/ses_" in url)
    forked = page.url.split("/ui/session/")[1].split("#")[0]
    kept = api.get(f"/api/session/{forked}/message?limit=1&order=desc").json()["data"]
    assert kept[0]["content"][0]["text"] == f"Answer {turn - 2} (second)"  # everything before that prompt
