"""`ocs` (also installed as `opencode-session`): the command line. Each command imports what it needs when it
runs, so `ocs --help` and `ocs serve` load no more than they use."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import typer

app = typer.Typer(add_completion=False, no_args_is_help=False,
                  help="opencode-session: durable OpenCode V2 sessions. Without a command: interactive mode.")

ATTACH_HELP = "Use the running `ocs serve` at this URL instead of the local database."
DB_HELP = "SQLite database file (default: under the user data directory)."


def _cwd() -> Path:
    return Path(os.getcwd())


def _finish(work: Callable[[], Coroutine[Any, Any, None]]) -> None:
    """Run a reading command with the same Ctrl-C and error handling as `ocs run`."""
    from .render import PlainView
    from .run import EXIT_OK, run_command

    async def body(_view: Any, _interrupts: Any) -> int:
        await work()
        return EXIT_OK

    raise typer.Exit(run_command(PlainView(), body))


@app.command()
def serve(
    host: str = typer.Option("127.0.0.1", help="Interface to listen on."),
    port: int = typer.Option(4096, help="Port to listen on; 0 picks a free port."),
    db: Path = typer.Option(None, help=DB_HELP),
    directory: Path = typer.Option(None, help="Default Location for new sessions (default: current directory)."),
    allow_host: list[str] = typer.Option([], help="A Host name clients may use besides loopback (repeatable)."),
    allow_origin: list[str] = typer.Option(
        [], help="A browser origin allowed to call the API, e.g. https://app.example.com (repeatable)."),
    max_body_bytes: int = typer.Option(None, min=1, help="Largest request body accepted (default 10 MiB)."),
    read_timeout: float = typer.Option(
        None, min=0.1, help="Seconds a client has to send each request, body included (default 30)."),
    max_concurrency: int = typer.Option(
        None, min=1, help="Open connections and requests before new requests get 503 (default 512)."),
    insecure_no_password: bool = typer.Option(
        False, help="Listen beyond loopback even without OPENCODE_SERVER_PASSWORD."),
    stall_timeout: float = typer.Option(15.0, help="Cut off an event stream whose reader accepts nothing for this "
                                                   "many seconds."),
) -> None:
    """Serve the OpenCode V2 API over HTTP until SIGINT/SIGTERM."""
    from dataclasses import replace

    from ..server.guard import GuardOptions
    from ..server.serve import ConnectionLimits
    from .serving import ServeRequest
    from .serving import serve as run_server
    from .startup import default_db_path

    guard = GuardOptions(allowed_hosts=tuple(allow_host), allowed_origins=tuple(allow_origin))
    if max_body_bytes is not None:
        guard = replace(guard, max_body_bytes=max_body_bytes)
    limits = ConnectionLimits()
    if read_timeout is not None:
        limits = replace(limits, read_timeout=read_timeout)
    if max_concurrency is not None:
        limits = replace(limits, max_concurrency=max_concurrency)
    request = ServeRequest(host=host, port=port, db=db or default_db_path(), directory=directory or _cwd(),
                           guard=guard, limits=limits, insecure_no_password=insecure_no_password,
                           stall_timeout=stall_timeout)
    raise typer.Exit(run_server(request))


def _run(message: list[str] | None, *, interactive: bool, **options: Any) -> None:
    from .run import RunRequest, execute

    text = " ".join(message or []).strip() or None
    if text is None and not interactive:
        if sys.stdin.isatty():
            interactive = True
        else:
            text = sys.stdin.read().strip() or None
            if text is None:
                typer.echo("ocs run: no message (give one as an argument or on standard input)", err=True)
                raise typer.Exit(2)
    if interactive and options.get("json"):
        typer.echo("ocs run: --format json does not go with interactive mode", err=True)
        raise typer.Exit(2)
    raise typer.Exit(execute(RunRequest(directory=_cwd(), message=text, interactive=interactive, **options)))


@app.command()
def run(
    message: list[str] = typer.Argument(None, help="The message; without one, interactive mode."),
    model: str = typer.Option(None, "--model", "-m", help="The model, as provider/model."),
    agent: str = typer.Option(None, "--agent", help="The agent to use."),
    session: str = typer.Option(None, "--session", "-s", help="Continue this session."),
    continue_last: bool = typer.Option(False, "--continue", "-c", help="Continue this directory's latest session."),
    attach: str = typer.Option(None, "--attach", help=ATTACH_HELP),
    output: str = typer.Option("default", "--format", help="default (text as it streams) or json (an event a line)."),
    queue: bool = typer.Option(False, "--queue", help="Deliver the message queued instead of steering."),
    interactive: bool = typer.Option(False, "--interactive", "-i", help="Keep prompting after the first turn."),
    db: Path = typer.Option(None, help=DB_HELP),
    yes: bool = typer.Option(False, "--yes", "-y",
                             help="Allow each permission ask once and take each question's first option."),
    no: bool = typer.Option(False, "--no", help="Reject each permission ask and dismiss each question."),
) -> None:
    """Send a message to a session of this directory and show the agent's work as it happens.

    Ctrl-C interrupts the session (carry on later with --continue); a second Ctrl-C quits at once. In
    interactive mode, what you type while a turn runs steers it on Enter and is queued on Tab."""
    if output not in ("default", "json"):
        typer.echo(f"ocs run: --format is default or json, not {output!r}", err=True)
        raise typer.Exit(2)
    if yes and no:
        typer.echo("ocs run: --yes and --no exclude each other", err=True)
        raise typer.Exit(2)
    _run(message, interactive=interactive, model=model, agent=agent, session=session, continue_last=continue_last,
         attach=attach, json=output == "json", queue=queue, db=db, yes=yes, no=no)


@app.command()
def sessions(
    limit: int = typer.Option(30, min=1, help="How many to show."),
    output: str = typer.Option("default", "--format", help="default (a table) or json (a session a line)."),
    attach: str = typer.Option(None, "--attach", help=ATTACH_HELP),
    db: Path = typer.Option(None, help=DB_HELP),
) -> None:
    """List sessions, most recently updated first."""
    from .inspect import list_sessions

    _finish(lambda: list_sessions(attach, db, _cwd(), limit, output == "json"))


@app.command()
def show(
    session: str = typer.Argument(..., help="The session ID."),
    attach: str = typer.Option(None, "--attach", help=ATTACH_HELP),
    db: Path = typer.Option(None, help=DB_HELP),
) -> None:
    """Show a session's transcript: prompts, answers, tool calls and their results."""
    from .inspect import show_session
    from .run import make_view

    _finish(lambda: show_session(attach, db, _cwd(), session, make_view()))


@app.command()
def log(
    session: str = typer.Argument(..., help="The session ID."),
    after: int = typer.Option(None, min=0, help="Only events after this sequence number."),
    follow: bool = typer.Option(False, "--follow", "-f", help="Keep printing new events until Ctrl-C."),
    output: str = typer.Option("default", "--format", help="default (a line an event) or json (the envelopes)."),
    attach: str = typer.Option(None, "--attach", help=ATTACH_HELP),
    db: Path = typer.Option(None, help=DB_HELP),
) -> None:
    """Print a session's durable events."""
    from .inspect import show_log

    _finish(lambda: show_log(attach, db, _cwd(), session, after, follow, output == "json"))


@app.command()
def models() -> None:
    """The models the configuration declares, and which providers have a key."""
    from ..core.config import ConfigError
    from .inspect import show_models

    try:
        show_models(_cwd())
    except ConfigError as bad:
        typer.echo(f"ocs: {bad}", err=True)
        raise typer.Exit(1) from None


@app.command()
def openapi() -> None:
    """Print the OpenAPI document of the V2 API."""
    from .inspect import print_openapi

    print_openapi()


@app.command()
def demo(
    keep: bool = typer.Option(False, help="Keep the scratch project instead of removing it."),
    pace: float = typer.Option(None, hidden=True, help="Seconds between streamed pieces (default: on a terminal)."),
) -> None:
    """A complete offline demonstration: a scripted model on loopback, a scratch project, and a session."""
    from .demo import run_demo

    raise typer.Exit(run_demo(keep=keep, pace=pace))


@app.callback(invoke_without_command=True)
def _root(context: typer.Context) -> None:
    """opencode-session command line."""
    if context.invoked_subcommand is not None:
        return
    if not sys.stdin.isatty():
        typer.echo(context.get_help())
        raise typer.Exit(0)
    _run(None, interactive=True, model=None, agent=None, session=None, continue_last=False, attach=None,
         json=False, queue=False, db=None)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
