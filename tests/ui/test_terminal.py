"""The terminal panel of a session page in a real Chromium: a shell at the session's Location over the PTY
WebSocket, drawn by the vendored xterm.js under the page's own Content-Security-Policy; it survives a reload."""

from __future__ import annotations

import shutil

import pytest

from .conftest import create, shoot

pytestmark = [pytest.mark.timeout(90), pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh on PATH")]



def test_a_terminal_opens_at_the_sessions_location(page, api, tmp_path):
    sid = create(api, title="With a shell")
    errors: list[str] = []  # a script or socket the Content-Security-Policy refused would be one
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.goto(f"/ui/session/{sid}")
    panel = page.get_by_role("region", name="Terminal")
    assert not panel.is_visible()
    page.get_by_role("button", name="Terminal").click()
    panel.get_by_text("connected").wait_for()
    screen = panel.locator(".xterm-rows")
    page.keyboard.type("echo at-$(basename $PWD) $((6*7))\n")  # the terminal has the focus once it opens
    screen.get_by_text("at-work 42").wait_for()  # the shell's answer, in the Location of the session
    shoot(page, tmp_path, "terminal")
    [pty] = [p for p in api.get("/api/pty").json()["data"] if p["title"] == f"inspector {sid}"]
    assert pty["status"] == "running"
    page.reload()  # the same shell again, with what it showed
    page.get_by_role("button", name="Terminal").click()
    panel.get_by_text("connected").wait_for()
    screen.get_by_text("at-work 42").wait_for()
    assert len([p for p in api.get("/api/pty").json()["data"] if p["title"] == f"inspector {sid}"]) == 1
    panel.get_by_role("button", name="End terminal").click()
    panel.wait_for(state="hidden")
    assert all(p["id"] != pty["id"] for p in api.get("/api/pty").json()["data"])
    assert errors == []


def test_the_terminal_fits_a_phone(page, api, tmp_path):
    sid = create(api, title="Shell on a phone")
    page.set_viewport_size({"width": 375, "height": 740})
    page.goto(f"/ui/session/{sid}")
    page.get_by_role("button", name="Terminal").click()
    page.get_by_role("region", name="Terminal").get_by_text("connected").wait_for()
    page.keyboard.type("echo narrow-ok\n")
    page.locator(".xterm-rows").get_by_text("narrow-ok", exact=True).last.wait_for()
    shoot(page, tmp_path, "terminal-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375
    page.get_by_role("button", name="End terminal").click()
