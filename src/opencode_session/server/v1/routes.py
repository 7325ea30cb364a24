"""The V1 routes `opencode run --attach` calls (sessions, messages, the prompt, the event bus, config, path,
agents, permissions), mounted by the server app beside the V2 ones and behind the same guard and auth."""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import anyio
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Route

from ...core.agents import agent_info
from ...core.config import Config, ConfigError
from ...core.llm import listing
from ...core.location import Location, require_usable_directory, select_location
from ...core.runtime import Runtime
from ...core.session.requests import in_location
from ...schema.common import LocationRef, ModelRef
from ...schema.errors import (
    InvalidRequestError,
    PermissionNotFoundError,
    ServiceUnavailableError,
    TaggedError,
    UnknownError,
)
from ...schema.ids import well_formed
from ...schema.permission import PermissionV2Rule
from ...schema.prompt import PromptInput
from ..body import read_json_body
from ..sse import SSEResponse
from . import shapes
from .bus import bus_events
from .events import Streams
from .questions import question_routes
from .tui import tui_routes
from .webapp import webapp_routes

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]
V1_HEARTBEAT = 10.0  # OpenCode's bus says `server.heartbeat` after this many quiet seconds
IDLE_TOLD_TIMEOUT = 5.0  # how long a blocking prompt waits for the event streams to have said `session.idle`


def _json(value: Any, status: int = 200) -> Response:
    return JSONResponse(value, status_code=status)


def _directory(request: Request) -> str | None:
    """The client's directory scope: `?directory=` or the (percent-encoded) `x-opencode-directory` header."""
    value = request.query_params.get("directory") or request.headers.get("x-opencode-directory")
    return unquote(value) if value else None


def _location(rt: Runtime, request: Request) -> Location:
    directory = _directory(request)
    if directory is not None:
        require_usable_directory(directory, "query", "directory")
    return select_location(rt.location, directory, None)


async def _body(request: Request) -> dict[str, Any]:
    payload = read_json_body(await request.body()) if await request.body() else {}
    if not isinstance(payload, dict):
        raise InvalidRequestError("Invalid body: expected a JSON object", kind="body")
    return payload


def _rules(value: Any) -> list[PermissionV2Rule] | None:
    """V1's session rules (`{permission, pattern, action}`) as the session's own: `opencode run` denies the tools
    that would wait on a person (`question`), which takes them out of what the model is offered."""
    if value is None:
        return None
    if not isinstance(value, list):
        raise InvalidRequestError("Invalid body: permission: expected a list of rules", kind="body",
                                  field="permission")
    rules: list[PermissionV2Rule] = []
    for rule in value:
        try:
            rules.append(PermissionV2Rule(action=rule["permission"], resource=rule["pattern"],
                                          effect=rule["action"]))
        except (KeyError, TypeError, ValueError):
            raise InvalidRequestError("Invalid body: permission: each rule has a permission, a pattern and an"
                                      " action (allow, deny or ask)", kind="body", field="permission") from None
    return rules


def _config_view(config: Config) -> dict[str, Any]:
    """A V1 `Config`: the providers by name only (their options hold credentials, which never leave the server)."""
    out: dict[str, Any] = {"agent": {}, "command": {}, "mode": {}, "plugin": [],
                           "provider": {pid: {"name": p.name or pid} for pid, p in config.provider.items()}}
    for key in ("model", "small_model", "default_agent"):
        if getattr(config, key):
            out[key] = getattr(config, key)
    return out


def _guarded(fn: Handler) -> Handler:
    async def run(request: Request) -> Response:
        try:
            return await fn(request)
        except TaggedError as err:
            return JSONResponse(err.body(), status_code=err.status)
        except Exception:
            unknown = UnknownError.with_ref()
            log.exception("unexpected failure in V1 %s %s (ref %s)", request.method, request.url.path,
                          unknown.values["ref"])
            return JSONResponse(unknown.body(), status_code=unknown.status)

    return run


def v1_routes(rt: Runtime, *, heartbeat: float, shutdown: anyio.Event, stall_timeout: float) -> list[BaseRoute]:
    streams = Streams()

    async def session_create(request: Request) -> Response:
        body = await _body(request)
        directory = _directory(request)
        if directory is not None:
            require_usable_directory(directory, "query", "directory")
        title = body.get("title")
        info = await rt.sessions.create(
            location=LocationRef(directory=directory) if directory else None,
            parent_id=body.get("parentID") if isinstance(body.get("parentID"), str) else None,
            title=title if isinstance(title, str) and title else None, permissions=_rules(body.get("permission")))
        return _json(shapes.session_info(info))

    async def session_list(request: Request) -> Response:
        directory = _directory(request)
        infos, _links = await rt.sessions.list(directory=directory, limit=100)
        infos = sorted(infos, key=lambda s: s.time.updated, reverse=True)  # V1 lists the most recent first
        return _json([shapes.session_info(i) for i in infos])

    async def session_get(request: Request) -> Response:
        return _json(shapes.session_info(await rt.sessions.get(request.path_params["sessionID"])))

    async def _history(sid: str) -> list[dict[str, Any]]:
        info = await rt.sessions.get(sid)
        history, _links = await rt.sessions.messages(sid, limit=200, order="desc")
        return shapes.messages(info, list(reversed(history)))

    async def message_list(request: Request) -> Response:
        return _json(await _history(request.path_params["sessionID"]))

    async def _admit(sid: str, body: dict[str, Any]) -> None:
        parts = body.get("parts")
        if not isinstance(parts, list) or not parts:
            raise InvalidRequestError("Invalid body: parts: a list of parts is required", kind="body", field="parts")
        text = "\n\n".join(p["text"] for p in parts if isinstance(p, dict) and p.get("type") == "text"
                           and isinstance(p.get("text"), str))
        await rt.sessions.require(sid)
        model = body.get("model")
        if isinstance(model, dict) and model.get("providerID") and model.get("modelID"):
            variant = body.get("variant")
            await rt.sessions.switch_model(sid, ModelRef(id=model["modelID"], providerID=model["providerID"],
                                                         variant=variant if isinstance(variant, str) else None))
        agent = body.get("agent")
        if isinstance(agent, str) and agent:
            await rt.sessions.require_agent(sid, agent)
            await rt.sessions.switch_agent(sid, agent)
        # the client's own message ID (the web app shows its message at once under it), or a new one
        given = body.get("messageID")
        if given is not None and not (isinstance(given, str) and well_formed("msg", given)):
            raise InvalidRequestError("Invalid body: messageID: not a message ID", kind="body", field="messageID")
        await rt.sessions.admit(sid, PromptInput(text=text), id=given, delivery="steer", resume=True)

    async def prompt(request: Request) -> Response:
        """Blocking: the answer is the assistant message, once each open event stream has said the turn ended."""
        sid = request.path_params["sessionID"]
        body = await _body(request)
        if rt.execution is None:
            raise ServiceUnavailableError("Session execution is not running", service="execution")
        execution = rt.execution
        idle_sent = streams.expect_idle(sid)  # before admitting: the turn may end before the admission returns
        try:
            await _admit(sid, body)
            async with anyio.create_task_group() as tg:
                async def stop_on_shutdown() -> None:
                    await shutdown.wait()
                    tg.cancel_scope.cancel()

                tg.start_soon(stop_on_shutdown)
                await execution.wait(sid)
                with anyio.move_on_after(IDLE_TOLD_TIMEOUT):
                    for event in idle_sent:
                        await event.wait()
                tg.cancel_scope.cancel()
        finally:
            streams.forget(sid, idle_sent)
        if shutdown.is_set():
            raise ServiceUnavailableError("The server is shutting down", service="execution")
        answers = [m for m in await _history(sid) if m["info"]["role"] == "assistant"]
        if not answers:
            raise UnknownError("The prompt produced no answer")
        return _json(answers[-1])

    async def prompt_async(request: Request) -> Response:
        await _admit(request.path_params["sessionID"], await _body(request))
        return Response(status_code=204)

    async def abort(request: Request) -> Response:
        sid = request.path_params["sessionID"]
        await rt.sessions.require(sid)
        if rt.execution is not None:
            await rt.execution.interrupt(sid, "user")
        return _json(True)

    async def session_status(request: Request) -> Response:
        active = rt.execution.active() if rt.execution is not None else []
        return _json({sid: {"type": "busy"} for sid in active})  # V1 lists only the sessions that are not idle

    async def health(request: Request) -> Response:
        return _json({"healthy": True, "version": shapes.V1_VERSION})

    def _bus(directory: str | None) -> Response:
        source = bus_events(rt, streams, directory=directory, heartbeat=min(heartbeat, V1_HEARTBEAT))
        # the bus sends its own `server.heartbeat` when quiet, so the comment heartbeat seldom has to
        return SSEResponse(source, heartbeat=heartbeat * 2, shutdown=shutdown,  # type: ignore[return-value]
                           stall_timeout=stall_timeout)

    async def event(request: Request) -> Response:
        return _bus(_location(rt, request).info().directory)

    async def global_event(request: Request) -> Response:
        return _bus(None)

    async def config_get(request: Request) -> Response:
        loc = _location(rt, request)
        try:
            config = await rt.config.at(loc)
        except ConfigError as bad:
            raise InvalidRequestError(str(bad), kind="config") from None
        return _json(_config_view(config))

    async def path_get(request: Request) -> Response:
        loc = _location(rt, request)
        home = os.path.expanduser("~")
        directory = loc.info().directory
        return _json({"home": home, "state": str(Path(home) / ".local" / "state" / "opencode"),
                      "config": str(Path(home) / ".config" / "opencode"), "worktree": directory,
                      "directory": directory})

    async def project_current(request: Request) -> Response:
        info = _location(rt, request).info()
        return _json({"id": info.project.id, "worktree": info.directory,
                      "time": {"created": 0}})

    async def agent_list(request: Request) -> Response:
        loc = _location(rt, request)
        try:
            config = await rt.config.at(loc)
        except ConfigError as bad:
            raise InvalidRequestError(str(bad), kind="config") from None
        return _json([{"name": a.id, "description": a.description, "mode": a.mode, "hidden": a.hidden,
                       "native": True, "permission": [], "options": {}}
                      for a in agent_info(config, rt.options.env)])

    async def _catalog(request: Request) -> tuple[list[dict[str, Any]], dict[str, str]]:
        loc = _location(rt, request)
        try:
            config = await rt.config.at(loc)
        except ConfigError as bad:
            raise InvalidRequestError(str(bad), kind="config") from None
        listed = shapes.providers(listing.providers(config, rt.options.env), listing.models(config, rt.options.env))
        return listed, shapes.default_models(listed, config.model)

    async def config_providers(request: Request) -> Response:
        listed, default = await _catalog(request)
        return _json({"providers": listed, "default": default})

    async def provider_list(request: Request) -> Response:
        listed, default = await _catalog(request)
        return _json({"all": listed, "default": default, "connected": [p["id"] for p in listed]})

    async def session_fork(request: Request) -> Response:
        body = await _body(request)
        message = body.get("messageID")
        info = await rt.sessions.fork(request.path_params["sessionID"], message if isinstance(message, str) else None)
        return _json(shapes.session_info(info))

    async def session_delete(request: Request) -> Response:
        await rt.lifecycle.remove(request.path_params["sessionID"])
        return _json(True)

    async def session_update(request: Request) -> Response:
        sid = request.path_params["sessionID"]
        title = (await _body(request)).get("title")
        if title is not None and not isinstance(title, str):
            raise InvalidRequestError("Invalid body: title: expected a string", kind="body", field="title")
        await rt.lifecycle.update(sid, title=title)
        return _json(shapes.session_info(await rt.sessions.get(sid)))

    def _v1_permission(r: Any) -> dict[str, Any]:
        return {"id": r.id, "sessionID": r.sessionID, "permission": r.action, "patterns": r.resources,
                "always": r.save or r.resources, "metadata": r.metadata or {}}

    async def permission_list(request: Request) -> Response:
        pending = await in_location(rt.sessions, _location(rt, request), rt.permissions.pending())
        return _json([_v1_permission(r) for r in pending])

    async def permission_reply(request: Request) -> Response:
        request_id = request.path_params["requestID"]
        body = await _body(request)
        reply = body.get("reply")
        if reply not in ("once", "always", "reject"):
            raise InvalidRequestError("Invalid body: reply: expected once, always or reject", kind="body",
                                      field="reply")
        for pending in rt.permissions.pending():
            if pending.id == request_id:
                message = body.get("message")
                await rt.reply_permission(pending.sessionID, request_id, reply,
                                          message if isinstance(message, str) else None)
                return _json(True)
        raise PermissionNotFoundError(requestID=request_id)

    table: list[tuple[str, str, Handler]] = [
        ("POST", "/session", session_create),
        ("GET", "/session", session_list),
        ("GET", "/session/status", session_status),
        ("GET", "/session/{sessionID}", session_get),
        ("PATCH", "/session/{sessionID}", session_update),
        ("DELETE", "/session/{sessionID}", session_delete),
        ("POST", "/session/{sessionID}/fork", session_fork),
        ("GET", "/session/{sessionID}/message", message_list),
        ("POST", "/session/{sessionID}/message", prompt),
        ("POST", "/session/{sessionID}/prompt_async", prompt_async),
        ("POST", "/session/{sessionID}/abort", abort),
        ("GET", "/event", event),
        ("GET", "/global/event", global_event),
        *question_routes(rt, lambda request: _location(rt, request)),
        *webapp_routes(rt, lambda request: _location(rt, request), _config_view, _history),
        ("GET", "/global/health", health),
        ("GET", "/config", config_get),
        ("GET", "/config/providers", config_providers),
        ("GET", "/provider", provider_list),
        ("GET", "/path", path_get),
        ("GET", "/project/current", project_current),
        ("GET", "/agent", agent_list),
        ("GET", "/permission", permission_list),
        ("POST", "/permission/{requestID}/reply", permission_reply),
    ]
    table += tui_routes(rt)
    return [Route(path, _guarded(fn), methods=[method], name=f"v1.{method.lower()}.{path}")
            for method, path, fn in table]

