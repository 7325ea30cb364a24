"""Starting a session from the inspector, in a real headless Chromium: the list's "New session" form (Location,
agent, model, optional title) opens the new session ready to type; a bad Location says why; and the list follows
sessions made and renamed elsewhere without a reload."""

from __future__ import annotations

import pytest

from tests.support import fake_openai as fake

from .conftest import create, shoot

pytestmark = pytest.mark.timeout(90)


def new_session_form(page):
    """The list's "New session" form, opened (it is open already while there are no sessions)."""
    form = page.locator("details.new-session")
    if not form.evaluate("d => d.open"):
        form.locator("summary").click()
    return page.locator("#create")


def test_a_new_session_starts_from_the_list_with_the_prompt_box_focused(page, api, ui_provider, tmp_path):
    page.set_viewport_size({"width": 375, "height": 740})  # a phone: the form fits
    page.goto("/")
    assert page.locator("details.new-session").evaluate("d => d.open")  # nothing here yet: the way to start shows
    form = new_session_form(page)
    location = form.get_by_label("Location")
    here = location.input_value()
    assert here, "the server's own Location is offered first"
    form.get_by_label("Agent").select_option("plan")
    form.get_by_label("Model").select_option("loop/other-model")
    form.get_by_label("Title").fill("Started from the list")
    shoot(page, tmp_path, "new-session-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    form.get_by_role("button", name="Create session").click()
    page.wait_for_url("**/ui/session/ses_*")
    sid = page.url.split("/ui/session/")[1].split("?")[0]
    page.wait_for_function("() => document.activeElement && document.activeElement.name === 'text'")
    made = api.get(f"/api/session/{sid}").json()["data"]
    assert (made["title"], made["agent"], made["model"], made["location"]["directory"]) == \
        ("Started from the list", "plan", {"providerID": "loop", "id": "other-model"}, here)
    assert page.locator("#crumb").inner_text() == "Started from the list"
    ui_provider.enqueue(fake.completion(fake.text_deltas("Planned.")))
    page.keyboard.type("Plan it")  # straight into the focused box
    page.keyboard.press("Enter")
    page.locator("#transcript").get_by_text("Planned.").wait_for()
    assert ui_provider.requests[-1].json["model"] == "other-model"


def test_a_location_that_does_not_exist_says_why(page, tmp_path):
    page.goto("/")
    form = new_session_form(page)
    missing = str(tmp_path / "not-there")
    form.get_by_label("Location").fill(missing)
    form.get_by_label("Location").press("Tab")  # a change: the choices of that Location are fetched
    form.get_by_text("does not exist", exact=False).wait_for()
    form.get_by_role("button", name="Create session").click()
    form.locator("#create-status.error").get_by_text("InvalidRequestError", exact=False).wait_for()
    assert page.url.endswith("/")


def test_the_list_follows_sessions_made_and_renamed_elsewhere(page, api, tmp_path):
    page.goto("/")
    sessions = page.locator("#sessions")
    made = create(api, title="Made in another client")
    sessions.get_by_text("Made in another client").wait_for()  # no reload
    assert api.patch(f"/api/session/{made}", json={"title": "Renamed in another client"}).status_code == 204
    sessions.get_by_text("Renamed in another client").wait_for()
    shoot(page, tmp_path, "list-live")
    # the filters still hold: a session the search does not match stays out when the list follows a change
    page.get_by_label("Search sessions").fill("Kept by the search")
    sessions.get_by_text("No sessions match").wait_for()
    create(api, title="Left out by the search")
    create(api, title="Kept by the search")  # shown: the list fetched its rows after both were made
    sessions.get_by_text("Kept by the search").wait_for()
    assert sessions.get_by_text("Left out by the search").count() == 0
