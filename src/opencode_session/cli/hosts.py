"""Where a command's sessions live: the embedded host on a local database, or a running `ocs serve` reached
through the network client: the one `--attach URL` names, or the one that has the local database open (it records
where it listens: listening.py). Both are the same client API."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from ..client.errors import ClientError
from ..client.generated import OpenCodeClient
from ..client.runtime import CallOptions
from ..schema.errors import UnauthorizedError
from . import collector
from .listening import PASSWORD_ENV, USERNAME_ENV, credentials, holding_server
from .startup import StartupError, default_db_path, missing_database, say_stderr

if TYPE_CHECKING:
    from ..core.store import DatabaseInUseError
    from .listening import ServerRecord

PROBE_TIMEOUT = 5.0  # seconds a recorded server has to answer before the command runs as if there were none


def _reason(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__


@asynccontextmanager
async def open_host(attach: str | None, db: str | Path | None, directory: Path,
                    env: Mapping[str, str] | None = None, *, plugins: bool = False,
                    create: bool = True, say: Callable[[str], None] = say_stderr) -> AsyncIterator[OpenCodeClient]:
    """The client for this command; raises StartupError when the server cannot be reached or the database opened.
    With `plugins` an embedded host loads the installed Python plugins and opencode.json's (a server has its own);
    without `create` (a command that only reads) a database that does not exist is not created. When an `ocs serve`
    has the database open, the command talks to it, saying so with `say`."""
    env = os.environ if env is None else env
    if attach:
        async with OpenCodeClient(attach, auth=credentials(env)) as client:
            try:
                await client.health.get()
            except ClientError as unreachable:
                raise StartupError(f"cannot reach ocs serve at {attach}: {unreachable}") from None
            collector.started()
            yield client
        return
    path = db or default_db_path()
    holding = holding_server(path)
    if holding is not None:  # known before the runtime is imported
        async with through_server(*holding, env, say) as client:
            collector.started()
            yield client
        return
    from ..core.store import DatabaseInUseError, DatabaseNotFoundError, StoreError, describe_database
    from ..sdk import OpenCode  # the embedded host brings the whole runtime: only when it is used

    host = OpenCode(db=path, directory=directory, env=env, discover_plugins=plugins, create=create)
    try:
        await host.open()
    except DatabaseNotFoundError:
        await host.aclose()
        raise missing_database(path) from None
    except (OSError, StoreError) as unusable:
        await host.aclose()
        raise StartupError(f"cannot open the database {describe_database(path)}: {_reason(unusable)}"
                           " (choose another with --db)") from None
    except DatabaseInUseError as busy:
        await host.aclose()
        from .listening import read_record

        server, held = read_record(path), busy
        if server is None or (busy.pid is not None and server.pid != busy.pid):
            raise  # another command's embedded host, or a server that recorded nothing (yet)
    else:
        collector.started()
        try:
            yield host
        finally:
            await host.aclose()
        return
    async with through_server(server, held, env, say) as client:
        collector.started()
        yield client


@asynccontextmanager
async def through_server(server: ServerRecord, busy: DatabaseInUseError, env: Mapping[str, str],
                         say: Callable[[str], None]) -> AsyncIterator[OpenCodeClient]:
    """The network client of the server that holds the database, as if `--attach` named it; `busy` again when it
    does not answer, and one line saying how to give the password when it requires one this command lacks."""
    auth = credentials(env, server.username)
    where = f"the server at {server.url} (pid {server.pid})"
    if server.password and auth is None:
        raise StartupError(f"the database {busy.database} is in use by {where}, which requires a password: set "
                           f"{PASSWORD_ENV} to its password (user {server.username}; {USERNAME_ENV} if another) to "
                           "talk to it, as with --attach")
    async with OpenCodeClient(server.url, auth=auth) as client:
        try:
            await client.health.get(options=CallOptions(timeout=PROBE_TIMEOUT))
        except ClientError:
            raise busy from None  # the process lives but does not answer there: refused as before
        except UnauthorizedError:
            raise StartupError(f"the database {busy.database} is in use by {where}, which refused the password in "
                               f"{PASSWORD_ENV} (user {auth[0] if auth else server.username})") from None
        say(f"using {where}, which has this database open")
        yield client
