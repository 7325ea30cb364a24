"""V1 shapes (a `Session` with slug and directory, a `Message` with its `Part`s) derived from the V2 projections."""

from __future__ import annotations

from typing import Any

from ...core.config import Config
from ...schema.catalog import ModelApiAISDK, ModelV2Info, ProviderV2Info
from ...schema.message import (
    SessionMessage,
    SessionMessageAssistant,
    SessionMessageAssistantReasoning,
    SessionMessageAssistantText,
    SessionMessageAssistantTool,
    SessionMessageUser,
)
from ...schema.session import SessionV2Info

V1_VERSION = "1.18.33"  # the OpenCode release whose V1 shapes these follow

_TOOL_STATUS = {"streaming": "pending", "running": "running", "completed": "completed", "error": "error"}


def _tokens(tokens: Any) -> dict[str, Any]:
    if tokens is None:
        return {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}}
    return {"input": tokens.input, "output": tokens.output, "reasoning": tokens.reasoning,
            "cache": {"read": tokens.cache.read, "write": tokens.cache.write}}


def session_info(info: SessionV2Info) -> dict[str, Any]:
    """A V1 `Session`: its directory is the Location's, its path that directory within the project (the web app
    files the session under the project's worktree joined with it); the slug is derived from the ID (we keep none)."""
    directory = info.location.directory
    out: dict[str, Any] = {
        "id": info.id, "slug": info.id.removeprefix("ses_").lower()[:16], "projectID": info.projectID,
        "directory": directory, "path": info.subpath or "", "title": info.title,
        "version": V1_VERSION, "cost": info.cost, "tokens": _tokens(info.tokens),
        "time": {"created": info.time.created, "updated": info.time.updated},
    }
    if info.time.archived is not None:
        out["time"]["archived"] = info.time.archived
    if info.parentID is not None:
        out["parentID"] = info.parentID
    if info.agent is not None:
        out["agent"] = info.agent
    if info.model is not None:
        out["model"] = {"id": info.model.id, "providerID": info.model.providerID,
                        "variant": info.model.variant or "default"}
    if info.permissions:
        out["permission"] = [{"permission": r.action, "pattern": r.resource, "action": r.effect}
                             for r in info.permissions]
    return out


def config_view(config: Config) -> dict[str, Any]:
    """A V1 `Config`: the providers by name only (their options hold credentials, which never leave the server)."""
    out: dict[str, Any] = {"agent": {}, "command": {}, "mode": {}, "plugin": [],
                           "provider": {pid: {"name": p.name or pid} for pid, p in config.provider.items()}}
    for key in ("model", "small_model", "default_agent"):
        if getattr(config, key):
            out[key] = getattr(config, key)
    return out


def part_id(message_id: str, content_id: str) -> str:
    """The V1 part ID of a message's content item: a content ID is unique within its message only."""
    return content_id if content_id.startswith("prt_") else f"prt_{message_id.removeprefix('msg_')}_{content_id}"


def _part(session_id: str, message_id: str, content_id: str, kind: str, **fields: Any) -> dict[str, Any]:
    return {"id": part_id(message_id, content_id), "sessionID": session_id,
            "messageID": message_id, "type": kind, **fields}


def _tool_part(session_id: str, message_id: str, item: SessionMessageAssistantTool) -> dict[str, Any]:
    state = item.state
    status = _TOOL_STATUS[state.status]
    out: dict[str, Any] = {"status": status}
    if state.status == "streaming":
        out.update(input={}, raw=state.input)
    else:
        out["input"] = state.input
        start = item.time.ran or item.time.created
        text = "\n".join(c.text for c in state.content if c.type == "text")
        if state.status == "running":
            out.update(time={"start": start}, title=item.name, metadata=dict(state.structured))
        elif state.status == "completed":
            out.update(output=text, title=item.name, metadata=dict(state.structured),
                       time={"start": start, "end": item.time.completed or start})
        else:
            out.update(error=state.error.message, metadata=dict(state.structured),
                       time={"start": start, "end": item.time.completed or start})
    return _part(session_id, message_id, item.id, "tool", callID=item.id, tool=item.name, state=out)


def _assistant_parts(session_id: str, msg: SessionMessageAssistant) -> list[dict[str, Any]]:
    done = msg.time.completed
    parts = [_part(session_id, msg.id, "start", "step-start")]
    for index, item in enumerate(msg.content):
        # a text is whole once something follows it or its message completed: V1 marks that with `time.end`
        ended = done is not None or index < len(msg.content) - 1
        if isinstance(item, SessionMessageAssistantText):
            time = {"start": msg.time.created, **({"end": done or msg.time.created} if ended else {})}
            parts.append(_part(session_id, msg.id, item.id, "text", text=item.text, time=time))
        elif isinstance(item, SessionMessageAssistantReasoning):
            time = {"start": msg.time.created, **({"end": done or msg.time.created} if ended else {})}
            parts.append(_part(session_id, msg.id, item.id, "reasoning", text=item.text,
                               metadata=item.providerMetadata or {}, time=time))
        elif isinstance(item, SessionMessageAssistantTool):
            parts.append(_tool_part(session_id, msg.id, item))
    if done is not None:
        parts.append(_part(session_id, msg.id, "finish", "step-finish", reason=msg.finish or "stop",
                           cost=msg.cost or 0, tokens=_tokens(msg.tokens)))
    return parts


def messages(session: SessionV2Info, history: list[SessionMessage]) -> list[dict[str, Any]]:
    """The session's user and assistant messages as V1 `{info, parts}`, oldest first (other kinds are V2's own)."""
    out: list[dict[str, Any]] = []
    sid, directory = session.id, session.location.directory
    last_user: str | None = None
    for msg in history:
        if isinstance(msg, SessionMessageUser):
            last_user = msg.id
            info: dict[str, Any] = {"id": msg.id, "sessionID": sid, "role": "user",
                                    "time": {"created": msg.time.created}, "agent": session.agent or "build"}
            if session.model is not None:
                info["model"] = {"providerID": session.model.providerID, "modelID": session.model.id}
            text = _part(sid, msg.id, "text", "text", text=msg.text)
            out.append({"info": info, "parts": [text]})
        elif isinstance(msg, SessionMessageAssistant):
            info = {"id": msg.id, "sessionID": sid, "role": "assistant", "mode": msg.agent, "agent": msg.agent,
                    "path": {"cwd": directory, "root": directory}, "cost": msg.cost or 0,
                    "tokens": _tokens(msg.tokens), "modelID": msg.model.id, "providerID": msg.model.providerID,
                    "time": {"created": msg.time.created,
                             **({"completed": msg.time.completed} if msg.time.completed else {})}}
            if last_user is not None:
                info["parentID"] = last_user
            if msg.finish is not None:
                info["finish"] = msg.finish
            if msg.error is not None:
                info["error"] = {"name": "UnknownError", "data": {"message": msg.error.message}}
            out.append({"info": info, "parts": _assistant_parts(sid, msg)})
    return out


_MODALITIES = ("text", "audio", "image", "video", "pdf")


def _model(model: ModelV2Info) -> dict[str, Any]:
    cost = next((c for c in model.cost if c.tier is None), model.cost[0] if model.cost else None)
    caps = model.capabilities
    return {
        "id": model.id, "providerID": model.providerID, "name": model.name, "family": model.family or "",
        "api": {"id": model.api.id, "url": model.api.url or "",
                "npm": model.api.package if isinstance(model.api, ModelApiAISDK) else ""},
        "capabilities": {"temperature": True, "reasoning": "reasoning" in caps.output,
                         "attachment": len(caps.input) > 1,
                         "toolcall": caps.tools, "interleaved": False,
                         "input": {m: m in caps.input for m in _MODALITIES},
                         "output": {m: m in caps.output for m in _MODALITIES}},
        "cost": {"input": cost.input if cost else 0, "output": cost.output if cost else 0,
                 "cache": {"read": cost.cache.read if cost else 0, "write": cost.cache.write if cost else 0}},
        "limit": {"context": model.limit.context, "output": model.limit.output,
                  **({"input": model.limit.input} if model.limit.input is not None else {})},
        "status": model.status, "options": {}, "headers": dict(model.request.headers),
        "release_date": "", "variants": {v.id: {} for v in model.variants},
    }


def providers(listed: list[ProviderV2Info], models: list[ModelV2Info]) -> list[dict[str, Any]]:
    """V1 `Provider`s, each with its models by ID (no options: credentials never leave the server)."""
    return [{"id": p.id, "name": p.name, "source": "config", "env": [], "options": {},
             "models": {m.id: _model(m) for m in models if m.providerID == p.id}}
            for p in listed if not p.disabled]


def default_models(listed: list[dict[str, Any]], configured: str | None) -> dict[str, str]:
    """V1's `default`: each provider's default model, the configured `provider/model` first."""
    chosen: dict[str, str] = {}
    if configured and "/" in configured:
        provider, model = configured.split("/", 1)
        chosen[provider] = model
    return {p["id"]: chosen.get(p["id"]) or next(iter(p["models"]), "") for p in listed if p["models"]}
