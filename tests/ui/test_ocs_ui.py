"""`ocs ui`: a server on a free port that prints the inspector's URL and opens it in the user's browser."""

from __future__ import annotations

import httpx2
import pytest

from tests.support.server import OCS, isolated_env, start_server

pytestmark = pytest.mark.timeout(90)


def test_ocs_ui_serves_the_inspector_and_opens_the_browser(tmp_path):
    browser = tmp_path / "browser.sh"
    browser.write_text('#!/bin/sh\necho "browser opened $1" >&2\n')
    browser.chmod(0o755)
    srv = start_server(tmp_path, env=isolated_env(tmp_path, BROWSER=f"{browser} %s"), program=(OCS, "ui"))
    try:
        assert srv.wait_for_stderr(f"browser opened {srv.url}/", 30), "".join(srv.stderr_lines)
        page = httpx2.get(srv.url + "/")
        assert page.status_code == 200 and "Sessions" in page.text
        assert f"inspector     {srv.url}/" in "".join(srv.stderr_lines)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_ocs_ui_without_a_browser_says_where_to_go(tmp_path):
    srv = start_server(tmp_path, env=isolated_env(tmp_path, BROWSER="/nonexistent-browser %s"), program=(OCS, "ui"))
    try:
        assert srv.wait_for_stderr(f"open {srv.url}/ yourself", 30), "".join(srv.stderr_lines)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
