"""The usage page in a real headless Chromium: reached from the sessions list, cost and tokens over the last day, week
or month with a chart drawn on the server, per model, per agent and per tool with its failures, narrowed to one
Location's project; a bad range or time zone is refused with its typed error."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_and_wait, shoot

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def test_usage_per_day_model_agent_and_tool_with_a_location_filter(page, api, ui_provider, tmp_path):
    here = create(api, title="Counted here")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_ok", "read", json.dumps({"path": "notes.txt"})),
                        fake.tool_call_deltas(1, "call_bad", "read", json.dumps({"path": "missing.txt"})),
                        finish_reason="tool_calls", usage=fake.usage_block(12000, 3000)),
        fake.completion(fake.text_deltas("Read."), usage=fake.usage_block(1000, 500)))
    prompt_and_wait(api, here, "Read both")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    there = create(api, title="Counted there", location={"directory": str(elsewhere)},
                   model={"providerID": "loop", "id": "other-model"})
    ui_provider.enqueue(fake.completion(fake.text_deltas("Priced."), usage=fake.usage_block(100_000, 20_000)))
    prompt_and_wait(api, there, "Cost something")

    page.goto("/")
    page.get_by_role("link", name="Usage", exact=True).click()
    page.wait_for_url("**/ui/usage")
    total = page.locator(".usage-total").inner_text()
    assert "2 sessions" in total and "3 Steps" in total and "113,000 in / 23,500 out" in total
    assert "$0.6000" in total  # 100,000 in at $3 and 20,000 out at $15 a million
    models = page.get_by_role("table", name="Per model")
    assert models.locator("tbody tr").first.locator("td").first.inner_text() == "loop/other-model"  # costliest first
    assert "loop/fake-model" in models.inner_text()
    assert "build" in page.get_by_role("table", name="Per agent").inner_text()
    tool = page.get_by_role("table", name="Per tool").locator("tbody tr").filter(has_text="read")
    assert [c.strip() for c in tool.locator("td").all_inner_texts()] == ["read", "2", "1 (50%)"]
    chart = page.get_by_role("img", name="Tokens per day", exact=False)
    bars = chart.locator("rect.in")
    assert bars.count() in (7, 8)  # the week's days, today's among them
    assert float(bars.last.get_attribute("height") or 0) > 100  # today holds all of it: the top of the scale
    assert float(bars.first.get_attribute("height") or 0) == 0
    shoot(page, tmp_path, "usage-week")

    page.get_by_label("Location").select_option(label=str(elsewhere))
    page.wait_for_url("**project=*")
    page.locator(".usage-total").get_by_text("1 session ·").wait_for()
    assert "100,000 in / 20,000 out" in page.locator(".usage-total").inner_text()
    assert "loop/fake-model" not in page.get_by_role("table", name="Per model").inner_text()
    assert "No tool calls in this range." in page.inner_text("#usage")

    page.get_by_role("radio", name="day").check()
    page.wait_for_url("**range=day*")
    hours = page.get_by_role("img", name="Tokens per hour", exact=False).locator("rect.in")
    assert hours.count() in (24, 25) and float(hours.last.get_attribute("height") or 0) > 100
    assert page.get_by_label("Location").input_value() != ""  # the filter kept
    page.set_viewport_size({"width": 375, "height": 740})
    shoot(page, tmp_path, "usage-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    # by keyboard: the ranges are radios one Tab away from each other control
    page.get_by_role("radio", name="month").focus()
    page.keyboard.press("Space")
    page.wait_for_url("**range=month*")
    assert page.get_by_role("img", name="Tokens per day", exact=False).locator("rect.in").count() in (30, 31)


def test_a_bad_range_or_time_zone_is_refused_with_its_typed_error(api):
    wrong = api.get("/ui/usage", params={"range": "year"})
    assert wrong.status_code == 400 and "InvalidRequestError: Unknown range" in wrong.text
    zone = api.get("/ui/usage", params={"timezone": "Mars/Olympus"})
    assert zone.status_code == 400 and "Unknown time zone" in zone.text
    fine = api.get("/ui/usage", params={"range": "month", "timezone": "Europe/Paris"})
    assert fine.status_code == 200 and "days in Europe/Paris" in fine.text
