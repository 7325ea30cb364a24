"""The browser inspector in a real headless Chromium: the session list, a transcript, a prompt sent from the page
whose answer streams in, rename and delete; and the page behind the password and the Origin guard."""

from __future__ import annotations

import json

import httpx2
import pytest

from tests.support import fake_openai as fake

from .conftest import PASSWORD, create, prompt_and_wait, shoot

pytestmark = pytest.mark.timeout(90)



def test_the_page_lists_sessions_with_children_and_searches_titles(page, api, tmp_path):
    parent = create(api, title="Alpha refactor")
    create(api, title="Alpha child task", parentID=parent)
    create(api, title="Beta release notes")
    page.goto("/")
    sessions = page.locator("#sessions")
    sessions.get_by_text("Beta release notes").wait_for()
    assert page.locator(".children").get_by_text("Alpha child task").is_visible()
    shoot(page, tmp_path, "sessions")
    page.get_by_label("Search sessions").fill("Beta")
    sessions.get_by_text("Alpha refactor").wait_for(state="detached")
    assert sessions.get_by_text("Beta release notes").is_visible()
    page.get_by_label("Search sessions").fill("")
    sessions.get_by_text("Alpha refactor").wait_for()


def test_the_list_shows_each_status_and_filters_by_it_and_by_location(page, api, ui_provider, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    calm = create(api, title="Status calm", location={"directory": str(elsewhere)})
    ui_provider.enqueue(fake.completion(fake.text_deltas("Fine.")))
    prompt_and_wait(api, calm, "Anything?")
    broken = create(api, title="Status broken")
    ui_provider.enqueue(fake.error(400, "the request was malformed", type="invalid_request_error"))
    prompt_and_wait(api, broken, "Fail")
    asking = create(api, title="Status asking")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_w", "bash", json.dumps({"command": "true", "description": "x"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Done asking.")))
    assert api.post(f"/api/session/{asking}/prompt", json={"prompt": {"text": "Run it"}}).status_code == 200
    page.goto(f"/ui/session/{asking}")
    page.get_by_role("region", name="Needs you").wait_for()  # it waits on a permission now
    page.goto("/")
    sessions = page.locator("#sessions")

    def badge(title: str) -> str:
        return sessions.locator("a.session").filter(has_text=title).locator(".badge").text_content() or ""

    assert (badge("Status calm"), badge("Status broken"), badge("Status asking")) == ("idle", "failed", "waiting")
    shoot(page, tmp_path, "statuses")
    page.get_by_label("Status").select_option("failed")
    sessions.get_by_text("Status asking").wait_for(state="detached")
    assert sessions.get_by_text("Status broken").is_visible() and sessions.get_by_text("Status calm").count() == 0
    page.get_by_label("Status").select_option("")
    page.get_by_role("search").get_by_label("Location").select_option(str(elsewhere))
    sessions.get_by_text("Status broken").wait_for(state="detached")
    assert [t.strip() for t in sessions.locator("a.session .title").all_text_contents()] == ["Status calm"]
    page.get_by_label("Status").select_option("waiting")  # both at once: nothing here waits
    sessions.get_by_text("No sessions match").wait_for()
    [ask] = api.get(f"/api/session/{asking}/permission").json()["data"]
    assert api.post(f"/api/session/{asking}/permission/{ask['id']}/reply",
                    json={"reply": "once"}).status_code in (200, 204)
    assert api.post(f"/api/session/{asking}/wait", timeout=40).status_code == 204


def test_opening_a_session_shows_its_transcript_with_tool_calls(page, api, ui_provider, tmp_path):
    sid = create(api, title="Reading notes")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "read", json.dumps({"path": "notes.txt"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The file says **alpha** and beta.\n\n```\nalpha\n```\n<b>raw</b>")))
    prompt_and_wait(api, sid, "What does notes.txt say?")
    page.goto("/")
    page.get_by_text("Reading notes").click()
    transcript = page.locator("#transcript")
    transcript.get_by_text("What does notes.txt say?").wait_for()
    transcript.get_by_text("The file says alpha and beta.").wait_for()
    answer = transcript.locator(".markdown")
    assert answer.locator("strong").inner_text() == "alpha" and answer.locator("pre code").inner_text() == "alpha\n"
    # the model's HTML is shown as text, never made into elements
    assert "<b>raw</b>" in answer.inner_text() and answer.locator("b").count() == 0
    tool = transcript.locator("details.tool")
    assert "read" in tool.locator("summary").inner_text() and "completed" in tool.inner_text()
    tool.locator("summary").click()
    assert "notes.txt" in tool.locator("pre").first.inner_text()
    assert "beta" in tool.locator("pre").nth(1).inner_text()
    shoot(page, tmp_path, "session")


def test_a_prompt_sent_from_the_page_streams_its_answer(page, api, ui_provider, tmp_path):
    sid = create(api, title="Streaming")
    held = fake.completion(fake.text_deltas("Hello from ", "the loopback model."), hold_after=2)
    ui_provider.enqueue(held)
    errors: list[str] = []  # a script the page's Content-Security-Policy refused would be one
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    page.get_by_label("Prompt").fill("Say hello")
    page.get_by_role("button", name="Send").click()
    page.locator("#transcript").get_by_text("Say hello").wait_for()
    # the first piece is shown while the provider still holds the rest of the answer
    page.locator("#transcript .msg.assistant .streamed").get_by_text("Hello from").wait_for()
    shoot(page, tmp_path, "streaming")
    held.release.set()
    page.locator("#transcript .msg.assistant .markdown").get_by_text("Hello from the loopback model.").wait_for()
    page.locator(".stats").get_by_text("idle").wait_for()
    assert page.get_by_label("Prompt").input_value() == ""
    shoot(page, tmp_path, "answered")
    assert errors == []


def test_the_diff_of_a_write_turn_opens_from_the_transcript(page, api, ui_provider, tmp_path):
    sid = create(api, title="Writing")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "write",
                                              json.dumps({"path": "poem.txt", "content": "roses\nviolets\n"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Wrote the poem.")))
    prompt_and_wait(api, sid, "Write a poem")
    page.goto(f"/ui/session/{sid}")
    page.locator("#transcript").get_by_text("Wrote the poem.").wait_for()
    page.get_by_role("button", name="Changes of this turn").click()
    changed = page.locator(".msg.user .diff details.file")
    changed.locator("summary").get_by_text("poem.txt").wait_for()
    assert "added" in changed.locator("summary").inner_text() and "+2" in changed.locator("summary").inner_text()
    assert "+roses" in changed.locator(".patch").inner_text()
    shoot(page, tmp_path, "diff")
    page.get_by_role("button", name="Changes of the session").click()
    page.locator(".stats + .diff summary").get_by_text("poem.txt").wait_for()


def test_a_permission_is_answered_from_the_tray(page, api, ui_provider, tmp_path):
    sid = create(api, title="Asking")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "bash",
                                              json.dumps({"command": "echo tray-ok", "description": "say it"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The command said tray-ok.")))
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Prompt").fill("Run echo")
    page.get_by_role("button", name="Send").click()
    tray = page.get_by_role("region", name="Needs you")
    tray.get_by_text("echo tray-ok").wait_for()
    page.locator(".stats").get_by_text("waiting on you").wait_for()
    shoot(page, tmp_path, "tray")
    tray.get_by_role("button", name="Allow once").click()
    page.locator("#transcript").get_by_text("The command said tray-ok.").wait_for()
    assert tray.count() == 0  # answered: the tray is gone
    assert "tray-ok" in (page.locator("details.tool pre").nth(1).text_content() or "")  # the card is folded
    assert api.get(f"/api/session/{sid}/permission").json()["data"] == []


def test_a_permission_rejected_from_the_tray_tells_the_model_why(page, api, ui_provider):
    sid = create(api, title="Refusing")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "bash",
                                              json.dumps({"command": "rm -rf build", "description": "clean"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Understood, I left it.")))
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Prompt").fill("Clean up")
    page.get_by_role("button", name="Send").click()
    tray = page.get_by_role("region", name="Needs you")
    tray.get_by_text("rm -rf build").wait_for()
    tray.get_by_label("Feedback").fill("keep the build directory")
    tray.get_by_role("button", name="Reject").click()
    page.locator("#transcript").get_by_text("Understood, I left it.").wait_for()
    assert "error" in page.locator("details.tool summary").inner_text()
    assert any("keep the build directory" in json.dumps(r.json) for r in ui_provider.requests)  # the model was told


def test_rename_and_delete_from_the_page(page, api):
    sid = create(api, title="Old name")
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Title").fill("New name")
    page.get_by_role("button", name="Rename").click()
    page.locator("#prompt-status").get_by_text("renamed").wait_for()
    assert api.get(f"/api/session/{sid}").json()["data"]["title"] == "New name"
    page.on("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Delete").click()
    page.wait_for_url("**/")
    assert api.get(f"/api/session/{sid}").status_code == 404
    page.goto(f"/ui/session/{sid}")
    page.get_by_text(f"No session {sid}").wait_for()


def test_the_page_and_its_files_need_the_password(ocs):
    for path in ("/", "/ui/static/vendor/htmx.min.js", "/ui/session/ses_x"):
        answer = httpx2.get(ocs.url + path)
        assert answer.status_code == 401, path
        assert answer.headers["www-authenticate"].startswith("Basic")
        assert httpx2.get(ocs.url + path, auth=("opencode", "wrong")).status_code == 401
    answer = httpx2.get(ocs.url + "/", auth=("opencode", PASSWORD))
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in answer.headers["content-security-policy"]


def test_a_foreign_origin_is_refused(ocs, api):
    sid = create(api, title="Guarded")
    foreign = {"Origin": "http://evil.example"}
    assert api.get("/", headers=foreign).status_code == 403
    assert api.get(f"/ui/session/{sid}/live", headers=foreign).status_code == 403
    refused = api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "x"}}, headers=foreign)
    assert refused.status_code == 403
    assert api.get(f"/api/session/{sid}/message").json()["data"] == []  # nothing was admitted


def test_interrupt_from_the_page_stops_a_running_answer(page, api, ui_provider, tmp_path):
    sid = create(api, title="Long answer")
    held = fake.completion(fake.text_deltas("Thinking about ", "it for a long time."), hold_after=2)
    ui_provider.enqueue(held)
    page.set_viewport_size({"width": 375, "height": 740})  # a phone: the page must still be usable
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Prompt").fill("Take your time")
    page.get_by_label("Prompt").press("Control+Enter")
    page.locator("#transcript .msg.assistant .streamed").get_by_text("Thinking about").wait_for()
    page.get_by_role("button", name="Interrupt").click()
    page.locator("#prompt-status").get_by_text("interrupted").wait_for()
    page.locator(".stats").get_by_text("idle").wait_for()
    held.release.set()
    shoot(page, tmp_path, "interrupted-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # nothing wider than the screen


def test_a_session_that_does_not_exist(page, api):
    answer = page.goto("/ui/session/ses_missing")
    assert answer is not None and answer.status == 404
    page.get_by_text("No session ses_missing").wait_for()
    assert api.get("/ui/session/ses_missing/live").status_code == 404
    assert api.get("/ui/session/ses_missing/diff").status_code == 404


def test_sending_to_a_deleted_session_says_why(page, api):
    sid = create(api, title="Soon gone")
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    assert api.delete(f"/api/session/{sid}").status_code == 204
    page.get_by_label("Prompt").fill("anyone there?")
    page.get_by_role("button", name="Send").click()
    status = page.locator("#prompt-status")
    status.get_by_text("not found", exact=False).wait_for()
    assert page.get_by_label("Prompt").input_value() == "anyone there?"  # kept, to send elsewhere
