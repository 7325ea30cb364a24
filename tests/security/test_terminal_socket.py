"""A terminal is a shell: its WebSocket is guarded like every route. With a password set, the upgrade needs it or a
single-use ticket from connect-token (a browser cannot send the header); a foreign Origin or Host is refused, so a
web page cannot open a shell on the user's machine. Over `ocs serve` and the Embedded host alike."""

from __future__ import annotations

import shutil

import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus

from opencode_session.client import ForbiddenError, OpenCodeClient, UnauthorizedError
from opencode_session.server.host import ConnectTickets
from tests.api.test_pty import read_until
from tests.support.server import isolated_env, start_server

pytestmark = [pytest.mark.anyio, pytest.mark.skipif(shutil.which("sh") is None, reason="needs sh on PATH")]
ALICE = ("alice", "s3cret")


async def _terminal(secured) -> str:
    async with secured(ALICE) as client:
        return (await client.pty.create(command="sh", args=["-c", "echo shell-ready; exec cat"])).data.id


async def test_the_upgrade_needs_the_password(secured):
    pty = await _terminal(secured)
    for auth in (None, ("alice", "wrong")):
        async with secured(auth) as client:
            with pytest.raises(UnauthorizedError):
                async with client.pty.connect(pty):
                    pass
            with pytest.raises(UnauthorizedError):
                await client.pty.connect_token(pty)
    async with secured(ALICE) as client, client.pty.connect(pty) as ws:
        await read_until(ws, "shell-ready")


async def test_a_ticket_opens_one_connection_without_the_password(secured):
    pty = await _terminal(secured)
    async with secured(ALICE) as owner:
        ticket = (await owner.pty.connect_token(pty)).data
        other = (await owner.pty.connect_token(pty)).data
        second_terminal = (await owner.pty.create(command="sh", args=["-c", "exec cat"])).data.id
    assert ticket.expires_in == 60 and ticket.ticket != other.ticket
    async with secured(None) as browser:
        async with browser.pty.connect(pty, ticket=ticket.ticket) as ws:
            await read_until(ws, "shell-ready")
        with pytest.raises(ForbiddenError):  # used once already
            async with browser.pty.connect(pty, ticket=ticket.ticket):
                pass
        with pytest.raises(ForbiddenError):  # issued for another terminal (and now spent)
            async with browser.pty.connect(second_terminal, ticket=other.ticket):
                pass
        with pytest.raises(ForbiddenError):
            async with browser.pty.connect(pty, ticket="guessed"):
                pass


async def test_a_bad_ticket_learns_nothing_about_directories_or_terminals(secured, tmp_path):
    # issue 39: the ticket is judged before the location and the terminal, so every guess gets the same 403
    pty = await _terminal(secured)
    async with secured(None) as browser:
        for directory, terminal in ((str(tmp_path), pty), (str(tmp_path / "no-such-directory"), pty),
                                    (None, "pty_no_such_terminal")):
            with pytest.raises(ForbiddenError):
                async with browser.pty.connect(terminal, ticket="guessed", location_directory=directory):
                    pass


async def test_a_foreign_origin_cannot_open_a_terminal(secured):
    pty = await _terminal(secured)
    async with secured(ALICE, {"Origin": "https://evil.example"}) as page:
        with pytest.raises(ForbiddenError):
            async with page.pty.connect(pty):
                pass


async def test_a_rebound_host_name_cannot_open_a_terminal_on_the_network(tmp_path):
    srv = start_server(tmp_path, env=isolated_env(tmp_path))
    try:
        async with OpenCodeClient(srv.url) as client:
            pty = (await client.pty.create(command="sh", args=["-c", "exec cat"])).data.id
        path = f"/api/pty/{pty}/connect"
        url = srv.url.replace("http://", "ws://") + path
        port = int(srv.url.rsplit(":", 1)[1])
        # a page rebound to loopback names its own domain as Host; one on another site says so in Origin
        rebound = {"uri": f"ws://attacker.example:{port}{path}", "host": "127.0.0.1", "port": port}
        foreign = {"uri": url, "origin": "http://attacker.example"}
        for attempt in (rebound, foreign):
            with pytest.raises(InvalidStatus) as refused:
                async with connect(**attempt, proxy=None):
                    pass
            assert refused.value.response.status_code == 403, attempt
            assert b"ForbiddenError" in refused.value.response.body
        async with connect(url, origin=srv.url, proxy=None) as ws:  # the server's own page may connect
            assert isinstance(await ws.recv(), bytes)  # the cursor frame: nothing was replayed
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)


def test_tickets_are_single_use_scoped_and_short_lived(tmp_path):
    tickets = ConnectTickets()
    issued = tickets.issue("pty_a", tmp_path)
    assert not tickets.consume(issued.ticket, "pty_a", tmp_path / "elsewhere")
    assert not tickets.consume(issued.ticket, "pty_a", tmp_path)  # a wrong presentation spends it too
    fresh = tickets.issue("pty_a", tmp_path)
    assert tickets.consume(fresh.ticket, "pty_a", tmp_path)
    assert not tickets.consume(fresh.ticket, "pty_a", tmp_path)
    expired = ConnectTickets(ttl=0)
    assert not expired.consume(expired.issue("pty_a", tmp_path).ticket, "pty_a", tmp_path)
    bounded = ConnectTickets(capacity=2)
    first = bounded.issue("pty_a", tmp_path)
    bounded.issue("pty_a", tmp_path)
    bounded.issue("pty_a", tmp_path)
    assert not bounded.consume(first.ticket, "pty_a", tmp_path)
