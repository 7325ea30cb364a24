"""The inspector's routes: `/` (sessions), `/ui/session/{id}` (one session), their fragments, the live transcript
over SSE and the vendored static files. Reads go through core as the API handlers do; the page writes to the API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from ...core.location import select_location
from ...core.runtime import Runtime
from ...schema.errors import TaggedError
from ...schema.events import (
    Deleted,
    EventRecord,
    ExecutionFailed,
    ExecutionInterrupted,
    ExecutionStarted,
    ExecutionSucceeded,
    Forked,
    Imported,
    Moved,
    PermissionAsked,
    PermissionReplied,
    QuestionAsked,
    QuestionRejected,
    QuestionReplied,
    Renamed,
    RetryScheduled,
    SessionCreated,
    StepEnded,
    StepFailed,
    TextDelta,
    TextEnded,
    Updated,
)
from ...schema.session import SessionV2Info
from ..state import app_state, runtime_of
from . import context, login, marks, parts, trace, usage
from .files import DIFF_CONTEXT, FILE_ROUTES
from .pages import html, render, sse

EXECUTION_ENDED = (ExecutionSucceeded, ExecutionFailed, ExecutionInterrupted)
# live-only, yet they change what the page shows: the tray
ASKING = (PermissionAsked, PermissionReplied, QuestionAsked, QuestionReplied, QuestionRejected)
# what changes a row of the sessions list: a session made, renamed, moved or gone, its status, its cost
LISTED = (SessionCreated, Forked, Imported, Renamed, Updated, Moved, Deleted, ExecutionStarted, *EXECUTION_ENDED,
          StepEnded, StepFailed, *ASKING)
STATIC = Path(__file__).parent / "static"


def _active(runtime: Runtime) -> set[str]:
    return set(runtime.execution.active()) if runtime.execution is not None else set()


async def _rows(runtime: Runtime, q: Mapping[str, str]) -> list[dict[str, Any]]:
    """The sessions list as `q` asks (`search`, `directory`, `status`): roots with their children under them, or
    the sessions found; a root stays when one of its children has the status asked for."""
    search, directory, wanted = q.get("search") or None, q.get("directory") or None, q.get("status") or None
    if search:
        found, _ = await runtime.sessions.list(search=search, directory=directory, limit=100)
        tree: list[tuple[SessionV2Info, list[SessionV2Info]]] = [(s, []) for s in found]
    else:
        roots, _ = await runtime.sessions.list(parent="null", directory=directory, limit=100)
        tree = [(s, (await runtime.sessions.list(parent=s.id, limit=100))[0]) for s in roots]
    states = await parts.statuses(runtime, [s for root, children in tree for s in (root, *children)])

    def row(s: SessionV2Info) -> dict[str, Any]:
        return {"session": s.model_dump(mode="json"), **states[s.id]}

    rows = []
    for root, children in tree:
        kids = [row(c) for c in children if wanted is None or states[c.id]["status"] == wanted]
        if wanted is None or kids or states[root.id]["status"] == wanted:
            rows.append({**row(root), "children": kids})
    return rows


def _filtered(q: Mapping[str, str]) -> bool:
    return any(q.get(k) for k in ("search", "directory", "status"))


async def _trust(runtime: Runtime, directory: str | None, workspace: str | None = None) -> dict[str, Any] | None:
    """The not-trusted notice of the Location at `directory` (None: trusted, nothing off, or no such folder)."""
    try:
        location = select_location(runtime.location, directory, workspace)
    except TaggedError:
        return None
    return await parts.trust_notice(runtime, location)


async def sessions_page(request: Request) -> Response:
    runtime = runtime_of(request)
    q = request.query_params
    at = runtime.store.live.position  # the list below is at least this fresh: its live stream says if not
    everywhere, _ = await runtime.sessions.list(parent="null", limit=100)
    directories = sorted({s.location.directory for s in everywhere} | ({q["directory"]} if q.get("directory")
                                                                        else set()))
    return html(render("sessions.html", rows=await _rows(runtime, q), search=q.get("search", ""),
                         directory=q.get("directory", ""), status=q.get("status", ""), directories=directories,
                         statuses=parts.STATUSES, filtered=_filtered(q), signed_in=login.COOKIE in request.cookies,
                         at=at, here=str(runtime.location.directory),
                         new=await parts.choices_at(runtime, runtime.location), trust=await _trust(runtime, None)))


async def sessions_live(request: Request) -> Response:
    """`sessions` whenever a session is made, renamed, moved or deleted, or its status or cost changes
    (anywhere: another tab, a client of the API): the list then fetches its rows again, as its filters ask. A
    page rendered before the newest such change (`at`) hears of it on connecting."""
    runtime = runtime_of(request)
    subscription = runtime.store.live.subscribe()

    async def frames() -> AsyncIterator[bytes]:
        if request.query_params.get("at") != str(runtime.store.live.position):
            yield sse("sessions", "changed")
        while True:
            if any(isinstance(i, EventRecord) and isinstance(i.data, LISTED) for i in await subscription.next()):
                yield sse("sessions", "changed")

    return app_state(request).stream(frames())  # type: ignore[return-value]


async def new_choices(request: Request) -> Response:
    """The agents and models a new session at `directory` can start with, as the new-session form's fragment."""
    runtime = runtime_of(request)
    try:
        location = select_location(runtime.location, request.query_params.get("directory") or None)
    except TaggedError as err:
        return html(render("new_choices.html", new={"agents": [], "models": [], "current": ""},
                             problem=err.message, trust=None))
    return html(render("new_choices.html", new=await parts.choices_at(runtime, location), problem=None,
                         trust=await parts.trust_notice(runtime, location)))


async def sessions_fragment(request: Request) -> Response:
    runtime = runtime_of(request)
    return html(render("session_rows.html", rows=await _rows(runtime, request.query_params),
                         filtered=_filtered(request.query_params)))


def _state(runtime: Runtime, session_id: str, seq: int, busy: bool) -> str:
    """What a render of the transcript shows beyond the log up to `seq`: the runner, and the live-only requests
    of the tray. A page rendered at the same state needs no second render when it connects."""
    asking = parts.needs_you(runtime, session_id)
    return ".".join([str(seq), str(int(busy)), *(r["id"] for r in asking["asks"] + asking["questions"])])


async def _transcript(runtime: Runtime, session_id: str, found: marks.Marks, busy: bool, limit: int | None = None,
                      live: Mapping[str, str] | None = None, oob: bool = True) -> tuple[str, str]:
    """The live window of the transcript and the summary above it (gauge, status, usage), with the marks read
    up to now and the text streamed so far into each part not yet settled (`live`, by the part's element ID).
    With `oob` the transcript carries the summary, to replace the one above the older pages."""
    page = await parts.window(runtime, session_id)
    info = await runtime.sessions.get(session_id)
    messages = [m.model_dump(mode="json") for m in page.messages]
    if limit is None:
        limit = (await parts.choices(runtime, info))["context_limit"]
    head, after = marks.place(found.timed, messages, None, oldest=page.before is None)
    values = dict(messages=messages, session=info.model_dump(mode="json"), busy=busy,
                  **parts.needs_you(runtime, session_id), inbox=await parts.inbox(runtime, session_id),
                  context_used=parts.context_used(messages), context_limit=limit, earlier=page.before,
                  previous=page.previous.model_dump(mode="json") if page.previous else None,
                  delivery=found.delivery, failed=found.failed, head=head, after=after,
                  unanswered=found.unanswered and not busy, live=live or {},
                  until=messages[0]["time"]["created"] if messages else None)
    summary = render("summary.html", **values)
    return summary, render("transcript.html", summary=summary if oob else None, **values)


async def session_page(request: Request) -> Response:
    runtime = runtime_of(request)
    session_id = request.path_params["sessionID"]
    try:
        info = await runtime.sessions.get(session_id)
        header = await parts.choices(runtime, info)
        found, busy = await marks.marks(runtime, session_id), session_id in _active(runtime)
        summary, transcript = await _transcript(runtime, session_id, found, busy, limit=header["context_limit"],
                                                oob=False)
    except TaggedError as err:
        if err.status != 404:
            raise
        return html(render("missing.html", session_id=session_id, signed_in=login.COOKIE in request.cookies),
                     status=404)
    trust = await _trust(runtime, info.location.directory, info.location.workspaceID)
    return html(render("session.html", session=info.model_dump(mode="json"), transcript=transcript,
                         summary=summary, trust=trust,
                         state=_state(runtime, session_id, found.seq, busy), signed_in=login.COOKIE in request.cookies,
                         **header))


async def session_live(request: Request) -> Response:
    """Each change of the session's log re-renders the transcript (`transcript`); the answer's text arrives as
    it streams (`delta`: JSON `[[element ID, text], ...]`), appended to its part until that part settles. A
    re-render holds the text this stream carried into each part not yet settled, so it neither loses nor repeats
    any. A page that says which state it shows (`state`) is rendered again on connecting only if the session
    has moved on since."""
    runtime = runtime_of(request)
    session_id = request.path_params["sessionID"]
    try:
        await runtime.sessions.require(session_id)
    except TaggedError as err:
        return Response(err.message, status_code=err.status, media_type="text/plain")
    subscription = runtime.store.live.subscribe()

    async def frames() -> AsyncIterator[bytes]:
        busy = session_id in _active(runtime)  # then what the log says: the runner may not have let go of it yet
        found = await marks.marks(runtime, session_id)
        streamed: dict[str, str] = {}  # a part's element ID -> the text streamed into it, until it settles
        if _state(runtime, session_id, found.seq, busy) != request.query_params.get("state"):
            yield sse("transcript", (await _transcript(runtime, session_id, found, busy))[1])
        while True:  # SubscriptionLost ends the stream; the browser's EventSource reconnects to a fresh render
            mine = [i for i in await subscription.next()
                    if isinstance(i, EventRecord) and i.aggregate_id == session_id]
            durable = any(i.seq is not None or isinstance(i.data, ASKING) for i in mine)
            pieces: list[list[str]] = []  # this batch's text, in order, a piece per run of one part
            for item in mine:
                d = item.data
                if isinstance(d, ExecutionStarted):
                    busy = True
                elif isinstance(d, EXECUTION_ENDED):
                    busy = False
                elif isinstance(d, TextDelta):
                    part = parts.live_id(d.assistantMessageID, d.ordinal)
                    streamed[part] = streamed.get(part, "") + d.delta
                    if pieces and pieces[-1][0] == part:
                        pieces[-1][1] += d.delta
                    else:
                        pieces.append([part, d.delta])
                elif isinstance(d, TextEnded):  # settled: the log holds the whole text now
                    streamed.pop(parts.live_id(d.assistantMessageID, d.ordinal), None)
                elif isinstance(d, StepEnded | StepFailed | RetryScheduled):
                    prefix = parts.live_id(d.assistantMessageID, None)
                    for part in [k for k in streamed if k.startswith(prefix)]:
                        del streamed[part]
            if durable:  # the re-render holds what those settled and what streamed around them
                found = await marks.marks(runtime, session_id)
                yield sse("transcript", (await _transcript(runtime, session_id, found, busy, live=streamed))[1])
            elif pieces:
                yield sse("delta", json.dumps(pieces, ensure_ascii=False))

    return app_state(request).stream(frames())  # type: ignore[return-value]


async def session_diff(request: Request) -> Response:
    """What the turns from user message `from` through `to` changed (default: the newest turn), as a fragment."""
    runtime = runtime_of(request)
    q = request.query_params
    try:
        files = await runtime.diffs.diff(request.path_params["sessionID"], q.get("from") or None,
                                         q.get("to") or None, context=DIFF_CONTEXT)
    except TaggedError as err:
        return html(render("diff.html", files=[], problem=err.message), status=err.status)
    return html(render("diff.html", files=[f.model_dump(mode="json") for f in files], problem=None))


UI_ROUTES: list[BaseRoute] = [
    *FILE_ROUTES,
    Route("/", sessions_page, methods=["GET"], name="ui.sessions"),
    Route("/ui/sessions", sessions_fragment, methods=["GET"], name="ui.sessions.rows"),
    Route("/ui/sessions/live", sessions_live, methods=["GET"], name="ui.sessions.live"),
    Route("/ui/new/choices", new_choices, methods=["GET"], name="ui.new.choices"),
    Route("/ui/session/{sessionID}", session_page, methods=["GET"], name="ui.session"),
    Route("/ui/session/{sessionID}/diff", session_diff, methods=["GET"], name="ui.session.diff"),
    Route("/ui/session/{sessionID}/live", session_live, methods=["GET"], name="ui.session.live"),
    *parts.PART_ROUTES,
    Route("/ui/session/{sessionID}/trace/{messageID}", trace.trace_page, methods=["GET"], name="ui.session.trace"),
    Route("/ui/session/{sessionID}/context/{messageID}", context.context_page, methods=["GET"],
          name="ui.session.context"),
    Route("/ui/usage", usage.usage_page, methods=["GET"], name="ui.usage"),
    Mount("/ui/static", StaticFiles(directory=STATIC), name="ui.static"),
]
