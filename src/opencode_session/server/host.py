"""What the server adds around core for terminals: the PTY Environment adapter (the host's overlay on a new
terminal's environment, over the plugins' additions) and the single-use tickets that open a terminal's WebSocket
without the password."""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from ..core.location import Location
from ..schema.pty import PtyTicketConnectToken

if TYPE_CHECKING:
    from ..core.plugins.hooks import PluginHooks

# The host's additions to a new terminal's environment, observed for the request's Location and the terminal's
# resolved working directory. A standalone server adds nothing.
PtyEnvironment = Callable[[Location, Path], Mapping[str, str]]


def no_overlay(_location: Location, _cwd: Path) -> Mapping[str, str]:
    return {}


def with_plugins(overlay: PtyEnvironment, hooks: PluginHooks) -> PtyEnvironment:
    """The host's overlay over what the plugins' PTY Environment hooks add (the host's own word wins)."""

    def merged(location: Location, cwd: Path) -> Mapping[str, str]:
        return {**hooks.pty_environment(location, cwd), **overlay(location, cwd)}

    return merged


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
