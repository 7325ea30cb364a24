"""Where a running `ocs serve` listens, recorded beside its SQLite database (`<database>.server`, private, no secret
in it), so that a local command on that database talks to the server instead of refusing: written once the server
listens, removed when it stops cleanly, and ignored when the process it names is gone."""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from ..core.store import server_record_file

_WILDCARDS = {"0.0.0.0": "127.0.0.1", "::": "[::1]", "": "127.0.0.1"}


@dataclass(frozen=True)
class ServerRecord:
    pid: int
    url: str  # one this host can connect to (a wildcard address is recorded as loopback)
    username: str | None = None  # set when the server requires a password (HTTP basic); the password never is

    @property
    def password(self) -> bool:
        return self.username is not None


def connectable(url: str, host: str) -> str:
    """The server's URL as a client on this host reaches it: a wildcard listening address becomes loopback."""
    if host not in _WILDCARDS:
        return url
    return f"http://{_WILDCARDS[host]}:{urlsplit(url).port}"


def write_record(database: str | Path, record: ServerRecord) -> Path | None:
    """Record where this server listens (replacing what a dead one left); None when the database is not a local
    file (several hosts share a PostgreSQL one, and none is the only one to talk to)."""
    path = server_record_file(database)
    if path is None:
        return None
    data = {"pid": record.pid, "url": record.url, "username": record.username}
    partial = path.with_name(f"{path.name}.{record.pid}.tmp")
    fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_CLOEXEC", 0), 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(data) + "\n")
    os.replace(partial, path)  # whole or not at all: a reader never sees half a record
    return path


def remove_record(path: Path, pid: int) -> None:
    """Remove the record if it is still this process's."""
    record = _load(path)
    if record is not None and record.pid == pid:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def read_record(database: str | Path) -> ServerRecord | None:
    """The server recorded for `database`, if one is and its process still runs."""
    path = server_record_file(database)
    record = _load(path) if path is not None else None
    if record is None or not _alive(record.pid):
        return None
    return record


def _load(path: Path) -> ServerRecord | None:
    try:
        data = json.loads(path.read_text())
        record = ServerRecord(int(data["pid"]), str(data["url"]), data.get("username"))
    except (OSError, ValueError, TypeError, KeyError):
        return None  # none, or not one this version wrote: as if none
    if not record.url.startswith(("http://", "https://")) or record.pid <= 0:
        return None
    return record


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: it exists
    return True
