"""Round four of "Safe by default": the wrong-password throttle. It counts by the connection's peer, so
`X-Forwarded-For` (which uvicorn believed from loopback) does not give each guess a fresh count; and it slows wrong
guesses down without refusing the right password, so a process guessing on 127.0.0.1 locks out none of the user's own
clients there (the TUI, the SDK, `ocs run --attach`). Each test drives a real `ocs serve` with a password."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx2
import pytest

from opencode_session.server.auth import FREE_FAILURES, LOCK_FIRST_S
from tests.support.server import ServerProcess, start_configured

pytestmark = pytest.mark.timeout(60)

PASSWORD = "the right one"
HELD = 1.5  # seconds a client waits before it calls an answer held (the first hold is LOCK_FIRST_S, 5 s)


@pytest.fixture
def ocs(tmp_path) -> Iterator[ServerProcess]:
    srv, _ = start_configured(tmp_path, {}, OPENCODE_SERVER_PASSWORD=PASSWORD)
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def guess(ocs: ServerProcess, password: str, timeout: float = 30, **headers: str) -> int | None:
    """The status of a basic-auth request with `password`; None when no answer came within `timeout`."""
    try:
        return httpx2.get(ocs.url + "/api/session", auth=("opencode", password), headers=headers,
                          timeout=timeout).status_code
    except httpx2.TimeoutException:
        return None


def test_forwarded_for_does_not_give_a_guess_a_fresh_count(ocs):
    for n in range(FREE_FAILURES):
        assert guess(ocs, f"guess {n}", **{"X-Forwarded-For": f"10.0.0.{n}"}) == 401
    # the next one is counted with the others: its answer is held, whatever address it claims
    assert guess(ocs, "guess x", timeout=HELD, **{"X-Forwarded-For": "10.9.9.9"}) is None
    assert guess(ocs, PASSWORD, **{"X-Forwarded-For": "10.9.9.9"}) == 200


def test_a_guesser_on_the_same_address_locks_nobody_out(ocs):
    for n in range(FREE_FAILURES):
        assert guess(ocs, f"guess {n}") == 401  # answered at once
    for n in range(4):  # each further wrong one waits (the guesser gives up on them; they still count)
        assert guess(ocs, f"more {n}", timeout=HELD) is None
    # the user's own client, on the same loopback address, gets in at once with the right password
    started = time.monotonic()
    assert guess(ocs, PASSWORD) == 200
    form = httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": PASSWORD},
                       follow_redirects=False, timeout=30)
    assert form.status_code == 303 and "ocs_login=" in form.headers["set-cookie"]
    assert time.monotonic() - started < LOCK_FIRST_S
    # while the guesser is still slowed down: a right password cleared nothing
    assert guess(ocs, "still guessing", timeout=HELD) is None
    wrong_form = None
    try:
        wrong_form = httpx2.post(ocs.url + "/ui/login", data={"username": "opencode", "password": "nope"},
                                 follow_redirects=False, timeout=HELD)
    except httpx2.TimeoutException:
        pass
    assert wrong_form is None
