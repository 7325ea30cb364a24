"""Streamed text in a real headless Chromium: an answer keeps every word it streamed when a durable event (a queued
prompt, another tab's prompt) re-renders the transcript mid-answer, in order and once, under its own header and
above the queued inbox."""

from __future__ import annotations

import pytest

from tests.support import fake_openai as fake

from .conftest import create, shoot

pytestmark = pytest.mark.timeout(90)

# every text the answer's first part showed, as it changed (a restart from the middle would be one that is not a
# prefix of the whole answer)
WATCH = """() => {
  window.shown = [];
  const read = () => {
    const part = document.querySelector("#transcript article.msg.assistant .streamed, "
                                        + "#transcript article.msg.assistant .markdown");
    if (part) window.shown.push(part.textContent.trim());
  };
  new MutationObserver(read).observe(document.getElementById("transcript"),
                                     {childList: true, subtree: true, characterData: true});
}"""
WHOLE = "Mock reply number one: slow chunks, twenty of them, one by one."


def test_a_rerender_mid_answer_keeps_the_streamed_text(page, api, ui_provider, tmp_path):
    sid = create(api, title="Streaming kept")
    words = [w + " " for w in WHOLE.split(" ")]
    words[-1] = words[-1].rstrip()
    held = fake.completion(fake.text_deltas(*words), hold_after=1 + 5)  # the role chunk, then five words
    ui_provider.enqueue(held, fake.completion(fake.text_deltas("The queued one, answered.")))
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    page.evaluate(WATCH)
    page.get_by_label("Prompt").fill("Answer slowly")
    page.get_by_label("Prompt").press("Enter")
    answer = page.locator("#transcript article.msg.assistant")
    so_far = "".join(words[:5]).strip()
    page.locator(".live").get_by_text(so_far).last.wait_for()  # streaming: five words shown
    # a durable event while the answer streams: a prompt queued from elsewhere re-renders the transcript
    queued = api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "And then this"}, "delivery": "queue"})
    assert queued.status_code == 200, queued.text
    inbox = page.get_by_role("region", name="Queued")
    inbox.get_by_text("And then this").wait_for()
    # kept whole, once, in the answer: not lost, not restarted from the middle, not doubled
    assert page.locator(".live").inner_text().count(so_far) == 1
    assert answer.locator(".streamed").inner_text().strip() == so_far
    # the answer, under its own header, stands above the inbox, not below it
    assert answer.count() == 1 and answer.locator("h3").count() == 1
    assert answer.bounding_box()["y"] < inbox.bounding_box()["y"]
    assert page.locator("#streaming").inner_text() == ""
    shoot(page, tmp_path, "kept-with-inbox")
    held.release.set()
    page.locator("#transcript .markdown").get_by_text(WHOLE).wait_for()
    page.locator("#transcript").get_by_text("The queued one, answered.").wait_for()
    shown = [s for s in page.evaluate("window.shown") if s]
    assert shown, "the answer never showed"
    # every state of the answer's text was a beginning of the whole answer, and it only ever grew
    assert all(WHOLE.startswith(s) for s in shown), [s for s in shown if not WHOLE.startswith(s)][:3]
    assert all(len(a) <= len(b) for a, b in zip(shown, shown[1:], strict=False)), shown
    assert answer.first.locator(".markdown").inner_text().strip() == WHOLE
