"""The session page's inspecting parts: the header's agent/model choices and context limit, the "needs you" requests,
the queued inbox, older transcript pages, a command's expansion, and the Step details and raw event log read from
the durable log. Each is a value for a template or a route; routes.py puts them on the page."""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ...core.agents import agent_info
from ...core.commands import discover_commands, expand
from ...core.config import Config, ConfigError
from ...core.config.source import left_out_words
from ...core.llm import listing
from ...core.llm.catalog import model_ref_from_string
from ...core.location import Location, select_location
from ...core.permission import recorded_waits
from ...core.runtime import Runtime
from ...core.store import Reader, now_ms
from ...core.store.keyset import PageRequest
from ...schema import events as ev
from ...schema import session_errors
from ...schema.catalog import ModelV2Info
from ...schema.common import ModelRef
from ...schema.errors import InvalidRequestError, SessionNotFoundError, TaggedError
from ...schema.events import EventRecord
from ...schema.session import SessionV2Info
from ..state import runtime_of
from . import login, marks
from .pages import html, render

# messages per transcript page: the live window (rendered again at every durable event) and each older page; under
# MESSAGE_PAGE_MAX, so first paint and every re-render stay cheap
TRANSCRIPT_PAGE = 100
CATALOGS_KEPT = 8  # model catalogs kept, one per configuration (Location) lately shown
LOG_SHOWN = 1000  # the newest events of the raw log the page lists (a filter narrows them first)


def _location(runtime: Runtime, info: SessionV2Info) -> Location:
    return select_location(runtime.location, info.location.directory, info.location.workspaceID)


_CATALOGS: OrderedDict[int, tuple[Config, list[ModelV2Info]]] = OrderedDict()  # by the identity of a Config


def _models(config: Config, env: Mapping[str, str]) -> list[ModelV2Info]:
    """The model catalog of `config`, listed once per configuration the source hands out (listing it costs tens of
    milliseconds, and the transcript is rendered again at every durable event); the entry holds the Config, so its
    identity is not reused while the entry lives."""
    held = _CATALOGS.get(id(config))
    if held is not None and held[0] is config:
        _CATALOGS.move_to_end(id(config))
        return held[1]
    models = listing.models(config, env)
    _CATALOGS[id(config)] = (config, models)
    while len(_CATALOGS) > CATALOGS_KEPT:
        _CATALOGS.popitem(last=False)
    return models


async def choices(runtime: Runtime, info: SessionV2Info) -> dict[str, Any]:
    """What the header offers: the agents and models at the session's Location, and its model's context limit
    (None where the configuration cannot be read or the model is not in the catalog)."""
    return await choices_at(runtime, _location(runtime, info), info.model)


async def choices_at(runtime: Runtime, location: Location, model: ModelRef | None = None) -> dict[str, Any]:
    """The agents and models offered at `location`, the model Steps use there (`model`, else the configured one)
    and its context limit; a new session's form offers the same."""
    try:
        config = await runtime.config.at(location)
    except ConfigError:
        return {"agents": [], "models": [], "context_limit": None, "current": ""}
    agents = [a.id for a in agent_info(config, runtime.options.env) if not a.hidden and a.mode != "subagent"]
    models = _models(config, runtime.options.env)
    current = model or (model_ref_from_string(config.model) if config.model else None)  # what Steps use

    def is_current(m: ModelV2Info) -> bool:
        return current is not None and m.id == current.id and m.providerID == current.providerID

    limit = next((m.limit.context for m in models if is_current(m)), None)
    # the models a switch can use: those of providers with what they need to be called (a key, a connection), and
    # the one in use whatever its provider's state; not the whole bundled catalog
    offered = [m for m in models if m.enabled or is_current(m)]
    return {"agents": agents, "models": [{"id": m.id, "providerID": m.providerID, "name": m.name} for m in offered],
            "context_limit": limit, "current": f"{current.providerID}/{current.id}" if current else ""}


async def trust_notice(runtime: Runtime, location: Location) -> dict[str, Any] | None:
    """What the page says of a Location whose project configuration is not trusted and so has authority left out
    (hooks, MCP servers, ...): its directory, the digest to trust, what is off; None when nothing is off."""
    state, ignored = await runtime.config.standing(location)
    if state.trusted or not ignored:
        return None
    return {"directory": str(location.directory), "digest": state.digest, "off": left_out_words(ignored),
            "files": [str(path) for path in state.files], "changed": state.granted is not None,
            "plugins": "plugin" in ignored}


def context_used(messages: list[dict[str, Any]]) -> int | None:
    """Tokens the newest finished Step held in its context window (its input, cache and output), if any did."""
    for m in reversed(messages):
        if m["type"] == "compaction" and m.get("status") == "completed":
            return None  # the window was summarised since: the next Step tells
        tokens = m.get("tokens") if m["type"] == "assistant" else None
        if tokens:
            cache = tokens.get("cache") or {}
            used = int(tokens["input"] + tokens["output"] + cache.get("read", 0) + cache.get("write", 0))
            if used:  # a Step that failed before the provider counted anything tells nothing
                return used
    return None


STATUSES = ("waiting", "busy", "suspended", "failed", "idle")  # what the sessions list shows (and filters by)


async def statuses(runtime: Runtime, sessions: list[SessionV2Info]) -> dict[str, dict[str, Any]]:
    """Each session's status and the host that executes it: waiting (a permission or question is pending), busy (a
    host executes it), suspended (a shutdown interrupted it and no host has resumed it), failed (its newest answer
    ended in an error other than an interrupt), else idle. One read of the store for them all."""
    ids = [s.id for s in sessions]
    leased = runtime.ownership is not None
    newest = PageRequest("desc", 1)

    def read(r: Reader) -> tuple[dict[str, Any], set[str], set[str]]:
        failed = set()
        for i in ids:
            last = r.messages.page(i, newest).items
            if last and last[0].type == "assistant" and last[0].error is not None \
                    and last[0].error.type != session_errors.ABORTED:
                failed.add(i)
        return ({i: r.leases.holder(i) for i in ids} if leased else {}), r.sessions.suspended(ids), failed

    leases, suspended, failed = await runtime.store.read(read)
    active = set(runtime.execution.active()) if runtime.execution is not None else set()
    now = now_ms()
    found = {}
    for i in ids:
        lease = leases.get(i)
        host = lease.owner if lease is not None and lease.expires >= now else (runtime.host if i in active else None)
        if runtime.permissions.pending(i) or runtime.questions.pending(i):
            status = "waiting"
        elif host is not None:
            status = "busy"
        else:
            status = "suspended" if i in suspended else "failed" if i in failed else "idle"
        found[i] = {"status": status, "host": host if leased else None}
    return found


@dataclass
class Window:
    """Messages of one transcript page, oldest first; `before` the anchor of the page before it (None: the session
    begins here), `previous` the message just before its first (what "Fork before this prompt" keeps)."""

    messages: list[Any]
    before: int | None
    previous: Any | None


async def window(runtime: Runtime, session_id: str, before: int | None = None) -> Window:
    """Up to TRANSCRIPT_PAGE messages before the message at `before` (the newest without), starting at a prompt
    where one is in reach: a page never opens with an answer whose prompt is on the page before it."""

    def read(r: Reader) -> Window:
        if r.sessions.load(session_id) is None:
            raise SessionNotFoundError(sessionID=session_id)
        anchor = None if before is None else (before,)
        found = r.messages.page(session_id, PageRequest("desc", TRANSCRIPT_PAGE + 1, anchor)).items
        shown = found[:TRANSCRIPT_PAGE]
        if len(found) > len(shown):  # older ones follow: end this page at its oldest prompt, if it holds one
            prompts = [n for n, m in enumerate(shown) if m.type == "user"]
            if prompts:
                shown = shown[:prompts[-1] + 1]
        previous = found[len(shown)] if len(found) > len(shown) else None
        oldest = None
        if previous is not None:
            key = r.messages.page(session_id, PageRequest("desc", len(shown), anchor)).last
            oldest = key[0] if key else None
        return Window(list(reversed(shown)), oldest, previous)

    return await runtime.store.read(read)


async def newest_prompt(runtime: Runtime, session_id: str) -> str | None:
    """The ID of the session's newest prompt (user message), if it has one."""
    cursor = None
    while True:
        if cursor is None:
            page, links = await runtime.sessions.messages(session_id, limit=TRANSCRIPT_PAGE, order="desc")
        else:
            page, links = await runtime.sessions.messages(session_id, cursor=cursor)
        found = next((m.id for m in page if m.type == "user"), None)
        if found is not None or not links.next or not page:
            return found
        cursor = links.next


def live_id(message_id: str, ordinal: int | None) -> str:
    """The page's element that a text part of an answer streams into (with `ordinal` None, the prefix of the
    answer's parts); message.html names it the same way."""
    return f"live-{message_id}-" + ("" if ordinal is None else f"text-{ordinal}")


def needs_you(runtime: Runtime, session_id: str) -> dict[str, Any]:
    return {"asks": [r.model_dump(mode="json") for r in runtime.permissions.pending(session_id)],
            "questions": [q.model_dump(mode="json") for q in runtime.questions.pending(session_id)]}


async def inbox(runtime: Runtime, session_id: str) -> list[dict[str, Any]]:
    return [i.model_dump(mode="json") for i in await runtime.lifecycle.inbox(session_id)]


# --- Step details from the durable log ------------------------------------------------------------------------


@dataclass
class Step:
    """One Step as its durable events tell it: who ran it, what it used and cost, and where its time went."""

    message_id: str
    agent: str
    model: str
    started: int
    ended: int | None = None
    first_output: int | None = None  # the first text, reasoning or tool input: the first token's arrival
    tools_ms: int = 0
    permission_ms: int = 0  # of its calls' time, what they spent waiting for the user's answer
    backoff_ms: int = 0
    retries: int = 0
    finish: str | None = None
    cost: float | None = None
    tokens: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    _calls: dict[str, int] = field(default_factory=dict)

    @property
    def duration_ms(self) -> int | None:
        return None if self.ended is None else self.ended - self.started

    @property
    def first_token_ms(self) -> int | None:
        return None if self.first_output is None else self.first_output - self.started

    @property
    def streaming_ms(self) -> int | None:
        if self.ended is None:
            return None
        begun = self.first_output if self.first_output is not None else self.ended
        return max(0, self.ended - begun - self.tools_ms - self.permission_ms - self.backoff_ms)


_FIRST_OUTPUT = (ev.TextStarted, ev.ReasoningStarted, ev.ToolInputStarted, ev.ToolCalled)


def steps(records: list[EventRecord]) -> list[Step]:
    """The Steps of a session's log, oldest first."""
    found: dict[str, Step] = {}
    for r in records:
        d = r.data
        if isinstance(d, ev.StepStarted):
            found[d.assistantMessageID] = Step(d.assistantMessageID, d.agent, f"{d.model.providerID}/{d.model.id}",
                                               r.created)
            continue
        step = found.get(d.assistantMessageID) if isinstance(d, ev.StepEvent) else None
        if step is None:
            continue
        if isinstance(d, _FIRST_OUTPUT) and step.first_output is None:
            step.first_output = r.created
        if isinstance(d, ev.ToolCalled):
            step._calls[d.callID] = r.created
        elif isinstance(d, ev.ToolSuccess | ev.ToolFailed) and d.callID in step._calls:
            waited = sum(w.replied - w.asked for w in recorded_waits(d.resultState))
            step.tools_ms += r.created - step._calls.pop(d.callID) - waited
            step.permission_ms += waited
        elif isinstance(d, ev.RetryScheduled):
            step.retries += 1
            step.backoff_ms += max(0, d.at - r.created)
            step.first_output = None  # the attempt that failed streamed nothing kept
        elif isinstance(d, ev.StepEnded):
            step.ended, step.finish, step.cost = r.created, d.finish, d.cost
            step.tokens = d.tokens.model_dump(mode="json")
        elif isinstance(d, ev.StepFailed):
            step.ended, step.cost = r.created, d.cost
            step.tokens = d.tokens.model_dump(mode="json") if d.tokens else None
            step.error = d.error.model_dump(mode="json")
    return list(found.values())


async def read_log(runtime: Runtime, session_id: str) -> list[EventRecord]:
    """Every public durable event of the session, oldest first."""
    out: list[EventRecord] = []
    async for batch in await runtime.sessions.log_batches(session_id, follow=False):
        out.extend(r for r in batch if isinstance(r, EventRecord))
    return out


# a page about one Step: given the runtime, the session, its log (`read_log`), the Step's message ID and whether a
# login cookie came
StepPage = Callable[[Runtime, SessionV2Info, list[EventRecord], str, bool], Awaitable[Response]]


async def step_page(request: Request, build: StepPage) -> Response:
    """The answer of `/ui/session/{sessionID}/.../{messageID}`: `build` makes the page, or a session that does not
    exist gets the not-found page (404)."""
    runtime = runtime_of(request)
    session_id, message_id = request.path_params["sessionID"], request.path_params["messageID"]
    signed_in = login.COOKIE in request.cookies
    try:
        info, records = await runtime.sessions.get(session_id), await read_log(runtime, session_id)
    except TaggedError as err:
        if err.status != 404:
            raise
        return html(render("missing.html", session_id=session_id, signed_in=signed_in), status=404)
    return await build(runtime, info, records, message_id, signed_in)


def log_rows(records: list[EventRecord], kind: str) -> list[dict[str, Any]]:
    """The newest LOG_SHOWN events whose type starts with `kind` (all of them for ""), newest first."""
    chosen = [r for r in records if r.type.startswith(kind)][-LOG_SHOWN:]
    return [{"seq": r.seq, "type": r.type, "created": r.created,
             "data": json.dumps(r.data.wire(), indent=2, ensure_ascii=False)} for r in reversed(chosen)]


def _values(messages: list[Any]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json") for m in messages]


async def earlier(request: Request) -> Response:
    runtime = runtime_of(request)
    session_id = request.path_params["sessionID"]
    q = request.query_params
    until, before = q.get("until") or "", q.get("before") or ""
    try:
        if not before.isdigit():
            raise InvalidRequestError("Which page? (before)", kind="query", field="before")
        page = await window(runtime, session_id, int(before))
        info = await runtime.sessions.get(session_id)
        found = await marks.marks(runtime, session_id)
    except TaggedError as err:
        return html(render("problem.html", problem=err.message), status=err.status)
    messages = _values(page.messages)
    head, after = marks.place(found.timed, messages, int(until) if until.isdigit() else None, page.before is None)
    return html(render("earlier.html", messages=messages, session=info.model_dump(mode="json"),
                       before=page.before, previous=_values([page.previous])[0] if page.previous else None,
                       delivery=found.delivery, failed=found.failed, head=head, after=after,
                       until=messages[0]["time"]["created"] if messages else ""))


async def details(request: Request) -> Response:
    runtime = runtime_of(request)
    session_id = request.path_params["sessionID"]
    kind = request.query_params.get("type") or ""
    try:
        records = await read_log(runtime, session_id)
    except TaggedError as err:
        return html(render("problem.html", problem=err.message), status=err.status)
    types = sorted({r.type for r in records})
    return html(render("details.html", session_id=session_id, steps=steps(records),
                       events=log_rows(records, kind), kind=kind, types=types, total=len(records)))


async def command(request: Request) -> Response:
    """`/name arguments` as the prompt it stands for, with the command's agent and model if it names them."""
    runtime = runtime_of(request)
    session_id = request.path_params["sessionID"]
    name = request.query_params.get("name", "")
    try:
        info = await runtime.sessions.get(session_id)
        config = await runtime.config.at(_location(runtime, info))
        found = {c.name: c for c in discover_commands(_location(runtime, info), config, runtime.options.env)}
        if name not in found:
            raise InvalidRequestError(f"No command /{name} here (known: "
                                      f"{', '.join('/' + n for n in sorted(found)) or 'none'})", field="name")
    except ConfigError as bad:
        return JSONResponse({"_tag": "InvalidRequestError", "message": str(bad)}, status_code=400)
    except TaggedError as err:
        return JSONResponse(err.body(), status_code=err.status)
    chosen = found[name]
    return JSONResponse({"text": expand(chosen.template, request.query_params.get("arguments", "")),
                         "agent": chosen.agent,
                         "model": chosen.model.model_dump(mode="json") if chosen.model else None})


async def output(request: Request) -> Response:
    """The whole output file of one settled tool call: only a path the session itself recorded, and only one
    inside the managed output directory."""
    runtime = runtime_of(request)
    p = request.path_params
    try:
        message = (await runtime.sessions.message(p["sessionID"], p["messageID"])).model_dump(mode="json")
    except TaggedError as err:
        return Response(err.message, status_code=err.status, media_type="text/plain")
    paths = [path for c in message.get("content") or () if c.get("type") == "tool" and c["id"] == p["callID"]
             for path in c["state"].get("outputPaths") or ()]
    root = runtime.outputs.root.resolve()
    found = [Path(x).resolve() for x in paths]
    found = [x for x in found if x.is_relative_to(root) and x.is_file()]
    if not found:
        return Response("No output file for this call (or it has been swept).", status_code=404,
                        media_type="text/plain")
    return FileResponse(found[0], media_type="text/plain; charset=utf-8",
                        headers={"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"})


PART_ROUTES: list[BaseRoute] = [
    Route("/ui/session/{sessionID}/output/{messageID}/{callID}", output, methods=["GET"],
          name="ui.session.output"),
    Route("/ui/session/{sessionID}/earlier", earlier, methods=["GET"], name="ui.session.earlier"),
    Route("/ui/session/{sessionID}/details", details, methods=["GET"], name="ui.session.details"),
    Route("/ui/session/{sessionID}/command", command, methods=["GET"], name="ui.session.command"),
]
