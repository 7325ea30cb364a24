"""The session page's inspecting parts in a real headless Chromium: the header's agent and model switches and the
context gauge, questions answered from the tray (and seen at once in another tab), the queued inbox, `/compact` and
commands from the prompt box, transcript markers and tool cards, Step details with the raw log, and older pages."""

from __future__ import annotations

import json
import time

import pytest

from opencode_session.schema.ids import message_id, session_id
from tests.support import fake_openai as fake

from .conftest import create, prompt_and_wait, shoot

pytestmark = pytest.mark.timeout(120)



def test_the_header_switches_agent_and_model_and_shows_the_context_used(page, api, ui_provider, tmp_path):
    sid = create(api, title="Switching")
    ui_provider.enqueue(fake.completion(fake.text_deltas("Counted."), usage=fake.usage_block(1200, 300)))
    prompt_and_wait(api, sid, "Count the tokens")
    page.goto(f"/ui/session/{sid}")
    gauge = page.get_by_role("meter", name="Context used")
    assert "1,500 / 100,000 (2%)" in gauge.inner_text()  # the newest Step's window against the model's limit
    assert "1,200 in / 300 out" in page.locator(".stats").inner_text()  # thousands apart
    page.get_by_label("Model").select_option("loop/other-model")
    page.locator("#switch-status").get_by_text("model: loop/other-model").wait_for()
    page.locator("#transcript .marker").get_by_text("Model: loop/other-model").wait_for()  # live, as a marker
    assert api.get(f"/api/session/{sid}").json()["data"]["model"]["id"] == "other-model"
    page.get_by_label("Agent").select_option("plan")
    page.locator("#transcript .marker").get_by_text("Agent: plan").wait_for()
    assert api.get(f"/api/session/{sid}").json()["data"]["agent"] == "plan"
    # a model the catalog does not have (a stale page, say) is refused with the API's typed error
    page.evaluate("""() => { const s = document.querySelector('select[name=model]');
                             s.add(new Option('loop/no-such-model', 'loop/no-such-model')); }""")
    page.get_by_label("Model").select_option("loop/no-such-model")
    page.locator("#switch-status.error").get_by_text("InvalidRequestError", exact=False).wait_for()
    assert api.get(f"/api/session/{sid}").json()["data"]["model"]["id"] == "other-model"
    shoot(page, tmp_path, "switches")


def test_a_question_is_answered_from_the_tray_and_another_tab_sees_it(page, api, ui_provider, tmp_path):
    sid = create(api, title="Choosing")
    question = {"questions": [{"question": "Which colour should the button be?", "header": "Colour",
                               "options": [{"label": "Blue", "description": "calm"},
                                           {"label": "Red", "description": "loud"}]}]}
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_q", "question", json.dumps(question)),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Blue it is.")))
    other = page.context.new_page()
    page.goto(f"/ui/session/{sid}")
    other.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    other.get_by_text("Nothing here yet").wait_for()
    assert api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": "Pick a colour"}}).status_code == 200
    tray = page.get_by_role("region", name="Needs you")
    tray.get_by_text("Which colour should the button be?").wait_for()
    other_tray = other.get_by_role("region", name="Needs you")
    other_tray.get_by_text("Which colour should the button be?").wait_for()
    page.locator(".stats").get_by_text("waiting on you").wait_for()
    page.set_viewport_size({"width": 375, "height": 740})
    shoot(page, tmp_path, "question-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    tray.get_by_label("Blue").check()
    tray.get_by_role("button", name="Answer").click()
    other.locator("#transcript").get_by_text("Blue it is.").wait_for()  # the other tab: answered, at once
    assert other_tray.count() == 0 and tray.count() == 0
    assert any("Blue" in json.dumps(r.json) for r in ui_provider.requests)  # the model read the answer
    assert api.get(f"/api/session/{sid}/question").json()["data"] == []
    other.close()


def test_a_question_dismissed_from_the_tray_fails_its_call(page, api, ui_provider):
    sid = create(api, title="Dismissing")
    question = {"questions": [{"question": "Deploy now?", "header": "Deploy",
                               "options": [{"label": "Yes", "description": "go"}]}]}
    ui_provider.enqueue(fake.completion(fake.tool_call_deltas(0, "call_q", "question", json.dumps(question)),
                                        finish_reason="tool_calls"))
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Prompt").fill("Deploy?")
    page.get_by_role("button", name="Send").click()
    tray = page.get_by_role("region", name="Needs you")
    tray.get_by_text("Deploy now?").wait_for()
    tray.get_by_role("button", name="Dismiss").click()
    page.locator("details.tool.error summary").get_by_text("question").wait_for()
    page.locator(".stats").get_by_text("idle").wait_for()
    assert tray.count() == 0


def test_a_queued_prompt_waits_in_the_inbox_and_is_cancelled_from_it(page, api, ui_provider, tmp_path):
    sid = create(api, title="Queueing")
    held = fake.completion(fake.text_deltas("Working on ", "the first thing."), hold_after=2)
    ui_provider.enqueue(held)
    page.goto(f"/ui/session/{sid}")
    page.get_by_label("Prompt").fill("Do the first thing")
    page.get_by_role("button", name="Send").click()
    page.locator("#transcript .msg.assistant .streamed").get_by_text("Working on").wait_for()
    page.get_by_label("Delivery").select_option("queue")
    page.get_by_label("Prompt").fill("Then the second thing")
    page.get_by_role("button", name="Send").click()
    page.locator("#prompt-status").get_by_text("sent (queue)").wait_for()
    inbox = page.get_by_role("region", name="Queued")
    queued = inbox.locator(".queued").filter(has_text="Then the second thing")
    queued.wait_for()
    assert queued.locator(".badge").inner_text() == "queue"
    shoot(page, tmp_path, "inbox")
    queued.get_by_role("button", name="Cancel").click()
    inbox.wait_for(state="detached")
    held.release.set()
    page.locator("#transcript .markdown").get_by_text("Working on the first thing.").wait_for()
    page.locator(".stats").get_by_text("idle").wait_for()
    assert api.get(f"/api/session/{sid}/inbox").json()["data"] == []
    assert page.locator("#transcript").get_by_text("Then the second thing").count() == 0  # it never ran


def test_compact_and_a_command_from_the_prompt_box(page, api, ui_provider, tmp_path):
    sid = create(api, title="Commands")
    ui_provider.enqueue(fake.completion(fake.text_deltas("Noted.")))
    prompt_and_wait(api, sid, "Remember the number 7")
    ui_provider.enqueue(fake.completion(fake.text_deltas("Still noted.")))
    prompt_and_wait(api, sid, "And 8")  # two exchanges: the older one is what compaction summarises
    page.goto(f"/ui/session/{sid}")
    page.locator("#transcript").get_by_text("Still noted.").wait_for()
    page.get_by_label("Prompt").fill("/compact")
    page.get_by_role("button", name="Send").click()
    marker = page.locator("#transcript details.marker.compaction")
    marker.get_by_text("Compacted (manual, completed)").wait_for()
    assert marker.count() == 1
    marker.locator("summary").click()
    assert "Next Move" in marker.inner_text()  # the summary (the loopback provider's own) is there to read
    ui_provider.enqueue(fake.completion(fake.text_deltas("Hello, Ada!")))
    page.get_by_label("Prompt").fill("/greet Ada")
    page.get_by_role("button", name="Send").click()
    page.locator("#transcript .msg.user").get_by_text("Say hello to Ada politely").wait_for()  # the expansion
    page.locator("#transcript").get_by_text("Hello, Ada!").wait_for()
    page.get_by_label("Prompt").fill("/no-such-command now")
    page.get_by_role("button", name="Send").click()
    page.locator("#prompt-status").get_by_text("No command /no-such-command here", exact=False).wait_for()
    assert "/greet" in page.locator("#prompt-status").inner_text()  # it says which there are
    assert page.get_by_label("Prompt").input_value() == "/no-such-command now"
    shoot(page, tmp_path, "commands")


def test_markers_reasoning_and_tool_cards_with_the_whole_output(page, api, ui_provider, tmp_path):
    home = tmp_path / "project"
    home.mkdir()
    (home / "AGENTS.md").write_text("Answer briefly.\n")
    allow = [{"action": "bash", "resource": "*", "effect": "allow"}]
    sid = create(api, title="Markers", location={"directory": str(home)}, permissions=allow)
    ui_provider.enqueue(fake.completion(fake.reasoning_deltas("The user wants numbers."),
                                        fake.text_deltas("Here they come.")))
    prompt_and_wait(api, sid, "Think first")
    (home / "AGENTS.md").write_text("Answer briefly.\nAlways count to ten.\n")  # changed between two Steps
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_seq", "bash",
                                              json.dumps({"command": "seq 1 5000", "description": "count"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("Counted to 5000.")))
    prompt_and_wait(api, sid, "Count far")
    page.goto(f"/ui/session/{sid}")
    transcript = page.locator("#transcript")
    transcript.get_by_text("Counted to 5000.").wait_for()
    reasoning = transcript.locator("details.reasoning")
    assert not reasoning.locator(".text").is_visible()  # folded until asked for
    reasoning.locator("summary").click()
    assert reasoning.locator(".text").inner_text() == "The user wants numbers."
    instructions = transcript.locator("details.marker.instructions")
    assert "Instructions updated" in instructions.locator("summary").inner_text()
    instructions.locator("summary").click()
    assert "Always count to ten." in instructions.inner_text()
    card = transcript.locator("details.tool.completed")
    summary = card.locator("summary").inner_text()
    assert "bash" in summary and "completed" in summary and (" ms" in summary or " s" in summary)  # how long
    card.locator("summary").click()
    shown = card.locator("pre.output").inner_text()
    assert shown.startswith("1\n") and "4999" in shown and "truncated" in shown  # head and tail, not the middle
    link = card.get_by_role("link", name="Whole output")
    whole = api.get(link.get_attribute("href") or "")
    assert whole.status_code == 200 and whole.text.split() == [str(n) for n in range(1, 5001)]
    shoot(page, tmp_path, "markers")
    assert api.get(f"/ui/session/{sid}/output/msg_x/call_x").status_code == 404


def test_step_details_and_the_event_log_filtered_by_type(page, api, ui_provider, tmp_path):
    sid = create(api, title="Steps")
    ui_provider.enqueue(fake.completion(fake.text_deltas("First answer."),
                                        usage=fake.usage_block(900, 40, cached_tokens=100, reasoning_tokens=5)))
    prompt_and_wait(api, sid, "One")
    ui_provider.enqueue(fake.error(400, "the request was malformed", type="invalid_request_error"))
    prompt_and_wait(api, sid, "Two")
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Step details and event log").click()
    steps = page.locator("table.steps tbody tr.step")
    steps.first.wait_for()
    assert steps.count() == 2
    first = steps.nth(0).inner_text()
    assert "loop/fake-model" in first and "cache 100 read" in first and "5 reasoning" in first
    assert "first token" in first and "streaming" in first and "tools" in first and "back-off" in first
    failed = page.locator("tr.step-error").inner_text()
    assert "the request was malformed" in failed and "HTTP 400" in failed  # the failed Step's typed error
    assert page.locator("tr.step.failed").count() == 1
    page.get_by_label("Event type").select_option("session.step.ended")
    page.locator(".log-filter").get_by_text("1 shown").wait_for()
    events = page.locator("ol.events > li")
    assert events.count() == 1 and "session.step.ended" in events.inner_text()
    events.locator("summary").click()
    assert '"finish": "stop"' in events.locator("pre").inner_text()
    page.get_by_label("Event type").select_option("")
    page.wait_for_function("() => document.querySelectorAll('ol.events > li').length > 5")  # all types again
    assert page.locator("ol.events > li").filter(has_text="session.input.admitted").count() == 2
    shoot(page, tmp_path, "details")


# when the page first painted, in ms from its navigation (waiting for the entry: it may be recorded after `load`)
FIRST_PAINT = """() => new Promise(resolve => {
    new PerformanceObserver((list, observer) => {
        const fcp = list.getEntries().find(e => e.name === 'first-contentful-paint');
        if (fcp) { observer.disconnect(); resolve(fcp.startTime); }
    }).observe({type: 'paint', buffered: true});
})"""


def test_a_long_transcript_pages_in_and_paints_fast(page, api, tmp_path):
    blank = create(api, title="Long")
    exported = api.get(f"/api/experimental/session/{blank}/export").json()["data"]
    messages = []
    for n in range(1, 2001):
        base = {"id": message_id(), "time": {"created": 1_700_000_000_000 + n}}
        messages.append({**base, "type": "user", "text": f"message {n}"} if n % 2 else
                        {**base, "type": "assistant", "agent": "build",
                         "model": {"providerID": "loop", "id": "fake-model"},
                         "content": [{"type": "text", "id": f"t{n}", "text": f"message {n}"}],
                         "time": {**base["time"], "completed": base["time"]["created"]}})
    info = {**exported["info"], "id": session_id(), "title": "Two thousand"}
    answer = api.post("/api/experimental/session/import", json={"info": info, "messages": messages}, timeout=60)
    assert answer.status_code == 200, answer.text
    sid = answer.json()["data"]["id"]
    renders = []
    for _ in range(5):  # the server's part of first paint: the page with its newest 100 messages, on loopback
        begun = time.perf_counter()
        assert api.get(f"/ui/session/{sid}").status_code == 200
        renders.append((time.perf_counter() - begun) * 1000)
    page.goto(f"/ui/session/{blank}")
    baseline = page.evaluate(FIRST_PAINT)
    paints = []
    transcript = page.locator("#transcript")
    for _ in range(3):  # the first load of a fresh browser context also pays for starting its renderer
        page.goto(f"/ui/session/{sid}")
        transcript.get_by_text("message 2000", exact=True).wait_for()
        response = "() => { const nav = performance.getEntriesByType('navigation')[0]; return nav.responseEnd; }"
        paints.append({"paint": page.evaluate(FIRST_PAINT), "response": page.evaluate(response)})
    print(f"first paint of an empty session: {baseline:.0f} ms")
    print(f"first paint of a 2,000-message session (newest page): {[round(p['paint']) for p in paints]} ms in the "
          f"browser, of which the response {[round(p['response']) for p in paints]} ms; server render "
          f"{sorted(round(r) for r in renders)} ms")
    # the budget is 300 ms on loopback; on a loaded machine an empty page alone can take most of that, so what is
    # held to it is the server's render and what the transcript adds to the empty page's paint
    assert sorted(renders)[len(renders) // 2] < 300
    assert min(p["paint"] for p in paints) - baseline < 300
    assert transcript.locator(".msg").count() == 100  # only the newest page is rendered at first
    assert transcript.get_by_text("message 1900", exact=True).count() == 0
    page.get_by_role("button", name="Load earlier messages").first.click()
    page.locator("#earlier").get_by_text("message 1801", exact=True).wait_for()
    page.evaluate("window.scrollTo(0, 400)")
    page.evaluate("window.scrollTo(0, 0)")  # scrolled up to the top: the next page loads by itself
    page.locator("#earlier").get_by_text("message 1701", exact=True).wait_for()
    shoot(page, tmp_path, "long")
    page.evaluate("window.scrollTo(0, 0)")  # at the very top, where the browser's scroll anchoring does not act
    page.locator("#earlier").get_by_text("message 1601", exact=True).wait_for()
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    assert page.evaluate("window.scrollY") > 1000  # the reader stays at what they read, the new page above it
    assert page.locator(".live article.msg").count() == 400  # one page per visit to the top
    while page.get_by_text("The session begins here.").count() == 0:  # each return to the top loads one more
        shown = page.locator(".live article.msg").count()
        page.evaluate("window.scrollTo(0, 0)")
        more = ("n => document.querySelectorAll('.live article.msg').length > n"
                " || document.getElementById('earlier').textContent.includes('The session begins here.')")
        page.wait_for_function(more, arg=shown)
    assert page.locator(".live article.msg").count() == 2000  # all of them, each once
    assert page.locator("#earlier").get_by_text("message 1", exact=True).count() == 1
