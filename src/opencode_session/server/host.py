"""What the server adds around core for terminals: the runtime's PTY Environment (the host's overlay on a new
terminal's environment, over the plugins' additions) where handlers reach it, and the single-use tickets that open a
terminal's WebSocket without the password."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path

from ..core.runtime import PtyEnvironment, no_overlay
from ..schema.pty import PtyTicketConnectToken

TICKET_TTL_S = 60
TICKET_CAPACITY = 10_000  # outstanding tickets; the oldest are dropped beyond this


class ConnectTickets:
    """Tickets for one terminal in one Location, each good for one connection within TICKET_TTL_S seconds."""

    def __init__(self, ttl: float = TICKET_TTL_S, capacity: int = TICKET_CAPACITY) -> None:
        self._ttl = ttl
        self._capacity = capacity
        self._issued: OrderedDict[str, tuple[str, str, float]] = OrderedDict()  # ticket -> (ptyID, directory, expiry)

    def issue(self, pty_id: str, directory: Path) -> PtyTicketConnectToken:
        ticket = secrets.token_urlsafe(32)
        self._issued[ticket] = (pty_id, str(directory), time.monotonic() + self._ttl)
        while len(self._issued) > self._capacity:
            self._issued.popitem(last=False)
        return PtyTicketConnectToken(ticket=ticket, expires_in=max(1, round(self._ttl)))

    def known(self, ticket: str, pty_id: str) -> bool:
        """Whether `ticket` was issued for this terminal and has not expired (it is not used up): checked before
        anything else about the request, so a caller without one learns nothing (not even whether a directory
        exists)."""
        issued = self._issued.get(ticket)
        return issued is not None and issued[0] == pty_id and time.monotonic() < issued[2]

    def consume(self, ticket: str, pty_id: str, directory: Path) -> bool:
        """Whether `ticket` opens this terminal in this Location now; a ticket is gone once presented, whatever the
        answer, so a guessed or replayed one never works twice."""
        issued = self._issued.pop(ticket, None)
        if issued is None:
            return False
        issued_for, issued_in, expiry = issued
        return issued_for == pty_id and issued_in == str(directory) and time.monotonic() < expiry


@dataclass
class Host:
    """The server's own services handlers reach through their Call."""

    pty_environment: PtyEnvironment = no_overlay
    tickets: ConnectTickets = field(default_factory=ConnectTickets)
