"""Item 4 of "Safe by default", for connections: a client that connects and sends nothing, or trickles its headers
or body (slowloris), is cut off after the read timeout; the number of open connections is bounded (503 beyond);
and running out of file descriptors is logged once, not as a traceback per failed accept."""

from __future__ import annotations

import resource
import select
import socket
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from tests.security.conftest import TIMEOUT, serve

READ_TIMEOUT = 2.0


def _address(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    assert parts.hostname is not None and parts.port is not None
    return parts.hostname, parts.port


def _closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closed `sock` (None if it did not within `seconds`), sending `trickle` a byte at a
    time, one every 0.2 s, meanwhile. Anything the server answers instead of closing fails the test."""
    started = time.monotonic()
    pending = trickle
    while time.monotonic() - started < seconds:
        readable, _, _ = select.select([sock], [], [], 0.2)
        if readable:
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            assert data == b"", f"the server answered instead of closing: {data[:200]!r}"
            return time.monotonic() - started
        if pending:
            try:
                sock.sendall(pending[:1])
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started
            pending = pending[1:]
    return None


@pytest.fixture(scope="module")
def ocs(tmp_path_factory):
    srv = serve(tmp_path_factory.mktemp("connections"), "--read-timeout", str(READ_TIMEOUT))
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_an_idle_connection_is_closed(ocs):
    with socket.create_connection(_address(ocs.url), timeout=TIMEOUT) as sock:
        closed = _closed_within(sock, READ_TIMEOUT + 10)
    assert closed is not None and closed >= READ_TIMEOUT * 0.9


def test_trickled_headers_are_cut_off(ocs):
    headers = b"GET /api/health HTTP/1.1\r\nHost: 127.0.0.1\r\n" + b"X-Slow: " + b"a" * 200 + b"\r\n\r\n"
    with socket.create_connection(_address(ocs.url), timeout=TIMEOUT) as sock:
        closed = _closed_within(sock, READ_TIMEOUT + 10, trickle=headers)
    assert closed is not None


def test_a_trickled_body_is_cut_off(ocs):
    body = b'{"id": "ses_slowloris"' + b" " * 200 + b"}"
    head = (b"POST /api/session HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n")
    with socket.create_connection(_address(ocs.url), timeout=TIMEOUT) as sock:
        sock.sendall(head)
        closed = _closed_within(sock, READ_TIMEOUT + 10, trickle=body)
    assert closed is not None


def test_a_slow_but_steady_client_is_still_served(ocs, http):
    # The deadline is per request: many requests on one connection are fine, and so is a long-running answer.
    with http:
        for _ in range(3):
            assert http.get(ocs.url + "/api/health", timeout=TIMEOUT).status_code == 200
        assert http.post(ocs.url + "/api/session", json={}, timeout=TIMEOUT).status_code == 200


def test_connections_beyond_the_limit_get_503(tmp_path, http):
    srv = serve(tmp_path, "--max-concurrency", "4")
    idle = [socket.create_connection(_address(srv.url), timeout=TIMEOUT) for _ in range(4)]
    try:
        response = http.get(srv.url + "/api/health", timeout=TIMEOUT)
        assert response.status_code == 503
    finally:
        for sock in idle:
            sock.close()
    try:
        deadline = time.monotonic() + TIMEOUT
        while (status := http.get(srv.url + "/api/health", timeout=TIMEOUT).status_code) == 503:
            assert time.monotonic() < deadline, "the server never noticed the connections had closed"
        assert status == 200
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def _few_descriptors() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))


@pytest.mark.timeout(120)
def test_running_out_of_file_descriptors_is_logged_once(tmp_path, http):
    srv = serve(tmp_path, preexec_fn=_few_descriptors)
    address = _address(srv.url)
    held: list[socket.socket] = []
    try:
        # More connections than the server has descriptors: the kernel queues them, the server cannot accept.
        for _ in range(150):
            held.append(socket.create_connection(address, timeout=TIMEOUT))
        assert srv.wait_for_stderr("Too many open files", TIMEOUT), "".join(srv.stderr_lines)[-2000:]
        # asyncio retries the accept every second; keep the pressure on for a few of those retries
        with pytest.raises(subprocess.TimeoutExpired):
            srv.proc.wait(timeout=4)
        exhausted = [line for line in srv.stderr_lines if "Too many open files" in line]
        assert len(exhausted) == 1, f"{len(exhausted)} lines, e.g. {exhausted[:3]}"
        assert not any("Traceback" in line for line in srv.stderr_lines)
    finally:
        for sock in held:
            sock.close()
    try:
        deadline = time.monotonic() + TIMEOUT
        while True:  # once the held connections are gone, accepting works again
            try:
                if http.get(srv.url + "/api/health", timeout=5).status_code == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not recover"
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)[-2000:]


# A server socket out of descriptors: asyncio (3.11) schedules one accept retry per failed accept of a pass, up to the
# backlog, and when the server is closed meanwhile every one of them later fails on the closed socket. Run in a child
# process, whose descriptor limit can be lowered.
_RETRIES_AFTER_CLOSE = """
import asyncio, resource, socket
from opencode_session.server.connections import ResourceExhaustionLog

resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))

async def main():
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(ResourceExhaustionLog())
    server = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0, backlog=200)
    port = server.sockets[0].getsockname()[1]
    held = []

    def connect():
        for _ in range(60):
            try:
                held.append(socket.create_connection(("127.0.0.1", port), timeout=5))
            except OSError:
                return

    await loop.run_in_executor(None, connect)
    await asyncio.sleep(1.5)  # (a timer: asyncio retries the accept a second after each failure)
    server.close()
    await asyncio.sleep(1.5)  # (a timer: past the retries scheduled before the close)
    for sock in held:
        sock.close()

asyncio.run(main())
"""


def test_accept_retries_left_when_the_server_closes_are_dropped_quietly():
    done = subprocess.run([sys.executable, "-c", _RETRIES_AFTER_CLOSE], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Too many open files" in done.stderr  # the one line about running out
    assert "Traceback" not in done.stderr, f"{done.stderr.count('Traceback')} tracebacks: {done.stderr[-1500:]}"
