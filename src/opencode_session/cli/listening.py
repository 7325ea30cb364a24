"""Where a running `ocs serve` listens, recorded beside its SQLite database (`<database>.server`, private, no secret
in it), so that a local command on that database talks to the server instead of refusing: written once the server
listens, removed when it stops cleanly, and ignored when the process it names is gone; and what a command needs to
talk to it (the server holding a database, the credentials)."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from ..core.store import is_postgres, server_record_file

if TYPE_CHECKING:
    from ..core.store import DatabaseInUseError

PASSWORD_ENV, USERNAME_ENV = "OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME"

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


def credentials(env: Mapping[str, str], username: str | None = None) -> tuple[str, str] | None:
    """HTTP basic credentials from the environment `ocs serve` reads them from (the user: the environment's, else
    `username`, else opencode); None without a password."""
    password = env.get(PASSWORD_ENV)
    return (env.get(USERNAME_ENV) or username or "opencode", password) if password else None


def holding_server(database: str | Path) -> tuple[ServerRecord, DatabaseInUseError] | None:
    """The `ocs serve` that holds this SQLite database, and how opening the database fails because it does; None
    when no process holds it, or one that recorded nothing (another command's embedded host: opening it says so)."""
    if is_postgres(database) or str(database) == ":memory:":
        return None
    from ..core.store.sqlite.lock import holder

    busy = holder(database)
    server = None if busy is None else read_record(database)
    if busy is None or server is None or (busy.pid is not None and server.pid != busy.pid):
        return None
    return server, busy
