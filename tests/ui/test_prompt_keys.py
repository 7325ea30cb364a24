"""The prompt box's keys in a real headless Chromium: Enter sends (Ctrl+Enter too), Shift+Enter is a new line, and
an Enter that belongs to an IME composition sends nothing."""

from __future__ import annotations

import pytest

from tests.support import fake_openai as fake

from .conftest import create, shoot

pytestmark = pytest.mark.timeout(90)

# a keydown as a browser sends it while an input method composes (Chromium says isComposing; some browsers only
# give keyCode 229)
COMPOSING_ENTER = """(box, init) => box.dispatchEvent(new KeyboardEvent("keydown",
    {key: "Enter", code: "Enter", bubbles: true, cancelable: true, ...init}))"""


def test_enter_sends_shift_enter_breaks_the_line_and_composing_never_sends(page, api, ui_provider, tmp_path):
    sid = create(api, title="Keys")
    ui_provider.enqueue(fake.completion(fake.text_deltas("First answer.")),
                        fake.completion(fake.text_deltas("Second answer.")))
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    box = page.get_by_label("Prompt")
    box.fill("こんにちは")
    for init in ({"isComposing": True}, {"keyCode": 229}):
        box.evaluate(COMPOSING_ENTER, init)  # the IME confirms its text: nothing is sent
    assert box.input_value() == "こんにちは" and page.locator("#prompt-status").inner_text() == ""
    box.press("Shift+Enter")
    box.type("second line")
    assert box.input_value() == "こんにちは\nsecond line"  # a new line, not a send
    shoot(page, tmp_path, "two-lines")
    box.press("Enter")
    page.locator("#transcript .msg.user").filter(has_text="second line").wait_for()
    page.locator("#transcript").get_by_text("First answer.").wait_for()
    assert box.input_value() == ""
    [prompt] = [m for m in api.get(f"/api/session/{sid}/message").json()["data"] if m["type"] == "user"]
    assert prompt["text"] == "こんにちは\nsecond line"  # sent once, as typed
    box.fill("Again")
    box.press("Control+Enter")
    page.locator("#transcript").get_by_text("Second answer.").wait_for()
    assert len([m for m in api.get(f"/api/session/{sid}/message").json()["data"] if m["type"] == "user"]) == 2
