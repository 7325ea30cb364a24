"""Trusting a folder from the inspector, in a real headless Chromium, as a user who has not opted out of trust
(the suite trusts everything; this server does not): a session at a cloned repository whose opencode.json has hooks
says plainly that they are off and offers "Trust this folder"; trusting it there turns them on from the next prompt
and the page says so. The new-session form says the same of the Location typed, trusting there makes the session's
SessionStart hook run at creation, and a configuration changed since the form showed it is refused, not trusted."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, start_configured

from .conftest import PASSWORD, create, prompt_and_wait, shoot
from .test_new_session import new_session_form

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    return tmp_path_factory.mktemp("ui-trust")


@pytest.fixture(scope="module")
def ocs(root, ui_provider) -> Iterator[ServerProcess]:
    config = ui_provider.serve_config({"fake-model": {}}, model="loop/fake-model")
    (root / "work").mkdir()
    srv, _work = start_configured(root, config, OPENCODE_SERVER_PASSWORD=PASSWORD, OCS_TRUST_ALL="")
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def _mark(root, name: str) -> str:
    return shlex.join([sys.executable, "-c", f"open({str(root / name)!r}, 'a').write('x')"])


def repository(root, name: str) -> str:
    """A cloned repository whose opencode.json runs a command at a session's start and at each prompt."""
    folder = root / name
    folder.mkdir()
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    hooks = {"SessionStart": [{"hooks": [{"type": "command", "command": _mark(root, f"{name}-start")}]}],
             "UserPromptSubmit": [{"hooks": [{"type": "command", "command": _mark(root, f"{name}-prompt")}]}]}
    (folder / "opencode.json").write_text(json.dumps({"hooks": hooks, "mcp": {}}))
    return str(folder)


def ran(root, name: str) -> list[str]:
    return [event for event in ("start", "prompt") if (root / f"{name}-{event}").exists()]


def test_a_session_at_an_untrusted_folder_says_so_and_trusting_it_there_turns_its_hooks_on(page, api, root,
                                                                                       ui_provider, tmp_path):
    directory = repository(root, "cloned")
    sid = create(api, location={"directory": directory})
    ui_provider.enqueue(fake.completion(fake.text_deltas("untrusted turn")))
    prompt_and_wait(api, sid, "hello")
    assert ran(root, "cloned") == [], "nothing the repository names runs before it is trusted"
    page.goto(f"/ui/session/{sid}")
    notice = page.locator(".trust-notice")
    notice.get_by_text("This folder is not trusted").wait_for()
    assert "hooks" in notice.inner_text() and "turned off" in notice.inner_text()
    assert str(root / "cloned" / "opencode.json") in notice.inner_text()  # it names the file
    shoot(page, tmp_path, "trust-session-untrusted")
    notice.get_by_role("button", name="Trust this folder").click()
    notice.get_by_text("This folder is trusted").wait_for()
    assert notice.get_by_role("button", name="Trust this folder").count() == 0
    shoot(page, tmp_path, "trust-session-trusted")
    state = api.get("/api/experimental/trust", params={"location[directory]": directory}).json()
    assert state["trusted"] is True, state
    # nothing else needed: the next prompt of this very session runs the repository's hook
    ui_provider.enqueue(fake.completion(fake.text_deltas("trusted turn")))
    prompt_and_wait(api, sid, "hello again")
    assert ran(root, "cloned") == ["prompt"]
    page.reload()
    page.locator("#transcript").get_by_text("trusted turn", exact=True).wait_for()
    assert page.locator(".trust-notice").count() == 0, "a trusted folder's page says nothing of trust"


def test_the_new_session_form_offers_to_trust_the_location_typed(page, api, root):
    directory = repository(root, "fresh")
    page.goto("/")
    form = new_session_form(page)
    assert form.locator(".trust-notice").count() == 0, "the server's own folder has no project configuration"
    form.get_by_label("Location").fill(directory)
    form.get_by_label("Location").press("Tab")
    notice = form.locator(".trust-notice")
    notice.get_by_text("This folder is not trusted").wait_for()
    notice.get_by_role("button", name="Trust this folder").click()
    notice.get_by_text("This folder is trusted").wait_for()
    form.get_by_role("button", name="Create session").click()
    page.wait_for_url("**/ui/session/ses_*")
    assert page.locator(".trust-notice").count() == 0
    assert ran(root, "fresh") == ["start"], "trusted before it was made: its SessionStart hook ran"


def test_trusting_a_configuration_changed_since_the_page_showed_it_is_refused(page, api, root, tmp_path):
    directory = repository(root, "moving")
    page.goto("/")
    form = new_session_form(page)
    form.get_by_label("Location").fill(directory)
    form.get_by_label("Location").press("Tab")
    notice = form.locator(".trust-notice")
    notice.get_by_text("This folder is not trusted").wait_for()
    config = root / "moving" / "opencode.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "permission": {"bash": "allow"}}))
    notice.get_by_role("button", name="Trust this folder").click()
    notice.locator(".trust-status.error").get_by_text("changed since this page showed it", exact=False).wait_for()
    shoot(page, tmp_path, "trust-refused")
    state = api.get("/api/experimental/trust", params={"location[directory]": directory}).json()
    assert state["trusted"] is False, "what the user did not see is not trusted"
    assert notice.get_by_role("button", name="Trust this folder").is_enabled()
    page.reload()  # what it says now, to trust
    form = new_session_form(page)
    form.get_by_label("Location").fill(directory)
    form.get_by_label("Location").press("Tab")
    notice = form.locator(".trust-notice")
    notice.get_by_text("permissions that widen", exact=False).wait_for()
    notice.get_by_role("button", name="Trust this folder").click()
    notice.get_by_text("This folder is trusted").wait_for()
