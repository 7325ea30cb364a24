"""Reading comfort in a real headless Chromium: tool cards that say what they did while folded, code highlighted in
answers and tool output, a copy button on each code block, thousands separators, and a dark theme when the system
asks for one."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_allowing, shoot

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

ANSWER = "Here it is:\n\n```python\ndef greet(name):\n    return f\"hello {name}\"  # polite\n```\n"


def run_a_turn_with_tools(page, api, ui_provider) -> str:
    """A turn that writes src/a.py (by its absolute path), reads it, runs it (asking: allowed from the tray), then
    answers with a Python block; the page is open on it when it returns."""
    sid = create(api, title="Reading comfort")
    directory = api.get(f"/api/session/{sid}").json()["data"]["location"]["directory"]
    source = 'import sys\nprint("hello", 42)  # greet\n'
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_w", "write", json.dumps(
            {"path": f"{directory}/src/a.py", "content": source})), finish_reason="tool_calls"),
        fake.completion(fake.tool_call_deltas(0, "call_r", "read", json.dumps({"path": "src/a.py"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.tool_call_deltas(0, "call_b", "bash", json.dumps(
            {"command": "python3 src/a.py", "description": "run it"})), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas(ANSWER), usage=fake.usage_block(12345, 6789)))
    prompt_allowing(page, api, sid, "Write and run it", asking="python3 src/a.py")
    page.locator("#transcript .usage").get_by_text("12,345 in").wait_for()
    return sid


def test_tool_cards_code_and_numbers_read_well(page, api, ui_provider, tmp_path):
    run_a_turn_with_tools(page, api, ui_provider)
    transcript = page.locator("#transcript")
    cards = transcript.locator("details.tool")
    # folded, each card says what it did; a path under the session's Location is shown relative to it
    assert [t.strip() for t in cards.locator("summary .what").all_inner_texts()] == [
        "write src/a.py", "read src/a.py", "bash python3 src/a.py"]
    assert "6,789 out" in transcript.locator(".usage").last.inner_text()
    assert "12,345 in" in page.locator(".stats").inner_text()
    # the answer's fenced block is highlighted as Python (keyword, string, comment), on the server
    block = transcript.locator(".markdown .code")
    assert block.locator("code.hl .k").first.inner_text() == "def"
    assert block.locator("code.hl .c1").inner_text() == "# polite"
    # the read tool's output: the file highlighted as its kind, its line numbers apart
    read = cards.nth(1)
    read.locator("summary").click()
    output = read.locator("pre.output")
    assert output.locator(".ln").first.inner_text() == "00001| "
    assert output.locator(".nb").first.inner_text() == "print" and output.locator(".mi").inner_text() == "42"
    # the run's output is there to copy too; the input is highlighted JSON
    bash = cards.nth(2)
    bash.locator("summary").click()
    assert "hello 42" in bash.locator("pre.output").inner_text()
    assert bash.locator("pre code.hl .s2").count() > 0
    shoot(page, tmp_path, "reading-light")
    page.set_viewport_size({"width": 375, "height": 740})
    shoot(page, tmp_path, "reading-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375


def test_the_copy_button_copies_the_block_by_mouse_and_keyboard(page, api, ui_provider):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    run_a_turn_with_tools(page, api, ui_provider)
    block = page.locator("#transcript .markdown .code")
    button = block.get_by_role("button", name="Copy")
    button.click()
    block.get_by_text("Copied").wait_for()
    assert page.evaluate("navigator.clipboard.readText()") == 'def greet(name):\n    return f"hello {name}"  # polite\n'
    # by keyboard: the read card's output button, reached with Tab from its summary
    read = page.locator("#transcript details.tool").nth(1)
    read.locator("summary").click()
    page.evaluate("navigator.clipboard.writeText('')")
    read.locator(".code").nth(1).get_by_role("button").focus()
    page.keyboard.press("Enter")
    read.get_by_text("Copied").wait_for()
    copied = page.evaluate("navigator.clipboard.readText()")
    assert copied.startswith("00001| import sys\n00002| print(") and "<span" not in copied


def test_the_dark_theme_follows_the_system(browser, ocs, api, ui_provider, tmp_path):
    from .conftest import log_in

    context = browser.new_context(base_url=ocs.url, viewport={"width": 1100, "height": 800}, color_scheme="dark")
    context.set_default_timeout(15_000)
    tab = context.new_page()
    try:
        log_in(tab)
        run_a_turn_with_tools(tab, api, ui_provider)

        def luminance(css: str) -> float:
            r, g, b = (int(x) for x in css[css.index("(") + 1:css.index(")")].split(",")[:3])
            return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255

        background = tab.evaluate("getComputedStyle(document.documentElement).backgroundColor")
        card = tab.evaluate("getComputedStyle(document.querySelector('#transcript .msg')).backgroundColor")
        text = tab.evaluate("getComputedStyle(document.querySelector('#transcript .msg')).color")
        assert luminance(background) < 0.2 and luminance(card) < 0.25 and luminance(text) > 0.7
        keyword = tab.evaluate("getComputedStyle(document.querySelector('.markdown code.hl .k')).color")
        assert luminance(keyword) > 0.5  # readable on the dark card
        shoot(tab, tmp_path, "reading-dark")
    finally:
        context.close()
