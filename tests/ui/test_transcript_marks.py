"""What the transcript marks beside its messages, in a real Chromium: each prompt's delivery, a compaction that
failed (with its reason), a tool's input as written; the header offers only models that can be called; and a page
that connects to its live stream is not rendered a second time when nothing changed since it was served."""

from __future__ import annotations

import html
import json
import re

import httpx2
import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_and_wait, shoot

pytestmark = pytest.mark.timeout(90)


def test_each_prompt_is_marked_steer_or_queue(page, api, ui_provider, tmp_path):
    sid = create(api, title="Deliveries")
    for text, delivery in (("Steered in", "steer"), ("Queued up", "queue")):
        ui_provider.enqueue(fake.completion(fake.text_deltas(f"Answer to {text}.")))
        assert api.post(f"/api/session/{sid}/prompt",
                        json={"prompt": {"text": text}, "delivery": delivery}).status_code == 200
        assert api.post(f"/api/session/{sid}/wait", timeout=40).status_code == 204
    page.goto(f"/ui/session/{sid}")
    prompts = page.locator("#transcript .msg.user")
    prompts.nth(1).get_by_text("Queued up").wait_for()
    assert prompts.nth(0).locator(".badge.delivery").text_content() == "steer"
    assert prompts.nth(1).locator(".badge.delivery").text_content() == "queue"
    # one sent from the page is marked as it arrives
    ui_provider.enqueue(fake.completion(fake.text_deltas("Answer to the page.")))
    page.get_by_label("Delivery").select_option("queue")
    page.get_by_label("Prompt").fill("From the page")
    page.get_by_role("button", name="Send").click()
    page.locator("#transcript").get_by_text("Answer to the page.").wait_for()
    assert prompts.nth(2).locator(".badge.delivery").text_content() == "queue"
    shoot(page, tmp_path, "deliveries")


def test_a_failed_compaction_says_so_and_why(page, api, ui_provider, tmp_path):
    sid = create(api, title="Failing compaction")
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    page.get_by_label("Prompt").fill("/compact")  # nothing to summarise yet: it fails before it begins
    page.get_by_role("button", name="Send").click()
    early = page.locator("#transcript .marker.failed")
    early.wait_for()
    assert "Compaction (manual) failed" in early.inner_text()
    for text in ("Remember 7", "And 8"):
        ui_provider.enqueue(fake.completion(fake.text_deltas(f"Noted: {text}.")))
        prompt_and_wait(api, sid, text)
    ui_provider.summaries.append(fake.error(400, "the summary was refused", type="invalid_request_error"))
    page.get_by_label("Prompt").fill("/compact")
    page.get_by_role("button", name="Send").click()
    failed = page.locator("#transcript .marker.compaction.failed").filter(has_text="the summary was refused")
    failed.wait_for()
    assert "Compaction (manual) failed" in failed.inner_text()
    assert page.locator("#transcript details.marker.compaction").count() == 0  # not shown as if it had compacted
    # the earlier mark stays where it happened: before the first prompt
    order = page.locator("#transcript").evaluate("""t => [...t.querySelectorAll('.marker.failed, .msg.user')]
                                                      .map(e => e.classList.contains('msg') ? 'prompt' : 'failed')""")
    assert order == ["failed", "prompt", "prompt", "failed"]
    shoot(page, tmp_path, "compaction-failed")


def test_a_tool_input_reads_as_written(page, api, ui_provider):
    allow = [{"action": "bash", "resource": "*", "effect": "allow"}]
    sid = create(api, title="Quoting", permissions=allow)
    command = "echo 'it is <done>' && echo \"a & b\""
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_q", "bash", json.dumps({"command": command,
                                                                              "description": "quote"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Quoted.")))
    prompt_and_wait(api, sid, "Quote something")
    page.goto(f"/ui/session/{sid}")
    card = page.locator("#transcript details.tool")
    card.locator("summary").click()
    shown = card.locator("pre").first.inner_text()
    assert json.loads(shown)["command"] == command and "\\u00" not in shown


def test_the_header_offers_only_models_that_can_be_called(page, api):
    sid = create(api, title="Models")
    page.goto(f"/ui/session/{sid}")
    offered = page.get_by_label("Model").locator("option").evaluate_all("os => os.map(o => o.value)")
    # the loopback provider's two models; not the bundled catalog's providers, which have no key here
    assert sorted(offered) == ["loop/fake-model", "loop/other-model"]
    catalog = api.get("/api/model").json()["data"]
    assert len(catalog) > len(offered)  # the API still lists everything


def first_frame(api: httpx2.Client, url: str, then=None) -> tuple[str, str]:
    """The first event of the live stream at `url` (after calling `then` once the stream is open)."""
    with api.stream("GET", url, headers={"Accept": "text/event-stream"}, timeout=30) as stream:
        assert stream.status_code == 200
        if then is not None:
            then()
        event, data = "", []
        for line in stream.iter_lines():
            if line.startswith("event: "):
                event = line[len("event: "):]
            elif line.startswith("data: "):
                data.append(line[len("data: "):])
            elif line == "" and event:
                return event, "\n".join(data)
    raise AssertionError("the stream ended")


def test_a_page_connecting_at_the_state_it_shows_is_not_rendered_again(api, ui_provider):
    sid = create(api, title="Once")
    served = api.get(f"/ui/session/{sid}", headers={"Accept": "text/html"})
    live = html.unescape(re.search(r'sse-connect="([^"]+)"', served.text).group(1))
    assert "state=" in live
    ui_provider.enqueue(fake.completion(fake.text_deltas("Rendered once.")))

    def send() -> None:
        assert api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "Only after this"}}).status_code == 200

    # the page shows the session as it is: the first frame is the change that follows, not the same page again
    event, data = first_frame(api, live, send)
    assert event == "transcript" and "Only after this" in data
    assert api.post(f"/api/session/{sid}/wait", timeout=40).status_code == 204
    # a page from before the prompt (or one that says nothing) is brought up to date at once
    for stale in (live, f"/ui/session/{sid}/live"):
        event, data = first_frame(api, stale)
        assert event == "transcript" and "Rendered once." in data
