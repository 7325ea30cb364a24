"""The assembled runtime one process hosts: the store, Sessions, SessionExecution and the runner's dependencies."""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import platformdirs

if TYPE_CHECKING:
    import httpx2

    from .fs.finder import Finder
    from .integrations import Integrations
    from .mcp import McpServers
    from .plugins import Plugin, Plugins
    from .plugins.hooks import EventFeed
    from .pty import Terminals
    from .session.diff import Diffs
    from .session.shell import SessionShell
    from .snapshot import Snapshots

from ..schema.errors import PermissionNotFoundError, QuestionNotFoundError
from ..schema.permission import PermissionV2Reply
from ..schema.session import SessionOwner
from .cancellation import TaskScope
from .child_env import withheld
from .config import ConfigSource
from .config.trust import Trust
from .credentials import CREDENTIALS_FILE, ConnectedConfig, CredentialStore
from .execution import continuation, suspension
from .execution.continuation import Continuations, ResumeBudget
from .execution.coordinator import Drain, SessionExecution
from .execution.ownership import Ownership, host_name, lease_ttl_ms
from .instructions.entries import InstructionEntries
from .llm.providers import Providers
from .location import Location, resolve_location
from .permission import PermissionRequests
from .questions import QuestionRequests
from .redaction import Redactor, redact_logs
from .session import Sessions
from .session.lifecycle import SessionLifecycle
from .session.projector import project
from .session.revert import Reverts
from .store import (
    DatabaseNotFoundError,
    Lease,
    SessionFencedError,
    Store,
    Tx,
    database_files,
    is_postgres,
    now_ms,
    set_fence,
)
from .telemetry import telemetry, tracing_settings
from .tools.managed import MANAGED_DIRECTORY, ManagedOutputs
from .userhooks import UserHooks

log = logging.getLogger(__name__)

EVENT_HOOKS_GRACE_S = 2.0  # how long closing waits for the plugins' event hooks to see the last events


FIRST_SNAPSHOT_SWEEP_S = 60  # as core.snapshot's FIRST_SWEEP_SECONDS, without importing it before the first sweep

# The host's additions to a new terminal's environment (and a local MCP server's), observed for the request's
# Location and the terminal's resolved working directory. A standalone server adds nothing.
PtyEnvironment = Callable[[Location, Path], Mapping[str, str]]


def no_overlay(_location: Location, _cwd: Path) -> Mapping[str, str]:
    return {}


@dataclass
class RuntimeOptions:
    db_path: str | Path
    directory: str | Path = field(default_factory=os.getcwd)
    env: Mapping[str, str] = field(default_factory=lambda: os.environ)
    # builds the drain function from the runtime (the runner installs itself here); None runs nothing
    drain_factory: Callable[[Runtime], Drain] | None = None
    live_capacity: int = 4096  # the live ring: how far a reader may lag before it catches up from the store
    # the first provider retry's delay (later ones double it); None: $OCS_RETRY_BASE_DELAY_MS, else 2 s
    retry_base_delay_ms: float | None = None
    # carries every provider request (None: the network); tests replay recorded exchanges through it
    provider_transport: httpx2.AsyncBaseTransport | None = None
    # runtime files such as Managed Tool Output Files and file snapshots; None: beside the database (a temporary one
    # when in memory)
    data_dir: str | Path | None = None
    # Python plugins given in code, and whether to load the installed ones (entry points) and opencode.json's
    # `python:` entries at the directory too (a server and `ocs run` do): `Runtime.plugins` after `open`
    plugins: Sequence[Plugin] = ()
    discover_plugins: bool = False
    # automatic continuations after a lost host per session and window; None: $OCS_RESUME_BUDGET ("COUNT/SECONDS"),
    # else one per hour
    resume_budget: ResumeBudget | None = None
    # False: open the database only if it exists (DatabaseNotFoundError otherwise): what read-only commands want
    create_database: bool = True
    # the host's overlay on a new terminal's and a local MCP server's environment (over the plugins' additions)
    pty_environment: PtyEnvironment = no_overlay
    # whether every Location's project configuration has authority (hooks, MCP servers, plugins, permissions) without
    # the user trusting it first (`core/config/trust.py`): for embedders and CI; None: as $OCS_TRUST_ALL says
    trust_all: bool | None = None


class Runtime:
    """Opened with `async with Runtime(options)`; closing stops every drain and releases the database.

    The constructor builds every part, in dependency order, each given its collaborators as it is made; `open` only
    opens the store and starts the background work. No part is replaced afterwards (assigning a public attribute
    raises AttributeError); the parts a request may never need are made on first use (the cached properties)."""

    def __init__(self, options: RuntimeOptions) -> None:
        self.options = options
        # what closing releases and what runs beside the drains: ready before a drain factory sees the runtime
        self.chores = TaskScope("runtime")  # each failure of what runs beside the drains logged there, once
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._event_hooks: EventFeed | None = None  # what shows durable events to the plugins' event hooks
        self._unwatch: list[Callable[[], None]] = []  # this runtime's gauges, removed when it closes
        # before anything opens: InvalidResumeBudget and InvalidLeaseTtl when their variables are malformed
        self.resume_budget = options.resume_budget or ResumeBudget.of(options.env)
        self.lease_ttl_ms = lease_ttl_ms(options.env)
        self.host = host_name()  # this process as a lease owner (and as `GET /api/session/{id}/owner` names it)
        self.location: Location = resolve_location(options.directory)
        # the server's password and every provider key: cut from events, answers and log lines wherever echoed
        self.redactor = Redactor(withheld(options.env))
        redact_logs(self.redactor)
        self.store = Store(options.db_path, project=project, live_capacity=options.live_capacity,
                           redactor=self.redactor, lease_ms=self.lease_ttl_ms)
        # connected provider keys: beside the database (0600), only in memory for an in-memory database
        # where the runtime's own files go (tool output, snapshots, connected keys): private to this user
        self.data_dir, self._temporary_data = _data_dir(options)
        self.credentials = CredentialStore(None if str(options.db_path) == ":memory:"
                                           else self.data_dir / CREDENTIALS_FILE)
        # the configuration in effect at any Location, cached, with the connected keys applied
        # which Locations' project configuration has authority: those the user trusted, as they were then
        self.trust = Trust.of(options.env, options.trust_all)
        self.config: ConfigSource = ConnectedConfig(options.env, self.credentials, self.redactor, self.trust)
        self.user_hooks = UserHooks(self.store)  # runs the config's `hooks` around prompts, Steps and tool calls
        # the plugins given or found (None: none asked for), loaded before the drain factory reads their tools
        self.plugins: Plugins | None = (self._load_plugins() if options.plugins or options.discover_plugins
                                        else None)
        # the host's additions to a new terminal's (and a local MCP server's) environment, over the plugins'
        self.pty_environment: PtyEnvironment = _with_plugins(options.pty_environment, self.plugins)
        self.entries = InstructionEntries(self.store)
        self.providers = Providers(options.provider_transport)  # the provider HTTP clients: closed with the runtime
        self.permissions = PermissionRequests(self.store)
        self.questions = QuestionRequests(self.store)
        self.outputs = ManagedOutputs(self.data_dir / MANAGED_DIRECTORY)
        # Sessions wake the execution and take its idle hold; the execution's drain (the runner) uses
        # Sessions in turn, so these two reach the execution through the runtime once it exists, a line below
        wake = (lambda sid: self.execution.wake(sid)) if options.drain_factory else None
        self.sessions = Sessions(self.store, self.location, wake=wake, env=options.env, config=self.config,
                                 hooks=self.user_hooks, hold=lambda sid: self.execution.idle_hold(sid))
        # several hosts on one database: session leases say which executes a session, and carry what one host
        # forwards to another
        self.ownership: Ownership | None = Ownership(self.store, self.host, self.lease_ttl_ms, on_forwarded={
            "wake": lambda sid, note: self.execution.wake(sid, force=bool(note.get("force"))),
            "interrupt": lambda sid, _note: self.spawn(self.execution.interrupt(sid, "user"),
                                                       "a forwarded interrupt"),
            "permission": self._forwarded_permission_reply, "question": self._forwarded_question_reply,
        }) if self.store.backend.shared else None
        drain = options.drain_factory(self) if options.drain_factory else _idle_drain
        self.execution: SessionExecution = SessionExecution(self.store, drain, on_started=_on_started,
                                                            on_settled=_on_settled, ownership=self.ownership)
        self.continuations = Continuations(self.store, self.execution, self.resume_budget)
        self.reverts = Reverts(self.store, lambda: self.snapshots, self.config, hold=self.execution.idle_hold)
        # update, remove (interrupting first, releasing what a session held), the inbox's own changes
        execution = self.execution
        self.lifecycle = SessionLifecycle(self.store, self.sessions, self.outputs.root,
                                          interrupt=lambda sid: execution.interrupt(sid, "user"),
                                          released=self.session_deleted, removed=self._forget_shell)
        self._built = True

    def __setattr__(self, name: str, value: object) -> None:
        if not name.startswith("_") and "_built" in self.__dict__:
            raise AttributeError(f"Runtime.{name} is one of the parts the runtime was built with; it stays")
        super().__setattr__(name, value)

    # made (and their modules imported) by the first request that uses them: a server that never runs a shell
    # command, opens a terminal, finds a file or connects an integration never loads them

    @functools.cached_property
    def shell(self) -> SessionShell:
        """The sessions' shell commands and their environments."""
        from .session.shell import SessionShell

        return SessionShell(self.sessions)

    def _forget_shell(self, session_id: str) -> None:
        if "shell" in self.__dict__:  # no environment was set if no shell command was asked for
            self.shell.forget(session_id)

    @functools.cached_property
    def terminals(self) -> Terminals:
        """Pseudo-terminals by Location, killed when the runtime closes."""
        from .pty import Terminals

        return Terminals(self.options.env)

    @functools.cached_property
    def finder(self) -> Finder:
        """fs.find's indexes of the Locations searched lately."""
        from .fs.finder import Finder, max_indexed

        return Finder(max_indexed=max_indexed(self.options.env))

    @functools.cached_property
    def integrations(self) -> Integrations:
        """The integrations (provider connections) and their connection attempts."""
        from .integrations import Integrations

        return Integrations(self.credentials)

    @functools.cached_property
    def diffs(self) -> Diffs:
        """What turns changed on disk, from the same snapshots (made, and imported, on first use)."""
        from .session.diff import Diffs

        return Diffs(self.store, self.snapshots)

    @functools.cached_property
    def snapshots(self) -> Snapshots:
        """File snapshots of the Locations, made (and `core.snapshot` imported) on first use: a revert, the runner's
        load, the first sweep. No snapshot includes the runtime's own files (they may well be inside the project)."""
        from .snapshot import Snapshots
        from .snapshot.service import SNAPSHOT_DIRECTORY

        data = self.data_dir
        return Snapshots(data / SNAPSHOT_DIRECTORY, self.options.env,
                         own=[*database_files(self.options.db_path), data / MANAGED_DIRECTORY, data / CREDENTIALS_FILE])

    @functools.cached_property
    def mcp(self) -> McpServers:
        """The MCP servers by Location, started on first need, stopped when idle; made (and `core.mcp` imported) on
        first use."""
        from .mcp import McpServers

        overlay = self.pty_environment
        if overlay is no_overlay:
            return McpServers(self.options.env)
        return McpServers(self.options.env, overlay=lambda directory: overlay(resolve_location(directory), directory))

    async def _sweep_snapshots(self) -> None:
        await anyio.sleep(FIRST_SNAPSHOT_SWEEP_S)  # a short-lived `ocs run` never sweeps (nor imports the snapshots)
        await self.snapshots.sweep_forever(first=0)

    def spawn(self, work: Coroutine[Any, Any, object], name: str = "background work") -> None:
        """Run `work` (a session title, say) beside the drains; closing the runtime cancels what is left of it, and
        its failure is logged by the runtime's chores. It is not part of the execution that started it: its writes
        are not fenced by that execution's lease."""
        context = contextvars.copy_context()
        context.run(set_fence, None)
        if not self.chores.start_soon(lambda: work, name, context):
            work.close()  # the runtime is closing: it never starts

    def on_close(self, close: Callable[[], Awaitable[None]]) -> None:
        """Have `close` awaited when the runtime closes, after every drain stopped (e.g. the tool sources' stop)."""
        self._closers.append(close)

    async def settle_background(self, timeout: float) -> None:
        """Give background work up to `timeout` seconds to finish (before a short-lived host closes)."""
        await self.chores.settle(timeout)

    async def open(self) -> Runtime:
        """Open the store and start the background work: the sweeps, the plugins' event hooks, the lease sweep."""
        path = self.options.db_path
        if not self.options.create_database and database_files(path) and not Path(path).exists():
            raise DatabaseNotFoundError(str(path))  # before anything is created beside it
        self._configure_telemetry()
        await self.store.open()
        self.chores.start_soon(self.outputs.sweep_forever, "the tool output sweep", lasting=True)
        self.chores.start_soon(self._sweep_snapshots, "the snapshot sweep", lasting=True)
        if self.plugins is not None:
            self._event_hooks = self.plugins.hooks.watch(self.store.live)
        if self.ownership is not None and self.options.drain_factory:
            self.ownership.sweep(self._taken_over)
        execution = self.execution
        self._unwatch.append(telemetry.watch("ocs_active_executions", lambda: len(execution.active())))
        return self

    async def start_anywhere(self, session_id: str) -> None:
        """Start a session whose input was admitted without a wake (a subagent's child) on another host of the
        database when one takes it within a sweep period (at least a quarter second), else here: on one host, or
        when the other hosts are busy, paused or gone."""
        if self.ownership is not None:
            await self.ownership.offer(session_id)
            if await self.ownership.started_anywhere(session_id, max(self.lease_ttl_ms / 10_000, 0.25)):
                return
        self.sessions.wake(session_id)

    # --- replies to what a session asks, wherever they arrive ------------------------------------------------

    async def reply_permission(self, session_id: str, request_id: str, reply: PermissionV2Reply,
                               message: str | None) -> None:
        """Answer a permission request of the session: here when this host asked it, else forwarded to the host
        that executes the session (which asked it)."""
        try:
            await self.permissions.reply(session_id, request_id, reply, message)
        except PermissionNotFoundError:
            if not await self._forward(session_id, "permission", request=request_id, reply=reply, message=message):
                raise

    async def reply_question(self, session_id: str, request_id: str, answers: list[list[str]] | None) -> None:
        """Answer (or, with no answers, reject) a question of the session: here or on the host that asked it."""
        try:
            if answers is None:
                self.questions.reject(session_id, request_id)
            else:
                self.questions.reply(session_id, request_id, answers)
        except QuestionNotFoundError:
            if not await self._forward(session_id, "question", request=request_id, answers=answers):
                raise

    async def _forward(self, session_id: str, action: str, **data: Any) -> bool:
        """Hand `action` to the host that executes the session; False when no other host does."""
        if self.ownership is None or (lease := await self.ownership.holder(session_id)) is None:
            return False
        await self.ownership.forward(lease, action, **data)
        return True

    def _forwarded_permission_reply(self, session_id: str, note: dict[str, Any]) -> None:
        reply = note.get("reply")
        if reply not in ("once", "always", "reject"):
            return
        message = note.get("message")
        self.spawn(self.permissions.reply(session_id, str(note.get("request")), reply,
                                          message if isinstance(message, str) else None),
                   "a forwarded permission reply")

    def _forwarded_question_reply(self, session_id: str, note: dict[str, Any]) -> None:
        try:
            if note.get("answers") is None:
                self.questions.reject(session_id, str(note.get("request")))
            else:
                self.questions.reply(session_id, str(note.get("request")), note["answers"])
        except QuestionNotFoundError:
            log.warning("a forwarded answer to question %s of session %s found no such question",
                        note.get("request"), session_id)

    async def owner(self, session_id: str) -> SessionOwner:
        """Which host executes the session now (on a database one process holds: this one, while it drains)."""
        if self.ownership is None:
            active = session_id in self.execution.active()
            return SessionOwner(host=self.host, local=True) if active else SessionOwner()
        lease = await self.ownership.holding(session_id)
        if lease is None or lease.expires < now_ms():
            return SessionOwner()
        return SessionOwner(host=lease.owner, epoch=lease.epoch, expires=lease.expires,
                            local=lease.owner == self.ownership.host)
    def _configure_telemetry(self) -> None:
        """Tracing on when the OTEL_* variables (or opencode.json's `experimental.openTelemetry`) ask for it."""
        try:
            experimental = self.config.at_sync(self.location).model_extra or {}
            configured = isinstance(experimental.get("experimental"), dict) and \
                experimental["experimental"].get("openTelemetry") is True
        except Exception:  # an unusable config file is reported where it is used; it does not turn tracing on
            configured = False
        settings = tracing_settings(self.options.env, configured)
        if settings is not None:
            telemetry.enable_tracing(settings)

    def _load_plugins(self) -> Plugins:
        from .plugins import config_plugin_entries, load_plugins

        options = self.options
        if not options.discover_plugins:
            return load_plugins(given=options.plugins)
        entries, files = config_plugin_entries(self.location.directory, self.location.project_root, options.env,
                                               self.trust)
        return load_plugins(given=options.plugins, config_entries=entries, entry_points=True, config_file=files)

    async def suspend_active(self) -> list[str]:
        """Mark every active session suspended (graceful shutdown, before interrupting them)."""
        ids = self.execution.active()
        await suspension.suspend(self.store, ids)
        return ids

    async def resume_suspended(self) -> list[str]:
        """Atomically consume each suspension and resume that session at most once."""
        return await suspension.resume(self.store, self.execution)

    async def lost_sessions(self) -> list[str]:
        """The sessions whose execution's host was lost (a hard crash): before this runtime runs anything, every
        execution claim left in a single-host store is one. On a shared database none is known this way (another
        host's claim is no sign of loss): the lease sweep finds them as their leases expire."""
        return [] if self.ownership is not None else await self.continuations.lost()

    def _taken_over(self, lease: Lease, lost: bool) -> None:
        """A session the lease sweep took for this host: continued within the resume budget when its execution was
        lost, run when only its admitted input waited."""
        if not lost:
            self.execution.take_over(lease)
            return

        async def _continue() -> None:
            try:
                outcome = await self.continuations.continue_after_loss(lease.session_id, lease)
            except SessionFencedError:  # another host took it since: that one continues it, this one wrote nothing
                log.info("session %s was taken by another host before it was continued here", lease.session_id)
                return
            if outcome in ("over-budget", "idle"):
                # it stays idle: nobody executes it (input waiting meanwhile is the sweep's, as any unowned input)
                await self.store.write(lambda tx: tx.leases.release(lease))

        self.spawn(_continue(), f"continuing session {lease.session_id}")

    async def continue_lost(self, session_ids: list[str]) -> dict[str, continuation.Outcome]:
        """Continue each session `lost_sessions` found, within the resume budget."""
        return await self.continuations.continue_lost(session_ids)

    async def session_deleted(self, directory: str | Path) -> None:
        """What deleting a session releases once no other session works in its Location: that Location's
        terminals and MCP servers; and once none works in its project, the project's file snapshots."""
        page, _ = await self.sessions.list(directory=str(directory), limit=1)
        if page:
            return
        location = resolve_location(directory)
        if "terminals" in self.__dict__:  # none open if no terminal was ever asked for
            await self.terminals.release(location.directory)
        if "mcp" in self.__dict__:  # none started if the MCP servers were never asked for
            await self.mcp.release(location.directory)
        if location.is_git:
            page, _ = await self.sessions.list(project=location.project_id, limit=1)
            if page:
                return
        await anyio.to_thread.run_sync(self.snapshots.release, location)

    async def close(self) -> None:
        if "terminals" in self.__dict__:
            await self.terminals.close()
        if self.ownership is not None:
            await self.ownership.stop()  # take nothing over while stopping
        if self.execution is not None:
            await self.execution.shutdown()
        if self._event_hooks is not None:  # the event hooks see what the sessions committed, then stop
            await self._event_hooks.flush(EVENT_HOOKS_GRACE_S)
            await self._event_hooks.cancel()
        await self.chores.aclose()
        for close in reversed(self._closers):
            try:
                await close()
            except Exception:  # the store and providers are released whatever one of these does
                log.exception("closing the runtime: %r failed", close)
        if "mcp" in self.__dict__:
            await self.mcp.close()
        await self.providers.aclose()
        if self._temporary_data:  # an in-memory database's files end with it
            shutil.rmtree(self.data_dir, ignore_errors=True)
        await self.store.close()
        for unwatch in self._unwatch:
            unwatch()

    async def __aenter__(self) -> Runtime:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _data_dir(options: RuntimeOptions) -> tuple[Path, bool]:
    """The directory of the runtime's own files, and whether it is this runtime's alone (removed at close). A shared
    temporary directory at a name anyone can compute let another local user plant a shadow git repository that runs
    a command of theirs: an in-memory database gets a fresh private one (`mkdtemp`: 0700, a name nobody chose). The
    folders the runtime keeps in any of them are checked where they are made (`core/private.py`)."""
    if options.data_dir is not None:
        return Path(options.data_dir), False
    if str(options.db_path) == ":memory:":
        return Path(tempfile.mkdtemp(prefix="opencode-session-")), True
    if is_postgres(options.db_path):  # the host's own files (snapshots, tool output, keys) stay on the host
        return Path(platformdirs.user_data_dir("opencode-session")), False
    return Path(options.db_path).resolve().parent, False


def _with_plugins(overlay: PtyEnvironment, plugins: Plugins | None) -> PtyEnvironment:
    """The host's overlay over what the plugins' PTY Environment hooks add (the host's own word wins)."""
    if plugins is None or not plugins.hooks.pty_environment_hooks:
        return overlay
    hooks = plugins.hooks

    def merged(location: Location, cwd: Path) -> Mapping[str, str]:
        return {**hooks.pty_environment(location, cwd), **overlay(location, cwd)}

    return merged


def _on_started(tx: Tx, session_id: str) -> None:
    suspension.on_started(tx, session_id)
    continuation.on_started(tx, session_id)


def _on_settled(tx: Tx, session_id: str, outcome: str) -> None:
    suspension.on_settled(tx, session_id, outcome)
    continuation.on_settled(tx, session_id, outcome)


async def _idle_drain(_session_id: str, _force: bool) -> None:
    return None
