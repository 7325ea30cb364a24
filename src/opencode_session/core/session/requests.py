"""What sessions ask of their user, seen from the API: the pending permission and question requests of the
sessions working in one Location, and a permission request a client files for a session under its agent's rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from ...schema.errors import InvalidRequestError
from ...schema.permission import PermissionV2Source
from ..agents import AgentNotFoundError, resolve_agent
from ..config import ConfigSource
from ..location import Location, resolve_location
from ..permission import Effect, PermissionAsk, PermissionRequests, with_session_rules
from .service import Sessions


class _Pending(Protocol):
    @property
    def sessionID(self) -> str: ...  # noqa: N802 - the wire field


R = TypeVar("R", bound=_Pending)


async def in_location(sessions: Sessions, location: Location, requests: list[R]) -> list[R]:
    """The requests whose session works in `location`."""
    directories: dict[str, str] = {}
    for session_id in {r.sessionID for r in requests}:
        directories[session_id] = (await sessions.get(session_id)).location.directory
    return [r for r in requests if directories[r.sessionID] == str(location.directory)]


async def file_permission(sessions: Sessions, permissions: PermissionRequests, configs: ConfigSource,
                          env: Mapping[str, str], session_id: str, need: PermissionAsk, *, agent: str | None,
                          source: PermissionV2Source | None, request_id: str | None) -> tuple[str, Effect]:
    """Ask on a client's behalf under the rules of `agent` (the session's own when None) in the session's Location.
    Raises ConfigError when that Location's configuration is broken, InvalidRequestError for an unknown agent."""
    session = await sessions.get(session_id)
    location = resolve_location(session.location.directory, session.location.workspaceID)
    config = await configs.at(location)
    try:
        chosen = resolve_agent(config, agent or session.agent)
    except AgentNotFoundError as missing:
        raise InvalidRequestError(str(missing), kind="body", field="agent") from None
    rules = with_session_rules(chosen.rules(config.permission, env), session.permissions)
    return await permissions.create(session.id, location.project_id, rules, need,
                                    source, request_id)
