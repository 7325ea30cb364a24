"""Round four of "Safe by default": the inspector's login. Its cookie is a random token the server maps to a login, so
a captured one (cookies are not port-scoped: every service on 127.0.0.1 sees it) tells nothing about the password;
the `next` target of the form stays on this server whatever characters it holds, and a line break in it is no
broken connection. Each test drives a real `ocs serve` with a password over HTTP."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import re
import socket
from collections.abc import Iterator
from urllib.parse import quote, urljoin, urlsplit

import httpx2
import pytest

from tests.support.server import ServerProcess, start_configured

pytestmark = pytest.mark.timeout(60)

PASSWORD = "correct horse battery"
EXPECTED = f"opencode:{PASSWORD}".encode()


@pytest.fixture(scope="module")
def ocs(tmp_path_factory) -> Iterator[ServerProcess]:
    srv, _ = start_configured(tmp_path_factory.mktemp("login"), {}, OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def log_in(ocs: ServerProcess, next: str = "/") -> httpx2.Response:
    answer = httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": PASSWORD, "next": next},
                         follow_redirects=False)
    assert answer.status_code == 303, answer.text
    return answer


def cookie_of(answer: httpx2.Response) -> str:
    return answer.headers["set-cookie"].split(";")[0]


def confirms(cookie_value: str, host: str, secret: bytes) -> bool:
    """Whether `secret` (a guessed user:password) is confirmed by the cookie offline: some piece of it is an HMAC,
    keyed by the guess, of the others and the Host (the way a cookie signed with the password is checked)."""
    pieces = re.split(r"[.|:_-]", cookie_value)
    for size in range(1, len(pieces)):
        for chosen in itertools.permutations([p for p in pieces if p], size):
            for prefix in ("", "ocs-login|"):
                for hosts in ((), (host,)):
                    message = prefix + "|".join([*chosen, *hosts])
                    mac = hmac.new(secret, message.encode(), hashlib.sha256).hexdigest()
                    if mac in pieces:
                        return True
    return False


# --- 9: the cookie is a random token -----------------------------------------------------------------------------


def test_a_captured_cookie_tells_nothing_about_the_password(ocs):
    host = urlsplit(ocs.url).netloc
    values = [cookie_of(log_in(ocs)).partition("=")[2] for _ in range(2)]
    assert values[0] != values[1] and all(len(v) >= 43 for v in values)  # 256 random bits each
    for value in values:
        # another service of 127.0.0.1 that sees the cookie cannot test guesses against it
        assert not confirms(value, host, EXPECTED)
        assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": f"ocs_login={value}"}).status_code == 200


def test_a_forged_cookie_opens_nothing(ocs):
    value = cookie_of(log_in(ocs)).partition("=")[2]
    for forged in (value[:-1] + ("A" if value[-1] != "A" else "B"), value + "0", "", "1.x", "A" * len(value)):
        assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": f"ocs_login={forged}"}).status_code == 401


# --- 10: `next` stays on this server ---------------------------------------------------------------------------------


def _same_origin(ocs: ServerProcess, location: str) -> bool:
    # browsers drop tabs and line breaks from a URL and read `\` as `/` before they resolve it
    cleaned = re.sub(r"[\t\n\r]", "", location).replace("\\", "/")
    resolved = urlsplit(urljoin(ocs.url + "/ui/login", cleaned))
    return (resolved.scheme, resolved.netloc) == tuple(urlsplit(ocs.url)[:2])


@pytest.mark.parametrize("target", ["/\t/evil.example:8080/", "/\n/evil.example/", "/\r/evil.example/",
                                    "/\\/evil.example/", "/ /evil.example/", "\t//evil.example/"])
def test_after_logging_in_the_browser_stays_on_this_server(ocs, target):
    cookie = cookie_of(log_in(ocs))
    already = httpx2.get(f"{ocs.url}/ui/login?next={quote(target, safe='')}", headers={"Cookie": cookie},
                         follow_redirects=False)
    assert already.status_code == 303 and _same_origin(ocs, already.headers["location"]), already.headers
    fresh = log_in(ocs, next=target)
    assert _same_origin(ocs, fresh.headers["location"]), fresh.headers


def _raw_get(ocs: ServerProcess, target: str, cookie: str) -> bytes:
    """The raw answer to a GET of `target` (sent as it is), up to the end of its headers."""
    address = urlsplit(ocs.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as conn:
        conn.sendall(f"GET {target} HTTP/1.1\r\nHost: {address.netloc}\r\nCookie: {cookie}\r\n"
                     "Connection: close\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = conn.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def test_a_line_break_in_next_gets_a_clean_answer(ocs):
    cookie = cookie_of(log_in(ocs))
    for smuggled in ("%0d%0aSet-Cookie:%20ocs_login=planted", "%0aLocation:%20//evil.example", "%0d"):
        answer = _raw_get(ocs, f"/ui/login?next=/ui{smuggled}", cookie)
        head = answer.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        assert head[0].startswith("HTTP/1.1 303"), answer  # not a dropped connection
        headers = [line.lower() for line in head[1:]]
        assert not any(line.startswith("set-cookie") for line in headers)
        [location] = [line for line in head[1:] if line.lower().startswith("location:")]
        assert _same_origin(ocs, location.partition(":")[2].strip())
    assert not any("Traceback" in line for line in ocs.stderr_lines), "".join(ocs.stderr_lines)
