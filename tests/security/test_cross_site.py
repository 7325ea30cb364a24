"""Item 1 of "Safe by default": a web page cannot drive the local server. Browsers send cross-site "simple"
requests (text/plain bodies) without a preflight, name the attacker's own domain in Host after a DNS rebinding,
and always say where they come from in Origin; each of those doors is closed."""

from __future__ import annotations

import subprocess

import pytest

from tests.security.conftest import TIMEOUT, serve
from tests.support.server import OCS, isolated_env

ALLOWED_ORIGIN = "https://app.example"
ALLOWED_HOST = "ocs.internal"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = serve(tmp_path_factory.mktemp("cross-site"), "--allow-origin", ALLOWED_ORIGIN, "--allow-host", ALLOWED_HOST)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def _tag(response) -> str:
    return response.json()["_tag"]


def test_a_text_plain_body_is_not_parsed_and_creates_nothing(server, http):
    # What a page can send cross-site without a preflight: a JSON-looking body labelled text/plain.
    for content_type in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x",
                         "application/json; charset=latin-1", None):
        headers = {"Content-Type": content_type} if content_type else {}
        response = http.post(server.url + "/api/session", data=b'{"id": "ses_chosen_by_the_page"}', headers=headers,
                             timeout=TIMEOUT)
        assert response.status_code == 415, (content_type, response.text)
        assert _tag(response) == "InvalidRequestError"
    assert http.get(server.url + "/api/session/ses_chosen_by_the_page", timeout=TIMEOUT).status_code == 404
    for content_type in ("application/json", "application/json; charset=utf-8", "Application/JSON; Charset=UTF-8"):
        response = http.post(server.url + "/api/session", data=b"{}", headers={"Content-Type": content_type},
                             timeout=TIMEOUT)
        assert response.status_code == 200, (content_type, response.text)


def test_a_rebound_host_name_is_refused(server, http):
    port = server.url.rsplit(":", 1)[1]
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.attacker.example:{port}",
                 f"localhost.attacker.example:{port}", "", f"user@127.0.0.1:{port}"):
        response = http.get(server.url + "/api/session", headers={"Host": host}, timeout=TIMEOUT)
        assert response.status_code == 403, (host, response.text)
        assert _tag(response) == "ForbiddenError"
    # A request that would have changed something is refused before it is read.
    response = http.post(server.url + "/api/session", json={"id": "ses_rebinding_attack"},
                         headers={"Host": f"attacker.example:{port}"}, timeout=TIMEOUT)
    assert response.status_code == 403
    assert http.get(server.url + "/api/session/ses_rebinding_attack", timeout=TIMEOUT).status_code == 404
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", f"127.1.2.3:{port}", f"[::1]:{port}", "LOCALHOST",
                 f"{ALLOWED_HOST}:{port}"):
        response = http.get(server.url + "/api/health", headers={"Host": host}, timeout=TIMEOUT)
        assert response.status_code == 200, (host, response.text)


def test_a_foreign_origin_is_refused_and_no_cors_headers_are_sent(server, http):
    for origin in ("https://evil.example", "null", "http://127.0.0.1:1", ALLOWED_ORIGIN + ".evil.example"):
        response = http.post(server.url + "/api/session", json={"id": "ses_from_a_web_page"},
                             headers={"Origin": origin}, timeout=TIMEOUT)
        assert response.status_code == 403, (origin, response.text)
        assert _tag(response) == "ForbiddenError"
        assert not any(h.lower().startswith("access-control-") for h in response.headers)
        preflight = http.options(server.url + "/api/session", headers={
            "Origin": origin, "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "content-type"}, timeout=TIMEOUT)
        assert preflight.status_code == 403 and "access-control-allow-origin" not in preflight.headers
    assert http.get(server.url + "/api/session/ses_from_a_web_page", timeout=TIMEOUT).status_code == 404
    # Clients that are not browsers send no Origin, and get no CORS headers either.
    plain = http.get(server.url + "/api/session", timeout=TIMEOUT)
    assert plain.status_code == 200 and not any(h.lower().startswith("access-control-") for h in plain.headers)


def test_the_servers_own_origin_is_allowed(server, http):
    # A page the server itself serves says so in Origin: the scheme and the (allowed) Host it was addressed by.
    port = server.url.rsplit(":", 1)[1]
    for host, origin in ((f"127.0.0.1:{port}", server.url), (f"localhost:{port}", f"http://localhost:{port}"),
                         (f"[::1]:{port}", f"http://[::1]:{port}"), (f"LocalHost:{port}", f"http://localhost:{port}/"),
                         ("localhost", "http://localhost"), ("localhost:80", "http://localhost"),
                         (f"{ALLOWED_HOST}:{port}", f"http://{ALLOWED_HOST}:{port}")):
        response = http.post(server.url + "/api/session", json={}, headers={"Host": host, "Origin": origin},
                             timeout=TIMEOUT)
        assert response.status_code == 200, (host, origin, response.text)
        assert "access-control-allow-origin" not in response.headers  # same-origin needs no CORS
    # Anything else about the origin differs: another scheme, port or name, or a Host that is not allowed (a page
    # rebound to 127.0.0.1 names its own domain in both).
    for host, origin in ((f"127.0.0.1:{port}", f"https://127.0.0.1:{port}"),
                         (f"127.0.0.1:{port}", f"http://127.0.0.1:{int(port) + 1}"),
                         (f"127.0.0.1:{port}", f"http://localhost:{port}"),
                         (f"localhost:{port}", f"http://localhost:{port}/app"),
                         (f"localhost:{port}", f"http://user@localhost:{port}"),
                         ("localhost:443", "https://localhost"), (f"127.0.0.1:{port}", "null"),
                         (f"attacker.example:{port}", f"http://attacker.example:{port}")):
        response = http.post(server.url + "/api/session", json={"id": "ses_cross_origin"},
                             headers={"Host": host, "Origin": origin}, timeout=TIMEOUT)
        assert response.status_code == 403, (host, origin, response.text)
        assert _tag(response) == "ForbiddenError"
    assert http.get(server.url + "/api/session/ses_cross_origin", timeout=TIMEOUT).status_code == 404


def test_an_allowed_origin_gets_cors(server, http):
    preflight = http.options(server.url + "/api/session", headers={
        "Origin": ALLOWED_ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type"}, timeout=TIMEOUT)
    assert preflight.status_code == 200
    assert preflight.headers["access-control-allow-origin"] == ALLOWED_ORIGIN
    response = http.post(server.url + "/api/session", json={}, headers={"Origin": ALLOWED_ORIGIN}, timeout=TIMEOUT)
    assert response.status_code == 200, response.text
    assert response.headers["access-control-allow-origin"] == ALLOWED_ORIGIN


def _serve_on_all_interfaces(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess | str:
    """`ocs serve --host 0.0.0.0`: the CompletedProcess when it exits by itself, else the URL it printed."""
    environment = isolated_env(tmp_path, **env)
    proc = subprocess.Popen([OCS, "serve", "--host", "0.0.0.0", "--port", "0", "--db", str(tmp_path / "db.sqlite"),
                             "--directory", str(tmp_path), *args], env=environment, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the URL, or EOF when it refused
    if "listening on" not in line:
        out, err = proc.communicate(timeout=TIMEOUT)
        return subprocess.CompletedProcess(proc.args, proc.returncode, line + out, err)
    proc.terminate()
    proc.communicate(timeout=TIMEOUT)
    return line


def test_listening_beyond_loopback_needs_a_password_or_an_explicit_flag(tmp_path):
    refused = _serve_on_all_interfaces(tmp_path)
    assert isinstance(refused, subprocess.CompletedProcess)
    assert refused.returncode == 2
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "OPENCODE_SERVER_PASSWORD" in lines[0] and "--insecure-no-password" in lines[0], lines
    assert not (tmp_path / "db.sqlite").exists()  # it refused before opening anything
    assert "listening on" in _serve_on_all_interfaces(tmp_path, "--insecure-no-password")
    assert "listening on" in _serve_on_all_interfaces(tmp_path, OPENCODE_SERVER_PASSWORD="s3cret")
