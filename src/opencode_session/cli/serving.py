"""`ocs serve` as a user meets it: what it says at start (URL, API document, database, config, model, auth),
a line on stderr for every failed execution, and one line with the fix when it cannot start."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from ..compat import IncompatibleDependencyError, check_versions
from ..core.runtime import Runtime, RuntimeOptions
from ..core.store import DatabaseInUseError
from ..core.store.feed import SubscriptionLost
from ..core.wiring import DeferredDrain
from ..schema import events as ev
from ..server.guard import GuardOptions
from ..server.serve import ConnectionLimits, ServeRefused
from ..server.serve import serve as serve_app
from . import collector
from .listening import ServerRecord, connectable, remove_record, write_record
from .plugins import plugin_lines, said_here
from .startup import StartupError, auth_line, report_config, require_directory, say_stderr, survey

Say = Callable[[str], None]


@dataclass
class ServeRequest:
    host: str
    port: int
    db: str | Path
    directory: Path
    guard: GuardOptions
    limits: ConnectionLimits
    insecure_no_password: bool = False
    stall_timeout: float = 15.0
    log_format: str = "text"  # "json": every stderr line is a JSON object (a log record)
    open_browser: bool = False  # `ocs ui`: open the inspector once the server listens


async def log_failed_executions(runtime: Runtime, say: Say) -> None:
    """One stderr line per failed execution, so a server that answers every prompt with a failure says why."""
    subscription = runtime.store.live.subscribe()
    with contextlib.suppress(SubscriptionLost):  # the bus closes when the server shuts down
        while True:
            for record in await subscription.next():
                if isinstance(record.data, ev.ExecutionFailed):
                    error = record.data.error
                    say(f"session {record.data.sessionID} failed: {error.type}: {error.message}")


def no_model_line(problem: str | None) -> str:
    """Why no model will answer, in one short line naming how to configure one (every prompt fails until then)."""
    first = (problem or "No model is configured").split(". ")[0].rstrip(".")
    return (f'none: {first}; every prompt will fail until opencode.json sets "model": "provider/model"'
            " (`ocs models` lists the models and what each needs)")


def serve(request: ServeRequest, say: Say = say_stderr) -> int:
    env = os.environ
    if request.log_format == "json":
        say = _json_lines()
    try:
        directory = require_directory(request.directory)
        found = survey(directory, env)
        report_config(found, say)
        untested = check_versions()  # metadata only: the SDKs themselves load with the first Step
    except (StartupError, IncompatibleDependencyError) as cannot:
        say(f"ocs serve: {cannot}")
        return 2
    said_here()
    drains = DeferredDrain()  # the runner loads once the server listens, not before it does
    options = RuntimeOptions(db_path=request.db, directory=directory, drain_factory=drains, discover_plugins=True)
    watchers: list[asyncio.Task[None]] = []
    recorded: list[Path] = []

    def ready(url: str, runtime: Runtime) -> None:
        try:  # local commands on this database now talk to this server (cli/hosts.py), from the line below on
            record = write_record(request.db, ServerRecord(os.getpid(), connectable(url, request.host),
                                                           _username(env)))
        except OSError as unwritable:
            record = None
            say(f"ocs serve: local commands on this database cannot find this server: {unwritable}")
        recorded.extend([record] if record is not None else [])
        print(f"opencode-session listening on {url}", flush=True)
        say(f"  API document  {url}/doc")
        say(f"  inspector     {url}/")
        say(f"  database      {runtime.store.path}")
        say(f"  directory     {directory}")
        say(f"  config        {found.config_files}")
        say(f"  trust         {trust_line(runtime)}")
        say(f"  model         {found.model or no_model_line(found.model_problem)}")
        say(f"  auth          {auth_line(env)}")
        say(f"  metrics       {url}/metrics")
        say(f"  traces        {tracing_line()}")
        for line in untested:
            say(f"  dependency    {line}")
        for line in plugin_lines(runtime.plugins) if runtime.plugins is not None else []:
            say("  plugin        " + line.replace("\n", "\n              "))
        watchers.append(asyncio.create_task(log_failed_executions(runtime, say)))
        collector.started()
        drains.warm()
        if request.open_browser:
            open_inspector(url + "/", say)

    try:
        asyncio.run(serve_app(options, request.host, request.port, on_ready=ready, guard=request.guard,
                              limits=request.limits, insecure_no_password=request.insecure_no_password,
                              stall_timeout=request.stall_timeout, own_logging=request.log_format == "json"))
    except ServeRefused as refused:
        say(f"ocs serve: {refused}")
        return 2
    except DatabaseInUseError as busy:
        say(f"ocs serve: {busy}")
        return 1
    finally:
        for record in recorded:
            remove_record(record, os.getpid())
    return 0


def _username(env: Mapping[str, str]) -> str | None:
    """Who a client logs in as, when the server requires a password (recorded: it is no secret)."""
    return (env.get("OPENCODE_SERVER_USERNAME") or "opencode") if env.get("OPENCODE_SERVER_PASSWORD") else None


def open_inspector(url: str, say: Say) -> None:
    """Open the inspector in the user's browser (`$BROWSER` or the desktop's), off the event loop: a console browser
    runs in the foreground. Says so when none could be started; the URL is printed either way."""
    import threading
    import webbrowser

    print(f"inspector: {url}", flush=True)

    def launch() -> None:
        try:
            opened = webbrowser.open(url)
        except Exception:  # a misconfigured $BROWSER
            opened = False
        if not opened:
            say(f"  browser       none could be started: open {url} yourself")

    threading.Thread(target=launch, name="ocs-ui-browser", daemon=True).start()


def trust_line(runtime: Runtime) -> str:
    """Whether the served directory's project configuration has its authority, and if not what is off and how to
    give it (`ocs trust`)."""
    from ..core.config.source import left_out_words

    state, ignored = runtime.config.standing_sync(runtime.location)
    if state.trust_all:
        return "every Location is trusted (OCS_TRUST_ALL)"
    if state.digest is None:
        return "no project configuration here (your own configuration is always trusted)"
    if state.trusted:
        return "this directory's project configuration is trusted"
    changed = ", it changed since you trusted it" if state.granted else ""
    if not ignored:
        return f"this directory's project configuration is not trusted{changed} (it configures nothing that needs it)"
    later = " (its plugins at the next start)" if "plugin" in ignored else ""
    return (f"NOT TRUSTED{changed}: this directory's project configuration has its {left_out_words(ignored)} "
            f"turned off; `ocs trust {state.directory}` turns them on{later}")


def tracing_line() -> str:
    """Where spans go, as the start-up report says it."""
    from ..core.telemetry import telemetry

    settings = telemetry.settings
    if telemetry.tracer is None or settings is None:
        return "off (set OTEL_EXPORTER_OTLP_ENDPOINT to export OpenTelemetry traces)"
    return f"OTLP/HTTP {settings.endpoint} as {settings.service_name}"


def _json_lines() -> Say:
    """Log records as JSON lines on stderr, and what `ocs serve` says as records of its own logger."""
    import logging

    from ..core.telemetry.logs import log_json

    log_json()
    logger = logging.getLogger("opencode_session.serve")
    return lambda text: logger.info(text.strip())
