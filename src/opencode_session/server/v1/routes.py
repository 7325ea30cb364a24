"""The V1 routes `opencode run --attach` calls (sessions, messages, the prompt, the event bus, config, path,
agents, permissions) and the table of every V1 route (`V1_ROUTES`, with the web app's, the terminal clients' and
the questions'), mounted by the server app beside the V2 ones and behind the same guard and auth."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from ...core.agents import agent_info
from ...core.llm import listing
from ...core.session.requests import in_location
from ...schema.common import LocationRef, ModelRef
from ...schema.errors import PermissionNotFoundError, ServiceUnavailableError, UnknownError
from ...schema.permission import PermissionV2Request, PermissionV2Rule
from ...schema.prompt import PromptInput
from ..sse import SSEResponse
from ..state import app_state, runtime_of
from . import shapes, wire
from .bus import bus_events
from .endpoint import V1Route, config_at, directory, history, location, usable_directory
from .questions import QUESTION_ROUTES
from .tui import TUI_ROUTES
from .webapp import WEBAPP_ROUTES

V1_HEARTBEAT = 10.0  # OpenCode's bus says `server.heartbeat` after this many quiet seconds
IDLE_TOLD_TIMEOUT = 5.0  # how long a blocking prompt waits for the event streams to have said `session.idle`


async def session_create(request: Request, body: wire.SessionCreateBody) -> Any:
    where = usable_directory(request)
    rules = None if body.permission is None else [
        PermissionV2Rule(action=r.permission, resource=r.pattern, effect=r.action) for r in body.permission]
    info = await runtime_of(request).sessions.create(
        location=LocationRef(directory=where) if where else None, parent_id=body.parentID,
        title=body.title or None, permissions=rules)
    return shapes.session_info(info)


async def session_list(request: Request) -> Any:
    infos, _links = await runtime_of(request).sessions.list(directory=directory(request), limit=100)
    infos = sorted(infos, key=lambda s: s.time.updated, reverse=True)  # V1 lists the most recent first
    return [shapes.session_info(i) for i in infos]


async def session_get(request: Request) -> Any:
    return shapes.session_info(await runtime_of(request).sessions.get(request.path_params["sessionID"]))


async def message_list(request: Request) -> Any:
    return await history(runtime_of(request), request.path_params["sessionID"])


async def _admit(request: Request, body: wire.PromptBody) -> None:
    rt, sid = runtime_of(request), request.path_params["sessionID"]
    text = "\n\n".join(p.text for p in body.parts if p.type == "text" and p.text is not None)
    await rt.sessions.require(sid)
    if body.model is not None and body.model.providerID and body.model.modelID:
        await rt.sessions.switch_model(sid, ModelRef(id=body.model.modelID, providerID=body.model.providerID,
                                                     variant=body.variant))
    if body.agent:
        await rt.sessions.require_agent(sid, body.agent)
        await rt.sessions.switch_agent(sid, body.agent)
    await rt.sessions.admit(sid, PromptInput(text=text), id=body.messageID, delivery="steer", resume=True)


async def prompt(request: Request, body: wire.PromptBody) -> Any:
    """Blocking: the answer is the assistant message, once each open event stream has said the turn ended."""
    state = app_state(request)
    rt, streams, shutdown = state.runtime, state.v1_streams, state.shutdown
    sid = request.path_params["sessionID"]
    if rt.execution is None:
        raise ServiceUnavailableError("Session execution is not running", service="execution")
    execution = rt.execution
    idle_sent = streams.expect_idle(sid)  # before admitting: the turn may end before the admission returns
    try:
        await _admit(request, body)
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
    answers = [m for m in await history(rt, sid) if m["info"]["role"] == "assistant"]
    if not answers:
        raise UnknownError("The prompt produced no answer")
    return answers[-1]


async def prompt_async(request: Request, body: wire.PromptBody) -> Response:
    await _admit(request, body)
    return Response(status_code=204)


async def abort(request: Request) -> Any:
    rt, sid = runtime_of(request), request.path_params["sessionID"]
    await rt.sessions.require(sid)
    if rt.execution is not None:
        await rt.execution.interrupt(sid, "user")
    return True


async def session_status(request: Request) -> Any:
    rt = runtime_of(request)
    active = rt.execution.active() if rt.execution is not None else []
    return {sid: {"type": "busy"} for sid in active}  # V1 lists only the sessions that are not idle


async def health(request: Request) -> Any:
    return {"healthy": True, "version": shapes.V1_VERSION}


def _bus(request: Request, where: str | None) -> SSEResponse:
    state = app_state(request)
    source = bus_events(state.runtime, state.v1_streams, directory=where,
                        heartbeat=min(state.heartbeat, V1_HEARTBEAT))
    # the bus sends its own `server.heartbeat` when quiet, so the comment heartbeat seldom has to
    return state.stream(source, heartbeat=state.heartbeat * 2)


async def event(request: Request) -> SSEResponse:
    return _bus(request, location(request).info().directory)


async def global_event(request: Request) -> SSEResponse:
    return _bus(request, None)


async def config_get(request: Request) -> Any:
    return shapes.config_view(await config_at(runtime_of(request), location(request)))


async def path_get(request: Request) -> Any:
    home = os.path.expanduser("~")
    where = location(request).info().directory
    return {"home": home, "state": str(Path(home) / ".local" / "state" / "opencode"),
            "config": str(Path(home) / ".config" / "opencode"), "worktree": where, "directory": where}


async def project_current(request: Request) -> Any:
    info = location(request).info()
    return {"id": info.project.id, "worktree": info.directory, "time": {"created": 0}}


async def agent_list(request: Request) -> Any:
    rt = runtime_of(request)
    config = await config_at(rt, location(request))
    return [{"name": a.id, "description": a.description, "mode": a.mode, "hidden": a.hidden,
             "native": True, "permission": [], "options": {}}
            for a in agent_info(config, rt.options.env)]


async def _catalog(request: Request) -> tuple[list[dict[str, Any]], dict[str, str]]:
    rt = runtime_of(request)
    config = await config_at(rt, location(request))
    listed = shapes.providers(listing.providers(config, rt.options.env), listing.models(config, rt.options.env))
    return listed, shapes.default_models(listed, config.model)


async def config_providers(request: Request) -> Any:
    listed, default = await _catalog(request)
    return {"providers": listed, "default": default}


async def provider_list(request: Request) -> Any:
    listed, default = await _catalog(request)
    return {"all": listed, "default": default, "connected": [p["id"] for p in listed]}


async def session_fork(request: Request, body: wire.SessionForkBody) -> Any:
    info = await runtime_of(request).sessions.fork(request.path_params["sessionID"], body.messageID)
    return shapes.session_info(info)


async def session_delete(request: Request) -> Any:
    await runtime_of(request).lifecycle.remove(request.path_params["sessionID"])
    return True


async def session_update(request: Request, body: wire.SessionUpdateBody) -> Any:
    rt, sid = runtime_of(request), request.path_params["sessionID"]
    await rt.lifecycle.update(sid, title=body.title)
    return shapes.session_info(await rt.sessions.get(sid))


def _v1_permission(r: PermissionV2Request) -> dict[str, Any]:
    return {"id": r.id, "sessionID": r.sessionID, "permission": r.action, "patterns": r.resources,
            "always": r.save or r.resources, "metadata": r.metadata or {}}


async def permission_list(request: Request) -> Any:
    rt = runtime_of(request)
    pending = await in_location(rt.sessions, location(request), rt.permissions.pending())
    return [_v1_permission(r) for r in pending]


async def permission_reply(request: Request, body: wire.PermissionReplyBody) -> Any:
    rt, request_id = runtime_of(request), request.path_params["requestID"]
    for pending in rt.permissions.pending():
        if pending.id == request_id:
            await rt.reply_permission(pending.sessionID, request_id, body.reply, body.message)
            return True
    raise PermissionNotFoundError(requestID=request_id)


V1_ROUTES: list[V1Route] = [
    V1Route("POST", "/session", session_create, wire.Session, wire.SessionCreateBody),
    V1Route("GET", "/session", session_list, list[wire.Session]),
    V1Route("GET", "/session/status", session_status, dict[str, wire.Busy]),
    V1Route("GET", "/session/{sessionID}", session_get, wire.Session),
    V1Route("PATCH", "/session/{sessionID}", session_update, wire.Session, wire.SessionUpdateBody),
    V1Route("DELETE", "/session/{sessionID}", session_delete, bool),
    V1Route("POST", "/session/{sessionID}/fork", session_fork, wire.Session, wire.SessionForkBody),
    V1Route("GET", "/session/{sessionID}/message", message_list, list[wire.Message]),
    V1Route("POST", "/session/{sessionID}/message", prompt, wire.Message, wire.PromptBody),
    V1Route("POST", "/session/{sessionID}/prompt_async", prompt_async, None, wire.PromptBody),
    V1Route("POST", "/session/{sessionID}/abort", abort, bool),
    V1Route("GET", "/event", event),
    V1Route("GET", "/global/event", global_event),
    *QUESTION_ROUTES,
    *WEBAPP_ROUTES,
    V1Route("GET", "/global/health", health, wire.Health),
    V1Route("GET", "/config", config_get, wire.Config),
    V1Route("GET", "/config/providers", config_providers, wire.ConfigProviders),
    V1Route("GET", "/provider", provider_list, wire.ProviderList),
    V1Route("GET", "/path", path_get, wire.Paths),
    V1Route("GET", "/project/current", project_current, wire.ProjectCurrent),
    V1Route("GET", "/agent", agent_list, list[wire.Agent]),
    V1Route("GET", "/permission", permission_list, list[wire.Permission]),
    V1Route("POST", "/permission/{requestID}/reply", permission_reply, bool, wire.PermissionReplyBody),
    *TUI_ROUTES,
]
