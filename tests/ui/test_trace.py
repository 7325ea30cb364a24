"""The trace of a turn in a real headless Chromium, read from the durable log: linked from each answer, a waterfall of
its Steps (waiting for the first token, streaming, retry back-off) and tool calls, each Step's tokens and cost, and
each call's input, output and error, folded until asked for."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_allowing, shoot

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_the_trace_of_a_turn_shows_where_its_time_went(page, api, ui_provider, tmp_path):
    sid = create(api, title="Traced")
    ui_provider.enqueue(
        fake.error(429, "slow down, please", type="rate_limit_error", headers={"retry-after-ms": "400"}),
        fake.completion(fake.text_deltas("Let me look."),
                        fake.tool_call_deltas(0, "call_ok", "read", json.dumps({"path": "notes.txt"})),
                        fake.tool_call_deltas(1, "call_bad", "read", json.dumps({"path": "missing.txt"})),
                        finish_reason="tool_calls", usage=fake.usage_block(1500, 20)),
        fake.completion(fake.tool_call_deltas(0, "call_sh", "bash", json.dumps(
            {"command": "echo traced", "description": "say it"})), finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Done: alpha, beta, traced."), usage=fake.usage_block(2345, 67)))
    prompt_allowing(page, api, sid, "Look around", asking="echo traced")
    transcript = page.locator("#transcript")
    transcript.get_by_text("Done: alpha, beta, traced.").wait_for()
    answers = transcript.locator("article.msg.assistant")
    assert answers.count() == 3 and answers.get_by_role("link", name="Trace").count() == 3  # from each answer
    answers.first.get_by_role("link", name="Trace").click()
    page.wait_for_url(f"**/ui/session/{sid}/trace/*")
    assert page.title().startswith("Trace · Traced")
    total = page.locator(".trace-total").inner_text()
    assert "3 Steps" in total and "3,845 in / 87 out" in total and "succeeded" in total
    assert "Look around" in page.locator(".trace-prompt").inner_text()
    # the waterfall: each Step, then its calls under it
    fall = page.get_by_role("region", name="Waterfall")
    rows = fall.locator(".row:not(.axis) .name")
    names = [" ".join(n.split()[:2]) if n.startswith("Step") else n.rsplit(" ", 2)[0] for n in rows.all_inner_texts()]
    assert names == ["Step 1", "read notes.txt", "read missing.txt", "Step 2", "bash echo traced", "Step 3"], names
    first = fall.locator(".step-row").first
    assert first.locator(".bar.k-back-off").count() == 1 and first.locator(".bar.k-waiting").count() >= 1
    assert first.locator(".bar.k-streaming").count() == 1
    assert fall.locator(".legend .bar.k-streaming").bounding_box()["width"] > 5  # each kind has its swatch
    backoff = first.locator(".bar.k-back-off").bounding_box()
    track = first.locator(".track").bounding_box()
    assert backoff and track and backoff["width"] > 0.05 * track["width"]  # seconds of a short turn: plain to see
    calls = fall.locator(".call-row")
    assert calls.filter(has=page.locator(".bar.k-tool.k-error")).count() == 1
    assert calls.filter(has=page.locator(".bar.k-tool.k-completed")).count() == 2
    # the bash call's wait for "Allow once" is its own segment, apart from its run; the reads asked nobody
    asking = calls.filter(has_text="bash echo traced")
    assert asking.locator(".bar.k-permission").count() == 1 and calls.locator(".bar.k-permission").count() == 1
    assert asking.locator(".bar.k-permission").bounding_box()["width"] > 0
    assert fall.locator(".legend .bar.k-permission").count() == 1
    # the chosen Step unfolded with its retry, times and tokens; the others folded until asked for
    step1, step3 = page.locator("details.trace-step").nth(0), page.locator("details.trace-step").nth(2)
    assert step1.get_attribute("open") is not None and step3.get_attribute("open") is None
    assert "attempt 2 after" in step1.inner_text() and "slow down, please" in step1.inner_text()
    assert "1,500 in · 20 out" in step1.locator(".usage").inner_text()
    assert "first token" in step1.inner_text() and "back-off" in step1.inner_text()
    bad = step1.locator("details.tool.error")
    bad.locator("summary").click()
    assert "missing.txt" in bad.locator("pre").first.inner_text() and bad.locator("p.error").count() == 1
    good = step1.locator("details.tool.completed")
    good.locator("summary").click()
    assert "alpha" in good.locator("pre.output").inner_text()
    # keyboard: a waterfall row's link leads to its Step, whose summary unfolds it with Enter
    step3.locator("summary").focus()
    page.keyboard.press("Enter")
    assert step3.get_attribute("open") is not None
    assert "Done" not in step3.inner_text() and "2,345 in" in step3.inner_text()
    step2 = page.locator("details.trace-step").nth(1)
    step2.locator("summary").first.click()
    assert "waiting for your permission" in step2.locator("p.meta").first.inner_text()
    waited = step2.locator("details.tool.completed .permission-wait")
    assert waited.count() == 1 and "for your permission, answered once" in " ".join(waited.text_content().split())
    shoot(page, tmp_path, "trace")
    page.set_viewport_size({"width": 375, "height": 740})
    shoot(page, tmp_path, "trace-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # the session's Step details count the wait apart from the tools too
    page.set_viewport_size({"width": 1100, "height": 800})
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Step details and event log").click()
    rows = page.locator("table.steps tbody tr.step")
    rows.first.wait_for()
    assert "waiting for your permission" in rows.nth(1).inner_text()
    assert "waiting for your permission" not in rows.nth(0).inner_text() + rows.nth(2).inner_text()
    # a Step the log does not have: said so, 404
    missing = api.get(f"/ui/session/{sid}/trace/msg_nothing")
    assert missing.status_code == 404 and "No such Step" in missing.text
    assert api.get("/ui/session/ses_nothing/trace/msg_nothing").status_code == 404
