"""The reading commands: `ocs sessions` (a table, newest first), `ocs show` (a session's transcript, or what one Step
sent its model), `ocs log` (its durable events), `ocs models` (what the catalog knows, and which providers have
keys), `ocs openapi`."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .render import show_transcript, tool_summary
from .views import make_view

if TYPE_CHECKING:  # what the long way (through a host: hosts.py) needs is imported when it is taken
    from ..client import SessionExecutionFailedError
    from ..client.generated import OpenCodeClient
    from ..core.config import Config

PAGE = 200


def _json_line(value: Any) -> None:
    from ..schema.base import wire

    sys.stdout.write(json.dumps(wire(value), ensure_ascii=False, separators=(",", ":")) + "\n")


def _when(millis: int) -> str:
    return datetime.fromtimestamp(millis / 1000).strftime("%Y-%m-%d %H:%M")


def _table(headers: list[str], rows: list[list[str]], *, piped_header: bool = False) -> None:
    """A rich table on a terminal; tab-separated lines in a pipe (the header first only with `piped_header`)."""
    if not sys.stdout.isatty():
        for row in [headers, *rows] if piped_header else rows:
            sys.stdout.write("\t".join(row) + "\n")
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(*headers, box=None, header_style="bold")
    for row in rows:
        table.add_row(*row)
    Console().print(table)


async def list_sessions(attach: str | None, db: str | Path | None, directory: Path, limit: int, as_json: bool,
                        children: str | None = None, search: str | None = None) -> None:
    from ..schema.base import wire
    from .hosts import open_host

    async with open_host(attach, db, directory, create=False) as client:
        if children is not None:
            await client.session.get(children)  # an unknown parent is an error, not an empty table
        filters: dict[str, Any] = {"parent_id": children} if children else {}
        if search is not None:
            filters["search"] = search
        sessions: list[Any] = []
        cursor: str | None = None
        while True:
            page = await (client.session.list(cursor=cursor) if cursor else
                          client.session.list(limit=min(limit, PAGE) if search else PAGE, **filters))
            sessions += page.items
            if page.next is None or not page.items or (search is not None and len(sessions) >= limit):
                break
            cursor = page.next
    if search is None:  # a search's order is its ranking
        sessions.sort(key=lambda s: s.time.updated, reverse=True)
    print_sessions([wire(session) for session in sessions[:limit]], as_json)


def print_sessions(sessions: list[dict[str, Any]], as_json: bool) -> None:
    """Sessions (their wire form) as `ocs sessions` prints them: a table, or (`as_json`) a JSON line each."""
    if as_json:
        for session in sessions:
            _json_line(session)
        return
    _table(["id", "title", "directory", "updated", "cost", "tokens"],
           [[s["id"], s["title"], s["location"]["directory"], _when(s["time"]["updated"]), f"${s.get('cost', 0):.4f}",
             str(sum(s.get("tokens", {}).get(kind, 0) for kind in ("input", "output", "reasoning")))]
            for s in sessions],
           piped_header=True)  # a script reads `--format json`


async def every_message(client: OpenCodeClient, session_id: str) -> list[dict[str, Any]]:
    """Every projected message of the session as wire data, oldest first."""
    from ..schema.base import wire

    out: list[dict[str, Any]] = []
    page = await client.session.messages(session_id, order="asc", limit=PAGE)
    while True:
        out += [wire(m) for m in page.items]
        if page.next is None:
            return out
        page = await client.session.messages(session_id, cursor=page.next)


async def show_session(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                       as_json: bool) -> None:
    """The transcript, or (`as_json`) every projected message as GET .../message answers it, oldest first."""
    from ..schema.base import wire
    from .hosts import open_host

    async with open_host(attach, db, directory, create=False) as client:
        session = await client.session.get(session_id)
        messages = await every_message(client, session_id)
        failure = None if as_json else await execution_failure(client, session_id)
    print_transcript(wire(session), messages, as_json,
                     None if failure is None else (failure.type, failure.message))


def print_transcript(session: dict[str, Any], messages: list[dict[str, Any]], as_json: bool,
                     failure: tuple[str, str] | None) -> None:
    """A session's transcript as `ocs show` prints it, from its wire form and its messages', oldest first; `failure`
    (type, message) is how its latest execution failed, if it did."""
    if as_json:
        for message in messages:
            _json_line(message)
        return
    view = make_view(one_stream=True)
    view.info(f"{session['title']}  ({session['id']}, {session['location']['directory']})")
    show_transcript(view, messages)
    last = messages[-1] if messages else {}
    if failure is not None and not (last.get("type") == "assistant" and last.get("error")):
        # the execution failed before a Step could say so (no model, an unknown agent...): only its error tells
        view.notice(f"✗ execution failed: {failure[0]}: {failure[1]}")
    view.close()


async def session_of(client: OpenCodeClient, message_id: str) -> str:
    """The session of this directory that holds the message (newest sessions first); MessageNotFoundError when
    none does."""
    from ..client import MessageNotFoundError

    page = await client.session.list(limit=PAGE)
    while True:
        for session in page.items:
            try:
                await client.session.message(session.id, message_id)
            except MessageNotFoundError:
                continue
            return session.id
        if page.next is None or not page.items:
            raise MessageNotFoundError(f"No session of this directory has message {message_id}: name its session",
                                       sessionID="", messageID=message_id)
        page = await client.session.list(cursor=page.next)


# how a section's item is marked against the previous Step
_MARKS = {"added": "+", "changed": "~"}
# sections whose items are texts, printed whole
_TEXT_SECTIONS = ("system", "instructions", "updates", "additions")


def _indented(text: str) -> str:
    return "".join(f"    {line}\n" for line in text.splitlines() or [""])


def render_context(context: Any) -> str:
    """A Step's Model Context as text: each section with its items (texts whole, others one a line), each marked
    `+` (new since the previous Step) or `~` (changed), then what the previous Step had that this one has not."""
    model = context.model
    lines = [f"Step {context.messageID} of {context.sessionID}: agent {context.agent}, model "
             f"{model.providerID}/{model.id}{'/' + model.variant if model.variant else ''}, protocol "
             f"{context.request.protocol}",
             f"previous Step: {context.previousMessageID or '(none: the first recorded)'}"]
    changes = {c.section: c for c in context.changes}
    out = "\n".join(lines) + "\n"
    for section in context.sections:
        change = changes[section.key]
        marks = {s: _MARKS[kind] for kind in ("added", "changed") for s in getattr(change, kind)}
        counts = f"+{len(change.added)} -{len(change.removed)} ~{len(change.changed)}"
        out += f"\n== {section.key} ({len(section.items)}; {counts})\n"
        for item in section.items:
            mark = marks.get(item.source, " ")
            if section.key in _TEXT_SECTIONS:
                out += f"{mark} {item.source}\n" + _indented(str(item.value))
            elif section.key == "history":
                out += f"{mark} {item.source}  {item.value['type']}  rev {item.value['rev']}\n"
            elif section.key == "tools":
                description = " ".join(str(item.value.get("description", "")).split())
                out += f"{mark} {item.source}  {description[:80]}\n"
            else:
                out += f"{mark} {item.source}: {json.dumps(item.value, ensure_ascii=False)}\n"
        for source in change.removed:
            out += f"- {source}\n"
    request = context.request
    sent = f"{request.size} bytes, sha256 {request.sha256}" if request.body is not None else "no JSON body"
    notes = [n for n, on in (("rewritten by a plugin hook", context.rewritten),
                             ("a secret was cut from the record", context.redacted)) if on]
    return out + f"\nrequest body sent: {sent}" + (f" ({'; '.join(notes)})" if notes else "") + "\n"


async def show_context(attach: str | None, db: str | Path | None, directory: Path, session_id: str | None,
                       step: str, as_json: bool) -> None:
    """What the Step of assistant message `step` sent its model (`as_json`: as the API answers it)."""
    from .hosts import open_host

    async with open_host(attach, db, directory, create=False) as client:
        sid = session_id or await session_of(client, step)
        context = await client.session.message_context(sid, step)
    if as_json:
        _json_line(context)
        return
    sys.stdout.write(render_context(context))


async def execution_failure(client: OpenCodeClient, session_id: str) -> SessionExecutionFailedError | None:
    """How the session's latest execution failed, when it did and the session is idle (a running one has not
    ended: its outcome is not known yet)."""
    from ..client import CallOptions, ClientError, SessionExecutionFailedError

    if session_id in await client.session.active():
        return None
    try:
        await client.session.wait(session_id, outcome=True, options=CallOptions(timeout=10))
    except SessionExecutionFailedError as failed:
        return failed
    except ClientError:  # it became busy after all: no outcome yet
        return None
    return None


def describe_event(event: dict[str, Any]) -> str:
    """One readable line for a durable event: its sequence, type and the gist of its data."""
    data = event.get("data") or {}
    seq = (event.get("durable") or {}).get("seq", "")
    gist = ""
    if "error" in data:
        gist = f"{data['error'].get('type')}: {data['error'].get('message')}"
    elif event.get("type") == "session.input.admitted":
        gist = f"{data['input'].get('delivery')}: {(data['input'].get('data') or {}).get('text', '')}"
    elif event.get("type") == "session.tool.called":
        gist = f"{data.get('name')} {tool_summary(data.get('input'))}"
    elif isinstance(data.get("text"), str):
        gist = data["text"]
    elif isinstance(data.get("title"), str):
        gist = data["title"]
    gist = " ".join(gist.split())
    return f"{seq:>6}  {event.get('type')}" + (f"  {gist[:100]}" if gist else "")


async def show_log(attach: str | None, db: str | Path | None, directory: Path, session_id: str, after: int | None,
                   follow: bool, as_json: bool) -> None:
    from .hosts import open_host

    async with open_host(attach, db, directory, create=False) as client:
        async with client.session.log(session_id, after=after, follow=follow) as events:
            async for item in events:
                if item.type == "log.synced":
                    continue
                event = item.wire()
                sys.stdout.write((json.dumps(event, ensure_ascii=False, separators=(",", ":")) if as_json
                                  else describe_event(event)) + "\n")
                sys.stdout.flush()


def show_models(directory: Path) -> None:
    from ..core.config import inspect_config
    from ..core.llm.catalog import catalog
    from ..core.llm.errors import CONFIGURE_MODEL_HELP
    from ..core.location import resolve_location

    report = inspect_config(directory, resolve_location(directory).project_root, os.environ)
    for warning in report.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if report.error is not None:
        raise report.error
    config = report.config
    assert config is not None
    rows = []
    for provider in catalog(config, os.environ):
        key = provider.credentials or "none found"
        models = provider.models or ()
        if not models:
            rows.append([f"{provider.id}/<model>", "", "", key, _without_help(provider.problem) or "ready", ""])
        for model in models:
            rows.append([model.ref, str(model.context or ""), str(model.output or ""), key,
                         _model_status(config, model.ref), _role(config, model.ref)])
    if any(row[4] != "ready" for row in rows):
        print(CONFIGURE_MODEL_HELP + "\n")  # once, not on every row that is not ready
    _table(["model", "context", "output", "key", "status", "default"], rows, piped_header=True)
    print("default model:", config.model or 'none (set "model" in opencode.json)')
    print("small model:  ", config.small_model or "none (titles use the session's model)")


def _model_status(config: Config, ref: str) -> str:
    """"ready", or why this very model cannot be called (its own name in the words; how to configure a model is
    said once, above the table)."""
    from ..core.llm.catalog import model_ref_from_string, resolve_model
    from ..core.llm.errors import ProviderError

    try:
        resolve_model(config, model_ref_from_string(ref), os.environ)
    except ProviderError as unusable:
        return _without_help(unusable.message)
    return "ready"


def _without_help(problem: str | None) -> str:
    from ..core.llm.errors import CONFIGURE_MODEL_HELP

    return (problem or "").replace(CONFIGURE_MODEL_HELP, "").strip()


def _role(config: Config, ref: str) -> str:
    """Whether the configuration makes this model its default, its small model (titles), or both."""
    return ", ".join(role for role, chosen in (("default", config.model), ("small", config.small_model))
                     if chosen == ref)


def print_openapi() -> None:
    from ..protocol.openapi import render_openapi

    sys.stdout.write(json.dumps(render_openapi(), indent=2) + "\n")
