"""What the model saw, in a real headless Chromium: linked from each answer (and each Step of a trace), a Step's
recorded Model Context in sections keyed by source, each marked against the session's previous Step (an option
changed after a model switch with its line diff, the history added to, and cut by a compaction), the sections that
moved open and the others folded, reachable with the keyboard, readable at 375 px and in the dark theme; a Step with
no record (a fork's) says why in a sentence."""

from __future__ import annotations

import json

import pytest

from tests.support import fake_openai as fake

from .conftest import create, prompt_and_wait, shoot

pytestmark = [pytest.mark.timeout(150), pytest.mark.slow]


def answers_of(api, sid: str) -> list[str]:
    page = api.get(f"/api/session/{sid}/message", params={"limit": 200, "order": "asc"})
    assert page.status_code == 200, page.text
    return [m["id"] for m in page.json()["data"] if m["type"] == "assistant"]


def test_what_the_model_saw_per_step_and_what_changed_since_the_step_before(page, api, ui_provider, tmp_path):
    sid = create(api, title="Seen")
    ui_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_read", "read", json.dumps({"path": "notes.txt"})),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The notes say alpha and beta.")),
        fake.completion(fake.text_deltas("Still alpha and beta.")),
        fake.completion(fake.text_deltas("Third time: the same.")))
    prompt_and_wait(api, sid, "Read the notes")  # Step 1 calls read, Step 2 answers
    switched = api.post(f"/api/session/{sid}/model", json={"model": {"providerID": "loop", "id": "other-model"}})
    assert switched.status_code in (200, 204), switched.text
    prompt_and_wait(api, sid, "And again")  # Step 3: another model, a longer history
    assert api.post(f"/api/session/{sid}/compact").status_code in (200, 204)
    assert api.post(f"/api/session/{sid}/wait", timeout=40).status_code == 204
    prompt_and_wait(api, sid, "Once more")  # Step 4: the history the compaction cut
    steps = answers_of(api, sid)
    assert len(steps) == 4

    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto(f"/ui/session/{sid}")
    answers = page.locator("#transcript article.msg.assistant")
    answers.last.get_by_text("Third time: the same.").wait_for()
    assert answers.count() == 4 and answers.get_by_role("link", name="Context").count() == 4  # from each answer
    answers.nth(2).get_by_role("link", name="Context").click()
    page.wait_for_url(f"**/ui/session/{sid}/context/{steps[2]}")
    assert page.title().startswith("What the model saw · Seen")
    assert "Step 3 of 4" in page.locator("h1").inner_text()
    assert "loop/other-model" in page.locator(".ctx-head").inner_text()

    # the options changed with the model: open, the model's ID marked changed with its line diff
    options = page.locator("details#ctx-options")
    assert options.get_attribute("open") is not None
    model = options.locator(".ctx-item.k-changed", has_text="modelID")
    assert model.locator(".mark.changed").inner_text().lower() == "changed"
    assert model.locator(".patch .del").inner_text().strip() == '-fake-model'
    assert model.locator(".patch .add").inner_text().strip() == '+other-model'
    # the history grew by the new prompt and the answer before it, each linked to its message; the rest unchanged
    history = page.locator("details#ctx-history")
    assert history.get_attribute("open") is not None
    added = history.locator(".ctx-item.k-added")
    assert added.count() >= 2 and added.locator(".mark.added").count() == added.count()
    assert history.locator(".ctx-item.k-same").count() >= 1
    assert history.locator(f'a[href="/ui/session/{sid}#m-{steps[1]}"]').count() == 1
    # each message by what it says: the prompt's text, the answer's, the call it made, the switch
    said = history.locator(".gist").all_inner_texts()
    assert {"Read the notes", "[read]", "The notes say alpha and beta.", "loop/other-model", "And again"} <= set(said)
    # the tools did not change: folded, and it opens from the keyboard
    tools = page.locator("details#ctx-tools")
    assert tools.get_attribute("open") is None and "unchanged" in tools.locator("> summary").inner_text()
    tools.locator("> summary").focus()
    page.keyboard.press("Enter")
    assert tools.get_attribute("open") is not None
    assert tools.locator(".ctx-item", has_text="read").first.is_visible()
    assert page.locator("details#ctx-instructions").get_attribute("open") is None  # the baseline held
    # the request body as sent: its size, folded
    body = page.locator("details#ctx-request")
    assert body.get_attribute("open") is None and "bytes" in body.locator("> summary").inner_text()
    assert page.locator("script:not([src])").count() == 0 and not errors, errors  # nothing inline, nothing refused
    shoot(page, tmp_path, "context")
    page.set_viewport_size({"width": 375, "height": 740})
    shoot(page, tmp_path, "context-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375

    # after the compaction: what the history lost is listed as removed
    page.get_by_role("link", name="Step 4 →").click()
    page.wait_for_url(f"**/context/{steps[3]}")
    removed = page.locator("details#ctx-history .ctx-item.k-removed")
    assert removed.count() >= 2 and removed.locator(".mark.removed").count() == removed.count()
    assert page.locator("details#ctx-history .ctx-item.k-added .meta", has_text="compaction").count() == 1
    shoot(page, tmp_path, "context-after-compaction")
    # the first Step: everything is new, nothing to compare with
    page.goto(f"/ui/session/{sid}/context/{steps[0]}")
    assert "nothing before it to compare with" in page.locator(".ctx-head").inner_text()
    assert page.locator(".ctx-section[open]").count() == 0 and page.locator(".mark").count() == 0
    assert page.get_by_role("link", name="← Step").count() == 0

    # from the trace: each Step links to what its model saw
    page.goto(f"/ui/session/{sid}/trace/{steps[0]}")
    page.locator("details.trace-step").first.get_by_role("link", name="What the model saw").click()
    page.wait_for_url(f"**/context/{steps[0]}")

    # a fork's Steps recorded nothing: a plain sentence says why, not an error page
    forked = api.post(f"/api/session/{sid}/fork", json={})
    assert forked.status_code == 200, forked.text
    fork = forked.json()["data"]["id"]
    copied = answers_of(api, fork)
    assert copied
    answer = api.get(f"/ui/session/{fork}/context/{copied[0]}")
    assert answer.status_code == 200 and "No record of what this Step sent" in answer.text
    page.goto(f"/ui/session/{fork}/context/{copied[0]}")
    assert "fork or an import" in page.locator(".ctx-none").inner_text()
    assert page.locator("details.ctx-section").count() == 0
    # a message that is not a Step, a session that does not exist: said so, 404
    prompts = [m["id"] for m in api.get(f"/api/session/{sid}/message", params={"limit": 200}).json()["data"]
               if m["type"] == "user"]
    assert api.get(f"/ui/session/{sid}/context/{prompts[0]}").status_code == 404
    assert api.get("/ui/session/ses_nothing/context/msg_nothing").status_code == 404


def test_what_the_model_saw_reads_in_the_dark_theme(browser, ocs, api, ui_provider, tmp_path):
    from .conftest import log_in

    sid = create(api, title="Dark")
    ui_provider.enqueue(fake.completion(fake.text_deltas("Seen in the dark.")),
                        fake.completion(fake.text_deltas("Still dark.")))
    prompt_and_wait(api, sid, "Hello")
    prompt_and_wait(api, sid, "Again")
    step = answers_of(api, sid)[1]  # marked against the first
    context = browser.new_context(base_url=ocs.url, viewport={"width": 900, "height": 700}, color_scheme="dark")
    try:
        tab = context.new_page()
        log_in(tab)
        tab.goto(f"/ui/session/{sid}/context/{step}")
        section = tab.locator("details#ctx-history")
        assert section.get_attribute("open") is not None
        assert section.evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(30, 36, 43)"  # the dark card
        mark = section.locator(".mark.added").first
        assert mark.evaluate("e => getComputedStyle(e).color") == "rgb(126, 226, 160)"  # legible on it
        shoot(tab, tmp_path, "context-dark")
    finally:
        context.close()
