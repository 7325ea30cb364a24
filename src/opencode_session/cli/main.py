"""`ocs`: the command-line entry point (serve the V2 API; more commands build on the client and SDK)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import platformdirs
import typer

from ..core.execution.runner import runner_drain_factory
from ..core.runtime import RuntimeOptions
from ..core.store import DatabaseInUseError
from ..server.guard import DEFAULT_MAX_BODY_BYTES, GuardOptions
from ..server.serve import ConnectionLimits, ServeRefused
from ..server.serve import serve as serve_app

app = typer.Typer(add_completion=False, help="opencode-session: durable OpenCode V2 sessions.")

APP_NAME = "opencode-session"


def default_db_path() -> Path:
    """The database under the user's data directory (XDG_DATA_HOME on Linux), which is ours alone: 0700, also when
    an older version created it readable by others."""
    folder = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    if folder.is_dir():
        folder.chmod(0o700)
    return folder / "sessions.db"


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(4096, help="Port to listen on; 0 picks a free port."),
    db: Path = typer.Option(None, help="SQLite database file (default: under the user data directory)."),
    directory: Path = typer.Option(None, help="Default Location for new sessions (default: current directory)."),
    allow_host: list[str] = typer.Option([], help="A Host name clients may use besides loopback (repeatable)."),
    allow_origin: list[str] = typer.Option(
        [], help="A browser origin allowed to call the API, e.g. https://app.example.com (repeatable)."),
    max_body_bytes: int = typer.Option(DEFAULT_MAX_BODY_BYTES, min=1, help="Largest request body accepted."),
    read_timeout: float = typer.Option(
        ConnectionLimits.read_timeout, min=0.1, help="Seconds a client has to send each request, body included."),
    max_concurrency: int = typer.Option(
        ConnectionLimits.max_concurrency, min=1, help="Open connections and requests before new requests get 503."),
    insecure_no_password: bool = typer.Option(
        False, help="Listen beyond loopback even without OPENCODE_SERVER_PASSWORD."),
    stall_timeout: float = typer.Option(15.0, help="Cut off an event stream whose reader accepts nothing for this "
                                                   "many seconds."),
) -> None:
    """Serve the OpenCode V2 API over HTTP until SIGINT/SIGTERM."""
    db_path = db or default_db_path()
    options = RuntimeOptions(db_path=db_path, directory=directory or Path(os.getcwd()),
                             drain_factory=runner_drain_factory)
    guard = GuardOptions(allowed_hosts=tuple(allow_host), allowed_origins=tuple(allow_origin),
                         max_body_bytes=max_body_bytes)
    limits = ConnectionLimits(read_timeout=read_timeout, max_concurrency=max_concurrency)

    def ready(url: str, _runtime) -> None:
        typer.echo(f"opencode-session listening on {url}", err=False)
        typer.echo(f"database: {db_path}", err=True)

    try:
        asyncio.run(serve_app(options, host, port, on_ready=ready, guard=guard, limits=limits,
                              insecure_no_password=insecure_no_password, stall_timeout=stall_timeout))
    except ServeRefused as refused:
        typer.echo(f"ocs serve: {refused}", err=True)
        raise typer.Exit(2) from None
    except DatabaseInUseError as busy:
        typer.echo(f"ocs serve: {busy}", err=True)
        raise typer.Exit(1) from None


@app.callback()
def _root() -> None:
    """opencode-session command line."""


def main() -> None:
    app()


if __name__ == "__main__":
    main()
