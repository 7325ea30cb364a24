"""A session page's header and outcome as they change, in a real headless Chromium: a rename (from the page or
elsewhere) shows in the breadcrumb and the tab's title at once, and an execution that fails before its first Step
shows its typed error where the answer would be."""

from __future__ import annotations

from collections.abc import Iterator

import httpx2
import pytest

from tests.support.server import ServerProcess, start_configured

from .conftest import PASSWORD, create, log_in, shoot

pytestmark = pytest.mark.timeout(90)


def test_a_rename_shows_in_the_breadcrumb_and_the_title_at_once(page, api):
    sid = create(api, title="Draft name")
    page.goto(f"/ui/session/{sid}")
    assert page.title() == "Draft name · opencode-session"
    page.get_by_label("Title").fill("Final name")
    page.get_by_role("button", name="Rename").click()
    page.locator("#crumb").get_by_text("Final name").wait_for()
    page.wait_for_function("() => document.title === 'Final name · opencode-session'")
    # renamed elsewhere (another tab, a client): this page follows without a reload
    assert api.patch(f"/api/session/{sid}", json={"title": "Renamed by the API"}).status_code == 204
    page.locator("#crumb").get_by_text("Renamed by the API").wait_for()
    page.wait_for_function("() => document.title === 'Renamed by the API · opencode-session'")
    assert page.get_by_label("Title").input_value() == "Renamed by the API"


@pytest.fixture(scope="module")
def modelless(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server whose configuration names no model: an execution there fails before its first Step."""
    srv, _work = start_configured(tmp_path_factory.mktemp("modelless"), {}, OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_an_execution_failing_before_its_first_step_shows_its_error(browser, modelless, tmp_path):
    context = browser.new_context(base_url=modelless.url, viewport={"width": 375, "height": 740})
    context.set_default_timeout(15_000)
    page = context.new_page()
    log_in(page)
    with httpx2.Client(base_url=modelless.url, auth=("opencode", PASSWORD), timeout=30) as api:
        sid = create(api, title="No model here")
        page.goto(f"/ui/session/{sid}")
        page.get_by_text("Nothing here yet").wait_for()
        page.get_by_label("Prompt").fill("Anyone?")
        page.get_by_label("Prompt").press("Enter")
        page.locator("#transcript .msg.user").get_by_text("Anyone?").wait_for()
        failed = api.post(f"/api/session/{sid}/wait?outcome=true", timeout=40)
        assert failed.status_code == 422, failed.text
        assert [m["type"] for m in api.get(f"/api/session/{sid}/message").json()["data"]] == ["user"]  # no answer
    unanswered = page.locator("#transcript article.unanswered")
    unanswered.get_by_text("No model is configured", exact=False).wait_for()  # the typed error, in the answer's place
    assert unanswered.locator(".error").inner_text().startswith("provider.no-model: No model is configured")
    assert page.locator("#transcript article.msg").last.evaluate("e => e.classList.contains('unanswered')")
    page.locator(".stats").get_by_text("failed").wait_for()
    shoot(page, tmp_path, "unanswered-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    context.close()
