"""The login form of a server with a password: a browser without credentials is shown it, a wrong password gets no
cookie, the right one a same-site, HTTP-only cookie that the page (and its API calls) then use; basic auth still works
for the API, and the Host/Origin guard refuses a foreign page whatever it carries. Logging out ends the cookie; many
wrong passwords in a row make the client wait for each further wrong answer."""

from __future__ import annotations

from collections.abc import Iterator
from urllib.parse import urlsplit

import httpx2
import pytest

from opencode_session.server.auth import FORGET_S, FREE_FAILURES, LOCK_FIRST_S, LOCK_MAX_S, Attempts
from tests.support.server import ServerProcess, start_configured

from .conftest import PASSWORD
from .test_inspector import create, shoot

pytestmark = pytest.mark.timeout(60)


def log_in(ocs, password: str, **extra) -> httpx2.Response:
    return httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": password, **extra},
                       follow_redirects=False)


def test_a_browser_without_credentials_gets_the_login_form(browser, ocs, tmp_path):
    with httpx2.Client(base_url=ocs.url, auth=("opencode", PASSWORD)) as api:
        sid = create(api, title="Behind the form")
    context = browser.new_context(base_url=ocs.url, viewport={"width": 375, "height": 700})
    context.set_default_timeout(15_000)
    try:
        tab = context.new_page()
        tab.goto(f"/ui/session/{sid}")
        assert urlsplit(tab.url).path == "/ui/login"
        tab.get_by_label("Password").wait_for()
        shoot(tab, tmp_path, "login")
        tab.get_by_label("Password").fill("wrong")
        tab.get_by_role("button", name="Log in").click()
        tab.get_by_role("alert").get_by_text("Wrong user or password").wait_for()
        assert context.cookies() == []  # refused: nothing to come back with
        tab.get_by_label("Password").fill(PASSWORD)
        tab.get_by_label("Password").press("Enter")  # the keyboard is enough
        tab.wait_for_url(f"**/ui/session/{sid}")  # back where the browser was going
        tab.get_by_text("Nothing here yet").wait_for()
        [cookie] = context.cookies()
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert tab.evaluate("document.cookie") == ""  # no script on the page can read it
        tab.get_by_label("Title").fill("Renamed through the cookie")  # the page's API calls carry it
        tab.get_by_role("button", name="Rename").click()
        tab.locator("#prompt-status").get_by_text("renamed").wait_for()
    finally:
        context.close()


def test_a_wrong_password_is_refused_with_no_cookie(ocs):
    for password in ("wrong", "", PASSWORD + "x"):
        answer = log_in(ocs, password)
        assert answer.status_code == 401 and "set-cookie" not in answer.headers
        assert "Wrong user or password" in answer.text and "www-authenticate" not in answer.headers
    assert log_in(ocs, PASSWORD, username="someone").status_code == 401  # the user counts too


def test_the_cookie_is_http_only_same_site_and_opens_the_api(ocs):
    answer = log_in(ocs, PASSWORD, next="/ui/session/ses_x")
    assert answer.status_code == 303 and answer.headers["location"] == "/ui/session/ses_x"
    attributes = [part.strip().lower() for part in answer.headers["set-cookie"].split(";")]
    assert "httponly" in attributes and "samesite=strict" in attributes and "path=/" in attributes
    cookie = answer.headers["set-cookie"].split(";")[0]
    listed = httpx2.get(ocs.url + "/api/session", headers={"Cookie": cookie})
    assert listed.status_code == 200
    assert httpx2.get(ocs.url + "/", headers={"Cookie": cookie}).status_code == 200
    # the API keeps basic auth, and without either a client gets the challenge, not a page
    assert httpx2.get(ocs.url + "/api/session", auth=("opencode", PASSWORD)).status_code == 200
    refused = httpx2.get(ocs.url + "/api/session")
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")


def test_a_forged_or_moved_cookie_opens_nothing(ocs):
    cookie = log_in(ocs, PASSWORD).headers["set-cookie"].split(";")[0]
    name, _, value = cookie.partition("=")
    for forged in (value[:-1] + ("A" if value[-1] != "A" else "B"), "0" * len(value), "1.x", value + "0"):
        assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": f"{name}={forged}"}).status_code == 401
    port = urlsplit(ocs.url).port
    # a login for the Host it was issued to: the same cookie sent to this server under another name opens nothing
    other = httpx2.get(f"http://localhost:{port}/api/session", headers={"Cookie": cookie})
    assert other.status_code == 401


def test_a_foreign_origin_is_refused_with_or_without_the_cookie(ocs):
    cookie = log_in(ocs, PASSWORD).headers["set-cookie"].split(";")[0]
    foreign = {"Origin": "http://evil.example", "Cookie": cookie}
    assert httpx2.get(ocs.url + "/", headers=foreign).status_code == 403
    assert httpx2.post(ocs.url + "/api/session", json={"title": "x"}, headers=foreign).status_code == 403
    # nor may a foreign page log a browser in (or learn whether a password is right)
    answer = httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": PASSWORD},
                         headers={"Origin": "http://evil.example"})
    assert answer.status_code == 403 and "set-cookie" not in answer.headers
    cross = httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": PASSWORD},
                        headers={"Sec-Fetch-Site": "cross-site"})
    assert cross.status_code == 403 and "set-cookie" not in cross.headers


def test_after_logging_in_the_browser_goes_only_to_this_server(ocs):
    for target in ("//evil.example/", "http://evil.example/", "/\\evil.example", "evil"):
        answer = log_in(ocs, PASSWORD, next=target)
        assert answer.status_code == 303 and answer.headers["location"] == "/", target
    form = httpx2.get(ocs.url + "/ui/login?next=//evil.example")
    assert form.status_code == 200 and 'value="/"' in form.text
    assert "default-src 'self'" in form.headers["content-security-policy"]


def test_the_form_refuses_what_is_not_a_small_form(ocs):
    big = httpx2.post(ocs.url + "/ui/login", content=b"password=" + b"x" * 10_000,
                      headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert big.status_code == 400 and "set-cookie" not in big.headers
    as_json = httpx2.post(ocs.url + "/ui/login", json={"username": "opencode", "password": PASSWORD})
    assert as_json.status_code == 400 and "set-cookie" not in as_json.headers


def test_logging_out_ends_the_cookie_here_and_for_whoever_copied_it(page, ocs, tmp_path):
    page.goto("/")
    [cookie] = page.context.cookies()
    copied = f"{cookie['name']}={cookie['value']}"
    assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": copied}).status_code == 200
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/ui/login")
    assert page.context.cookies() == []
    page.goto("/")
    assert urlsplit(page.url).path == "/ui/login"  # the page is behind the form again
    # the value itself is done: a copy of it opens nothing, though it has not expired
    assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": copied}).status_code == 401
    assert httpx2.get(ocs.url + "/ui/logout").status_code == 405  # a link cannot log anyone out
    log_in_again = log_in(ocs, PASSWORD)
    assert log_in_again.status_code == 303  # and the password opens a new one
    fresh = log_in_again.headers["set-cookie"].split(";")[0]
    assert httpx2.get(ocs.url + "/api/session", headers={"Cookie": fresh}).status_code == 200
    shoot(page, tmp_path, "logged-out")


@pytest.fixture(scope="module")
def guarded(tmp_path_factory) -> Iterator[ServerProcess]:
    """A server of its own: the test makes it lock its one client (loopback) out."""
    srv, _ = start_configured(tmp_path_factory.mktemp("throttled"), {}, OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_many_wrong_passwords_make_the_client_wait(guarded):
    cookie = log_in(guarded, PASSWORD).headers["set-cookie"].split(";")[0]  # logged in before it starts
    for _ in range(FREE_FAILURES):
        assert log_in(guarded, "guess").status_code == 401
    # the next wrong one is answered only after a wait, on the form and on the API
    with pytest.raises(httpx2.TimeoutException):
        httpx2.post(guarded.url + "/ui/login", data={"username": "opencode", "password": "guess"}, timeout=1.5)
    with pytest.raises(httpx2.TimeoutException):
        httpx2.get(guarded.url + "/api/session", auth=("opencode", "guess"), timeout=1.5)
    # the right password is never made to wait, nor is a browser already logged in
    form = log_in(guarded, PASSWORD)
    assert form.status_code == 303 and "set-cookie" in form.headers
    assert httpx2.get(guarded.url + "/api/session", auth=("opencode", PASSWORD)).status_code == 200
    assert httpx2.get(guarded.url + "/api/session", headers={"Cookie": cookie}).status_code == 200


def test_each_wrong_password_past_the_free_ones_doubles_the_wait():
    now = [1000.0]
    attempts = Attempts(clock=lambda: now[0])
    for _ in range(FREE_FAILURES):
        assert attempts.judge("10.0.0.1", False) == 0
    assert [attempts.judge("10.0.0.1", False) for _ in range(4)] == [
        LOCK_FIRST_S, 2 * LOCK_FIRST_S, 4 * LOCK_FIRST_S, 8 * LOCK_FIRST_S]
    assert attempts.judge("10.0.0.1", True) == 0  # the right password is never held
    assert attempts.judge("10.0.0.1", False) == 16 * LOCK_FIRST_S  # and clears nothing of a guesser's count
    assert attempts.judge("10.0.0.2", False) == 0  # another address has its own count
    for _ in range(60):
        attempts.judge("10.0.0.3", False)
    assert attempts.judge("10.0.0.3", False) == LOCK_MAX_S  # the wait stops growing
    now[0] += FORGET_S + 1  # after a quiet while, a client counts afresh
    assert attempts.judge("10.0.0.3", False) == 0
