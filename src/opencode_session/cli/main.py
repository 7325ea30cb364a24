"""`ocs` (also installed as `opencode-session`): the command line, parsed with argparse. Each command imports what
it needs when it runs, so `ocs --help` and `ocs serve` load no more than they use."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from . import collector

PROG = "ocs"
ROOT_HELP = "opencode-session: durable OpenCode V2 sessions. Without a command: interactive mode."
ATTACH_HELP = "Use the running `ocs serve` at this URL instead of the local database."
DB_HELP = ("SQLite database file (default: under the user data directory), or a postgresql:// URL shared by several"
           " hosts.")
HELP_HELP = "Show this message and exit."

Command = Callable[..., int]


def _cwd() -> Path:
    return Path(os.getcwd())


def _finish(work: Callable[[], Coroutine[Any, Any, None]]) -> int:
    """Run a reading command with the same Ctrl-C and error handling as `ocs run`."""
    from .run import EXIT_OK

    async def done() -> int:
        await work()
        return EXIT_OK

    return _finish_with(done)


def _finish_with(work: Callable[[], Coroutine[Any, Any, int]]) -> int:
    """Run a command to its exit code with the same Ctrl-C and error handling as `ocs run`."""
    from .render import PlainView
    from .run import run_command

    async def body(_view: Any, _interrupts: Any) -> int:
        return await work()

    return run_command(PlainView(), body)


def serve(host: str, port: int, db: str | Path | None, directory: Path | None, allow_host: list[str],
          allow_origin: list[str], max_body_bytes: int | None, read_timeout: float | None,
          max_concurrency: int | None, insecure_no_password: bool, stall_timeout: float,
          log_format: str = "text", open_browser: bool = False, trust_proxy: list[str] | None = None) -> int:
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
    if trust_proxy:
        limits = replace(limits, trusted_proxies=tuple(trust_proxy))
    request = ServeRequest(host=host, port=port, db=db or default_db_path(), directory=directory or _cwd(),
                           guard=guard, limits=limits, insecure_no_password=insecure_no_password,
                           stall_timeout=stall_timeout, log_format=log_format, open_browser=open_browser)
    return run_server(request)


def ui(browser: bool, **options: Any) -> int:
    """Serve the API and the session inspector (on a free port by default) and open the inspector in the browser."""
    return serve(**options, open_browser=browser)


def _run(message: list[str] | None, *, interactive: bool, **options: Any) -> int:
    from .run import RunRequest, execute

    text = " ".join(message or []).strip() or None
    if options.get("command") is not None:  # the words are the command's arguments, which may be none
        if interactive:
            print("ocs run: --command does not go with interactive mode (type /NAME there)", file=sys.stderr)
            return 2
        return execute(RunRequest(directory=_cwd(), message=text or "", **options))
    if text is None and not interactive:
        if sys.stdin.isatty():
            interactive = True
        else:
            text = sys.stdin.read().strip() or None
            if text is None:
                print("ocs run: no message (give one as an argument or on standard input)", file=sys.stderr)
                return 2
    if interactive and options.get("json"):
        print("ocs run: --format json does not go with interactive mode", file=sys.stderr)
        return 2
    request = RunRequest(directory=_cwd(), message=text, interactive=interactive, **options)
    if interactive:
        from .interactive import execute as interactive_mode

        return interactive_mode(request)
    return execute(request)


def run(message: list[str], model: str | None, agent: str | None, session: str | None, continue_last: bool,
        attach: str | None, output: str, queue: bool, interactive: bool, db: str | Path | None, yes: bool,
        no: bool, command: str | None = None) -> int:
    """Send a message to a session of this directory and show the agent's work as it happens.

    Ctrl-C interrupts the session (carry on later with --continue); a second Ctrl-C quits at once. In
    interactive mode, what you type while a turn runs steers it on Enter and is queued on Tab."""
    if output not in ("default", "json"):
        print(f"ocs run: --format is default or json, not {output!r}", file=sys.stderr)
        return 2
    if yes and no:
        print("ocs run: --yes and --no exclude each other", file=sys.stderr)
        return 2
    return _run(message, interactive=interactive, model=model, agent=agent, session=session,
                continue_last=continue_last, attach=attach, json=output == "json", queue=queue, db=db, yes=yes, no=no,
                command=command)


def sessions(limit: int, output: str, attach: str | None, db: str | Path | None, children: str | None = None,
             search: str | None = None) -> int:
    """List sessions, most recently updated first (with --search, the best matches first); manage them with
    `ocs sessions ACTION` (rm, rename, export, import, diff, stats: `ocs sessions ACTION --help`)."""
    if children is None and search is None:
        from . import local

        answered = local.sessions(attach, db, limit, output == "json")
        if answered is not None:
            return answered
    from .inspect import list_sessions

    return _finish(lambda: list_sessions(attach, db, _cwd(), limit, output == "json", children, search))


# --- ocs sessions ACTION: managing sessions ---------------------------------------------------------------


def sessions_rm(session: list[str], yes: bool, attach: str | None, db: str | Path | None) -> int:
    """Remove sessions and their child sessions, with their history (asks first unless --yes)."""
    from .manage import remove_command

    return _finish_with(lambda: remove_command(attach, db, _cwd(), session, yes))


def sessions_rename(session: str, title: str, attach: str | None, db: str | Path | None) -> int:
    """Give a session a title (the automatic title never replaces it)."""
    from .manage import rename_command

    return _finish_with(lambda: rename_command(attach, db, _cwd(), session, title))


def sessions_export(session: str, sanitize: bool, attach: str | None, db: str | Path | None) -> int:
    """Print a session's transcript as JSON (`> file.json`); --sanitize removes what must not leave the machine."""
    from .manage import export_command

    return _finish_with(lambda: export_command(attach, db, _cwd(), session, sanitize))


def sessions_import(file: str, here: bool, attach: str | None, db: str | Path | None) -> int:
    """Recreate an exported session (a file, or - for standard input) and print its ID."""
    from .manage import import_command

    return _finish_with(lambda: import_command(attach, db, _cwd(), file, here))


def _sessions_rm_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="+", help="The session IDs.")
    p.add_argument("-y", "--yes", action="store_true", help="Remove without asking.")
    _reading(p)


def _sessions_rename_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("title", help="The new title.")
    _reading(p)


def _sessions_export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("--sanitize", action="store_true",
                   help="Remove keys, the home directory's path, attachments' bytes and tool output file paths.")
    _reading(p)


def _sessions_import_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="A file `ocs sessions export` wrote, or - for standard input.")
    p.add_argument("--here", action="store_true",
                   help="Place the session in the current directory (default: the server's directory; without "
                        "--attach that is the current directory too).")
    _reading(p)


def sessions_diff(session: str, turn: str | None, attach: str | None, db: str | Path | None) -> int:
    """Show what a turn changed on disk as a unified diff (coloured on a terminal): the newest turn, or the one
    prompt MSG started."""
    from .manage import diff_command

    return _finish_with(lambda: diff_command(attach, db, _cwd(), session, turn))


def stats(since: str | None, by: str, timezone: str | None, attach: str | None, db: str | Path | None) -> int:
    """Print a table of sessions, prompts, Steps, tokens and cost per model, day or agent, and each tool's calls and
    failures."""
    from . import local

    answered = local.stats(attach, db, since, by, timezone)
    if answered is not None:
        return answered
    from .manage import stats_command

    return _finish_with(lambda: stats_command(attach, db, _cwd(), since, by, timezone))


def _sessions_diff_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("--turn", metavar="MSG", help="The prompt (user message ID) whose turn to show.")
    _reading(p)


def _stats_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--since", metavar="AGE", help="Only the last AGE: a number and m, h, d or w (7d).")
    p.add_argument("--by", choices=("model", "day", "agent"), default="model", help="How to break usage down.")
    p.add_argument("--timezone", metavar="ZONE", help="IANA time zone of the days (default: $TZ, else UTC).")
    _reading(p)


# each action of `ocs sessions ACTION`: its function (whose docstring is its help) and its arguments
SESSION_ACTIONS: dict[str, tuple[Command, Callable[[argparse.ArgumentParser], None]]] = {
    "rm": (sessions_rm, _sessions_rm_arguments),
    "rename": (sessions_rename, _sessions_rename_arguments),
    "export": (sessions_export, _sessions_export_arguments),
    "import": (sessions_import, _sessions_import_arguments),
    "diff": (sessions_diff, _sessions_diff_arguments),
    "stats": (stats, _stats_arguments),
}


def show(session: str | None, output: str, attach: str | None, db: str | Path | None,
         context: str | None = None) -> int:
    """Show a session's transcript: prompts, answers, tool calls and their results.

    With --context STEP: what that Step (an assistant message ID) sent its model, section by section, and what
    changed since the session's previous Step."""
    if context is not None:
        from .inspect import show_context

        step = context
        return _finish(lambda: show_context(attach, db, _cwd(), session, step, output == "json"))
    assert session is not None  # the parser requires it without --context
    from . import local

    answered = local.show(attach, db, session, output == "json")
    if answered is not None:
        return answered
    from .inspect import show_session

    chosen = session
    return _finish(lambda: show_session(attach, db, _cwd(), chosen, output == "json"))


def log(session: str, after: int | None, follow: bool, output: str, attach: str | None, db: str | Path | None) -> int:
    """Print a session's durable events."""
    from .inspect import show_log

    return _finish(lambda: show_log(attach, db, _cwd(), session, after, follow, output == "json"))


def revert(session: str, message: str | None, yes: bool, attach: str | None, db: str | Path | None) -> int:
    """Take a session back to before one of its prompts: files and history.

    Stages a revert to MESSAGE (default: the latest prompt), which restores the files the agent changed from
    there on and lists them, then asks before removing that prompt and everything after it from the session
    (--yes: without asking). Declining puts the files back as the agent left them."""
    from .undo import revert_command

    return _finish_with(lambda: revert_command(attach, db, _cwd(), session, message, yes))


def fork(session: str, message: str | None, attach: str | None, db: str | Path | None) -> int:
    """Copy a session into a new one (up to and including MESSAGE, default all of it) and print its ID."""
    from .undo import fork_command

    return _finish_with(lambda: fork_command(attach, db, _cwd(), session, message))


def models() -> int:
    """The models the configuration declares, and which providers have a key."""
    from ..core.config import ConfigError
    from .inspect import show_models

    try:
        show_models(_cwd())
    except ConfigError as bad:
        print(f"ocs: {bad}", file=sys.stderr)
        return 1
    return 0


def plugins(output: str) -> int:
    """List the Python plugins loaded here: where each comes from and what it contributes, or why it is not loaded."""
    from .plugins import list_plugins

    if output not in ("default", "json"):
        print(f"ocs plugins: --format is default or json, not {output!r}", file=sys.stderr)
        return 2
    return list_plugins(_cwd(), output == "json")


def hooks(output: str) -> int:
    """List the user hooks a session here runs (opencode.json's `hooks`): event, matcher, handler and timeout."""
    from .hooks import list_hooks

    if output not in ("default", "json"):
        print(f"ocs hooks: --format is default or json, not {output!r}", file=sys.stderr)
        return 2
    return list_hooks(_cwd(), output == "json")


def trust(directory: str | None, show: bool, revoke: bool, output: str) -> int:
    """Trust this directory's project configuration (its opencode.json hooks, MCP servers, plugins and permissions
    run only once trusted, and again only after a change is trusted anew).

    Without DIR: the current directory. --show says whether it is trusted and what it configures; --revoke takes
    the trust back. The trust is kept in the user's data directory, for the content the configuration has now."""
    from .trust import trust_location

    if output not in ("default", "json"):
        print(f"ocs trust: --format is default or json, not {output!r}", file=sys.stderr)
        return 2
    return trust_location(Path(directory) if directory else _cwd(), show=show, revoke=revoke,
                          as_json=output == "json")


def openapi() -> int:
    """Print the OpenAPI document of the V2 API."""
    from .inspect import print_openapi

    print_openapi()
    return 0


def demo(keep: bool, pace: float | None) -> int:
    """A complete offline demonstration: a scripted model on loopback, a scratch project, and a session."""
    from .demo import run_demo

    return run_demo(keep=keep, pace=pace)


def _interactive_or_help(root: argparse.ArgumentParser) -> int:
    """`ocs` without a command: interactive mode on a terminal, the help otherwise."""
    if not sys.stdin.isatty():
        root.print_help()
        return 0
    return _run(None, interactive=True, model=None, agent=None, session=None, continue_last=False, attach=None,
                json=False, queue=False, db=None)


class _HelpFormatter(argparse.HelpFormatter):
    """Descriptions keep their paragraphs; an option's help ends with its default when the default says something."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        fill = super()._fill_text
        return "\n\n".join(fill(paragraph, width, indent) for paragraph in text.split("\n\n"))

    def add_argument(self, action: argparse.Action) -> None:
        super().add_argument(action)
        if action.nargs == argparse.PARSER:  # the commands are listed indented once more than measured
            self._action_max_length += 2

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if (not action.option_strings or "%(default)" in text
                or action.default in (None, False, [], argparse.SUPPRESS)):
            return text
        return text + " (default: %(default)s)"


def _at_least(kind: Callable[[str], int | float], low: int | float) -> Callable[[str], int | float]:
    """An argument type: a number of `kind` no smaller than `low` (violations are usage errors, exit 2)."""

    def convert(text: str) -> int | float:
        value = kind(text)  # a ValueError reads "invalid int value: 'x'"
        if not value >= low:  # NaN included
            raise argparse.ArgumentTypeError(f"{text} is not in the range x>={low}")
        return value

    convert.__name__ = getattr(kind, "__name__", "number")
    return convert


_URL_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")  # a scheme (one letter would be a Windows drive)


def database_argument(text: str) -> str | Path:
    """A database file, or a `postgresql://` URL (kept as written: a path would fold its `//`). A typo must not
    make a new database somewhere unexpected: a value that looks like a URL but is not a valid postgresql:// one is a
    usage error (and a file in a directory that does not exist, unless --mkdir: `_checked`)."""
    if text.startswith(("postgresql://", "postgres://")):
        try:
            urlsplit(text).port  # noqa: B018  (a port that is not a number raises)
        except ValueError as bad:
            raise argparse.ArgumentTypeError(f"{text!r} is not a valid PostgreSQL URL: {bad}") from None
        return text
    if _URL_LIKE.match(text):
        file = "" if "/" in text else f"; for a file whose name has a colon, write ./{text}"
        raise argparse.ArgumentTypeError(
            f"{text!r} looks like a URL but is not a postgresql:// one (write postgresql://HOST/DATABASE{file})")
    return Path(text)


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", type=database_argument, metavar="PATH|URL", help=DB_HELP)
    parser.add_argument("--mkdir", action="store_true",
                        help="Create the directories of the --db file that do not exist (without it, a missing one is"
                             " refused: a typo must not make a new database somewhere else).")


def _checked(parser: argparse.ArgumentParser, options: dict[str, Any]) -> dict[str, Any]:
    """The parsed options, once a --db file's directory exists or --mkdir asks for it (which the store creates)."""
    create = options.pop("mkdir", False)
    if "context" in options and options["context"] is None and options.get("session") is None:
        parser.error("the following arguments are required: session")  # `ocs show` without --context
    db = options.get("db")
    if isinstance(db, Path) and not create and not db.parent.exists():
        parser.error(f"argument --db: the directory {str(db.parent)!r} does not exist: create it, or add --mkdir to"
                     " have it created")
    return options


def _reading(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--attach", metavar="URL", help=ATTACH_HELP)
    _db_option(parser)


def _serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="Interface to listen on.")
    p.add_argument("--port", type=int, default=4096, help="Port to listen on; 0 picks a free port.")
    _db_option(p)
    p.add_argument("--directory", type=Path, metavar="DIR",
                   help="Default Location for new sessions (default: current directory).")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="A Host name clients may use besides loopback (repeatable).")
    p.add_argument("--allow-origin", action="append", default=[], metavar="ORIGIN",
                   help="A browser origin allowed to call the API, e.g. https://app.example.com (repeatable).")
    p.add_argument("--max-body-bytes", type=_at_least(int, 1), metavar="BYTES",
                   help="Largest request body accepted (default 10 MiB).")
    p.add_argument("--read-timeout", type=_at_least(float, 0.1), metavar="SECONDS",
                   help="Seconds a client has to send each request, body included (default 30).")
    p.add_argument("--max-concurrency", type=_at_least(int, 1), metavar="N",
                   help="Open connections and requests before new requests get 503 (default 512).")
    p.add_argument("--trust-proxy", action="append", default=[], metavar="ADDRESS",
                   help="A reverse proxy (address or network) whose X-Forwarded-For names the client (repeatable; "
                        "default: none, the client is the connection's peer).")
    p.add_argument("--insecure-no-password", action=argparse.BooleanOptionalAction, default=False,
                   help="Listen beyond loopback even without OPENCODE_SERVER_PASSWORD.")
    p.add_argument("--stall-timeout", type=float, default=15.0, metavar="SECONDS",
                   help="Cut off an event stream whose reader accepts nothing for this many seconds.")
    p.add_argument("--log-format", choices=("text", "json"), default="text",
                   help="stderr as text, or one JSON object a line with trace and span IDs.")


def _ui_arguments(p: argparse.ArgumentParser) -> None:
    _serve_arguments(p)
    p.set_defaults(port=0)
    p.add_argument("--browser", action=argparse.BooleanOptionalAction, default=True,
                   help="Open the inspector in the web browser (it prints the URL either way).")


def _run_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("message", nargs="*", help="The message; without one, interactive mode.")
    p.add_argument("-m", "--model", metavar="PROVIDER/MODEL", help="The model, as provider/model.")
    p.add_argument("--agent", help="The agent to use.")
    p.add_argument("-s", "--session", metavar="ID", help="Continue this session.")
    p.add_argument("-c", "--continue", dest="continue_last", action="store_true",
                   help="Continue this directory's latest session.")
    p.add_argument("--attach", metavar="URL", help=ATTACH_HELP)
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (text as it streams) or json (an event a line).")
    p.add_argument("--queue", action="store_true", help="Deliver the message queued instead of steering.")
    p.add_argument("-i", "--interactive", action="store_true", help="Keep prompting after the first turn.")
    _db_option(p)
    p.add_argument("-y", "--yes", action="store_true",
                   help="Allow each permission ask once and take each question's first option.")
    p.add_argument("--no", action="store_true", help="Reject each permission ask and dismiss each question.")
    p.add_argument("--command", metavar="NAME",
                   help="Run this custom command (opencode.json's `command`, or a command/*.md file); the message"
                        " words are its arguments.")


def _sessions_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--limit", type=_at_least(int, 1), default=30, help="How many to show.")
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (a table) or json (a session a line).")
    p.add_argument("--children", metavar="ID", help="Only the child sessions of this one.")
    p.add_argument("--search", metavar="TEXT",
                   help="Only sessions whose title or messages hold every word of TEXT, the best matches first.")
    _reading(p)


def _show_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", nargs="?", help="The session ID (with --context: optional, found among this"
                                              " directory's sessions when left out).")
    p.add_argument("--context", metavar="STEP", help="Show the Model Context the Step of this assistant message sent"
                                                     " instead, and what changed since the Step before.")
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (the transcript) or json (its projected messages, one a line, oldest first; with"
                        " --context the Model Context as the API answers it).")
    _reading(p)


def _log_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("--after", type=_at_least(int, 0), metavar="SEQ", help="Only events after this sequence number.")
    p.add_argument("-f", "--follow", action="store_true", help="Keep printing new events until Ctrl-C.")
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (a line an event) or json (the envelopes).")
    _reading(p)


def _revert_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("message", nargs="?", help="The prompt's message ID (default: the latest prompt).")
    p.add_argument("-y", "--yes", action="store_true", help="Commit without asking.")
    _reading(p)


def _fork_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("session", help="The session ID.")
    p.add_argument("message", nargs="?", help="The last message ID to copy (default: all of them).")
    _reading(p)


def _plugins_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (a listing) or json (a plugin a line).")


def _hooks_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (a listing) or json (a handler a line).")


def _trust_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("directory", nargs="?", metavar="DIR", help="The Location to trust (default: this directory).")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--show", action="store_true", help="Only say whether it is trusted and what it configures.")
    what.add_argument("--revoke", action="store_true", help="Take the trust back.")
    p.add_argument("--format", dest="output", default="default", metavar="FORMAT",
                   help="default (a few lines) or json (one object).")


def _no_arguments(p: argparse.ArgumentParser) -> None:
    pass


def _demo_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--keep", action=argparse.BooleanOptionalAction, default=False,
                   help="Keep the scratch project instead of removing it.")
    p.add_argument("--pace", type=float, help=argparse.SUPPRESS)  # seconds between streamed pieces


# each command: its function (whose docstring is its help) and what declares its arguments
COMMANDS: dict[str, tuple[Command, Callable[[argparse.ArgumentParser], None]]] = {
    "serve": (serve, _serve_arguments),
    "ui": (ui, _ui_arguments),
    "run": (run, _run_arguments),
    "sessions": (sessions, _sessions_arguments),
    "show": (show, _show_arguments),
    "log": (log, _log_arguments),
    "revert": (revert, _revert_arguments),
    "fork": (fork, _fork_arguments),
    "models": (models, _no_arguments),
    "plugins": (plugins, _plugins_arguments),
    "hooks": (hooks, _hooks_arguments),
    "trust": (trust, _trust_arguments),
    "openapi": (openapi, _no_arguments),
    "demo": (demo, _demo_arguments),
    "stats": (stats, _stats_arguments),
}
PARSER_OPTIONS: dict[str, Any] = dict(add_help=False, allow_abbrev=False, formatter_class=_HelpFormatter)


def _root_parser() -> argparse.ArgumentParser:
    """The parser of `ocs` itself, only for its help and its errors: it lists the commands without building them."""
    root = argparse.ArgumentParser(prog=PROG, description=ROOT_HELP, **PARSER_OPTIONS)
    root.add_argument("-h", "--help", action="help", help=HELP_HELP)
    root.add_argument("--version", action="version", version=f"{PROG} {_version()}",
                      help="Show the installed version and exit.")
    subparsers = root.add_subparsers(title="commands", metavar="COMMAND")
    for name, (function, _arguments) in COMMANDS.items():
        subparsers.add_parser(name, help=summary(function.__doc__), add_help=False)
    return root


def summary(doc: str | None) -> str:
    """A command's one-line summary: the first paragraph of its docstring, whole (a sentence may wrap)."""
    return " ".join((doc or "").split("\n\n")[0].split())


def _version() -> str:
    """The installed distribution's version (from its metadata, so it is the one pip installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("opencode-session")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown (not installed)"


def _command_parser(name: str) -> argparse.ArgumentParser:
    """The parser of one command (only the one that runs is built: start-up time matters)."""
    function, arguments = COMMANDS[name]
    parser = argparse.ArgumentParser(prog=f"{PROG} {name}", description=function.__doc__, **PARSER_OPTIONS)
    parser.add_argument("-h", "--help", action="help", help=HELP_HELP)
    arguments(parser)
    return parser


def _parse(name: str, args: list[str]) -> dict[str, Any]:
    """The options of command `name`. `run`'s message words may stand on either side of options (as in
    `ocs run fix -c it`); after `--` every word is message (split off here: Python 3.11's intermixed parsing
    mishandles `--`)."""
    parser = _command_parser(name)
    if name != "run":
        return _checked(parser, vars(parser.parse_args(args)))
    rest: list[str] = []
    if "--" in args:
        split = args.index("--")
        args, rest = args[:split], args[split + 1:]
    options = _checked(parser, vars(parser.parse_intermixed_args(args)))
    options["message"] = [*options["message"], *rest]
    return options


def dispatch(argv: Sequence[str]) -> int:
    """Run the command line `ocs ARGV` to its exit code; usage errors and --help leave by SystemExit (2 and 0)."""
    if not argv:
        return _interactive_or_help(_root_parser())
    first, *args = argv
    if first not in COMMANDS:
        root = _root_parser()
        if first in ("-h", "--help", "--version"):
            root.parse_args([first])  # prints the help or the version and leaves by SystemExit(0)
            return 0
        root.error(f"no such option: {first}" if first.startswith("-") else
                   f"no such command {first!r} (choose from {', '.join(COMMANDS)})")
    if first == "sessions" and args and args[0] in SESSION_ACTIONS:
        action, *rest = args
        function, arguments = SESSION_ACTIONS[action]
        parser = argparse.ArgumentParser(prog=f"{PROG} sessions {action}", description=function.__doc__,
                                         **PARSER_OPTIONS)
        parser.add_argument("-h", "--help", action="help", help=HELP_HELP)
        arguments(parser)
        return function(**_checked(parser, vars(parser.parse_args(rest))))
    return COMMANDS[first][0](**_parse(first, args))


def main(argv: Sequence[str] | None = None) -> None:
    """The `ocs` executable: exits with the command's code. Like click, Ctrl-C outside a command's own handling
    prints "Aborted!" and a closed output pipe ends quietly, both with code 1."""
    collector.defer()  # on again once the command's host or server is up (collector.started)
    try:
        code = dispatch(sys.argv[1:] if argv is None else list(argv))
    except (KeyboardInterrupt, EOFError):
        print("\nAborted!", file=sys.stderr)
        code = 1
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)  # the interpreter's final flush must not fail again
        os.dup2(devnull, sys.stdout.fileno())
        code = 1
    sys.exit(code)


if __name__ == "__main__":
    main()
