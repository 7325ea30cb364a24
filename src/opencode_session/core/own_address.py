"""The addresses this process serves its API on (registered by `ocs serve` once it listens), so that a tool the
model drives (`webfetch`) does not call the server back, through any loopback alias, with or without user info."""

from __future__ import annotations

import ipaddress
import socket
import threading
from urllib.parse import urlsplit

_lock = threading.Lock()
_served: set[tuple[str, int]] = set()  # (bound host, port)
_WILDCARDS = ("", "0.0.0.0", "::")


def register(host: str, port: int) -> None:
    with _lock:
        _served.add((host, port))


def unregister(host: str, port: int) -> None:
    with _lock:
        _served.discard((host, port))


def _addresses(name: str) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Every address `name` stands for: an IP in any spelling the C library accepts (`127.1`, `0x7f.1`,
    `2130706433`), else what the resolver answers (nothing when it cannot)."""
    name = name.strip("[]").rstrip(".").lower()
    try:
        return [ipaddress.ip_address(name)]
    except ValueError:
        pass
    try:
        return [ipaddress.ip_address(socket.inet_ntoa(socket.inet_aton(name)))]
    except OSError:
        pass
    try:
        infos = socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)
    except (OSError, UnicodeError):
        return []
    found = []
    for info in infos:
        try:
            found.append(ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]))
        except ValueError:
            continue
    return found


def _local(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    address = mapped or address
    return address.is_loopback or address.is_unspecified


def is_own(url: str) -> bool:
    """Whether `url` reaches one of this process's servers: its port is one served, and its host is a loopback or
    unspecified address, or the address the server was bound to. Resolves names: call it off the event loop."""
    with _lock:
        served = set(_served)
    if not served:
        return False
    try:
        parts = urlsplit(url)
        port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return False
    if parts.hostname is None or port is None:
        return False
    hosts = {host for host, served_port in served if served_port == port}
    if not hosts:
        return False
    addresses = _addresses(parts.hostname)
    bound = {a for host in hosts if host not in _WILDCARDS for a in _addresses(host)}
    return any(_local(a) or a in bound for a in addresses) or (
        any(host in _WILDCARDS for host in hosts) and _any_interface(addresses))


def _any_interface(addresses: list[ipaddress.IPv4Address | ipaddress.IPv6Address]) -> bool:
    """A server bound to every interface is also reached at this machine's own names' addresses."""
    own: set[ipaddress.IPv4Address | ipaddress.IPv6Address] = set()
    for name in (socket.gethostname(), socket.getfqdn()):
        own.update(_addresses(name))
    return any(a in own for a in addresses)


__all__ = ["is_own", "register", "unregister"]
