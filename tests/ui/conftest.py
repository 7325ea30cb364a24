"""The browser inspector's fixtures: Debian's chromium driven by Playwright (installed by `python3 run.py test` where
it can be; otherwise these tests skip and say why), and one `ocs serve` with a password over a loopback provider."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.server import ServerProcess, start_configured

PASSWORD = "s3cret"
CHROMIUM = ("chromium", "chromium-browser")


def chromium_path() -> str | None:
    for name in CHROMIUM:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        reason = "no chromium on PATH (python3 run.py test installs Debian's chromium when run as root with apt-get)"
        print(f"SKIP: {reason}")
        pytest.skip(reason)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        instance = pw.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def ui_provider() -> Iterator[fake.FakeOpenAI]:
    with fake.FakeOpenAI.running() as server:
        yield server
        server.release_held()


@pytest.fixture(scope="module")
def ocs(tmp_path_factory, ui_provider) -> Iterator[ServerProcess]:
    config = ui_provider.serve_config(
        {"fake-model": {"limit": {"context": 100_000, "output": 1_000}},
         "other-model": {"cost": {"input": 3, "output": 15}}}, model="loop/fake-model",  # usage counts its cost
        permission={"bash": "ask"},  # the tray's test asks
        command={"greet": {"template": "Say hello to $1 politely", "description": "a greeting"}})
    root = tmp_path_factory.mktemp("ui")
    (root / "work").mkdir()
    subprocess.run(["git", "init", "-q", str(root / "work")], check=True)  # a project: its turns are snapshotted
    (root / "work" / "notes.txt").write_text("alpha\nbeta\n")
    srv, _work = start_configured(root, config, OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def log_in(tab: Any, password: str = PASSWORD) -> None:
    """Through the login form, as a person would: the page's own requests then carry its cookie."""
    tab.goto("/ui/login")
    tab.get_by_label("Password").fill(password)
    tab.get_by_role("button", name="Log in").click()
    tab.wait_for_url("**/")


@pytest.fixture
def page(browser, ocs) -> Iterator[Any]:
    context = browser.new_context(base_url=ocs.url, viewport={"width": 1100, "height": 800})
    context.set_default_timeout(15_000)
    tab = context.new_page()
    log_in(tab)
    yield tab
    context.close()


@pytest.fixture
def api(ocs) -> Iterator[httpx2.Client]:
    """The API of the page's server, as the page's user (with the password)."""
    with httpx2.Client(base_url=ocs.url, auth=("opencode", PASSWORD), timeout=30) as client:
        yield client


def create(api: httpx2.Client, **body) -> str:
    answer = api.post("/api/session", json=body)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]["id"]


def prompt_and_wait(api: httpx2.Client, sid: str, text: str) -> None:
    assert api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}}).status_code == 200
    assert api.post(f"/api/session/{sid}/wait", timeout=40).status_code == 204


def prompt_allowing(page, api: httpx2.Client, sid: str, text: str, asking: str) -> None:
    """On the session's page, prompt and answer "Allow once" to the one permission the turn asks (its tray names
    `asking`), then wait for the turn to end."""
    page.goto(f"/ui/session/{sid}")
    page.get_by_text("Nothing here yet").wait_for()
    assert api.post(f"/api/session/{sid}/prompt", json={"prompt": {"text": text}}).status_code == 200
    tray = page.get_by_role("region", name="Needs you")
    tray.get_by_text(asking).wait_for()
    tray.get_by_role("button", name="Allow once").click()
    assert api.post(f"/api/session/{sid}/wait", timeout=40).status_code == 204


def shoot(page, tmp_path, name: str) -> None:
    path = tmp_path / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")
