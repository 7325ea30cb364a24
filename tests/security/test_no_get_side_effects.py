"""Item 2 of "Safe by default, round three": no GET starts a process, and a browser's own word that a request crosses
sites (`Sec-Fetch-Site`) refuses it as a foreign `Origin` does. An `<img src="http://127.0.0.1:PORT/api/mcp?...">`
on any web page is a cross-site GET with no Origin: it must neither run the MCP command of the directory it names
nor be answered."""

from __future__ import annotations

import json
import sys

import pytest

from tests.security.conftest import TIMEOUT, serve

ALLOWED_ORIGIN = "https://app.example"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = serve(tmp_path_factory.mktemp("no-get-side-effects"), "--allow-origin", ALLOWED_ORIGIN)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def _project_whose_mcp_server_leaves_a_mark(tmp_path):
    project = tmp_path / "elsewhere"
    project.mkdir()
    mark = tmp_path / "the-command-ran"
    command = [sys.executable, "-c", f"open({str(mark)!r}, 'w').close()"]
    (project / "opencode.json").write_text(json.dumps({"mcp": {"evil": {"type": "local", "command": command}}}))
    return project, mark


@pytest.mark.parametrize("fetch_site", ["cross-site", "same-site", "CROSS-SITE"])
def test_a_cross_site_request_is_refused_on_every_route(server, http, fetch_site):
    for method, path in (("GET", "/api/session"), ("GET", "/api/health"), ("GET", "/api/mcp"),
                         ("POST", "/api/session"), ("GET", "/doc")):
        response = http.request(method, server.url + path, headers={"Sec-Fetch-Site": fetch_site},
                                json={} if method == "POST" else None, timeout=TIMEOUT)
        assert response.status_code == 403, (method, path, response.text)
        assert response.json()["_tag"] == "ForbiddenError"
    # A page of an allowed origin crosses sites by design: it says who it is.
    allowed = http.get(server.url + "/api/session", headers={"Sec-Fetch-Site": fetch_site, "Origin": ALLOWED_ORIGIN},
                       timeout=TIMEOUT)
    assert allowed.status_code == 200, allowed.text


def test_same_origin_and_non_browser_requests_still_work(server, http):
    for headers in ({"Sec-Fetch-Site": "same-origin"}, {"Sec-Fetch-Site": "none"}, {}):
        assert http.get(server.url + "/api/session", headers=headers, timeout=TIMEOUT).status_code == 200, headers


def test_an_image_load_does_not_start_an_mcp_server(server, http, tmp_path):
    project, mark = _project_whose_mcp_server_leaves_a_mark(tmp_path)
    query = {"location[directory]": str(project)}
    # what a browser sends for an <img> on another site: refused before anything is read
    refused = http.get(server.url + "/api/mcp", params=query, headers={"Sec-Fetch-Site": "cross-site"},
                       timeout=TIMEOUT)
    assert refused.status_code == 403
    # and even a plain GET (no browser headers at all) only reads: the server is configured, not running
    answer = http.get(server.url + "/api/mcp", params=query, timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    assert answer.json()["data"] == {"evil": {"status": "stopped"}}
    assert not mark.exists(), "a GET ran the configured MCP command"
    # starting servers takes a POST (which a page cannot send without a preflight or an allowed Origin)
    started = http.post(server.url + "/api/mcp/connect", params=query, timeout=TIMEOUT)
    assert started.status_code == 200, started.text
    assert mark.exists()
    cross = http.post(server.url + "/api/mcp/connect", params=query, timeout=TIMEOUT,
                      headers={"Origin": "https://evil.example"})
    assert cross.status_code == 403
