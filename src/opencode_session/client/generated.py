"""Typed operation groups and OpenCodeClient, generated from protocol's SDK Contract IR.

Do not edit: run `python -m opencode_session.client.codegen` after changing protocol.
"""

from __future__ import annotations

import builtins
from functools import cached_property
from typing import Any, Literal, cast

from opencode_session.client.runtime import BaseClient, CallOptions, Page
from opencode_session.client.sse import EventStream
from opencode_session.client.websocket import WebSocketSession
from opencode_session.protocol.api import (
    AgentList,
    CommandList,
    FsEntries,
    HealthStatus,
    InstanceEvent,
    IntegrationAnswer,
    IntegrationAttemptAnswer,
    IntegrationAttemptStatusAnswer,
    IntegrationList,
    LocationSelector,
    McpStatusList,
    PermissionCreated,
    PermissionRequestList,
    PtyAnswer,
    PtyList,
    PtyTokenAnswer,
    QuestionRequestList,
    ReferenceList,
    SessionDurableEvent,
    SessionGenerated,
    SessionInterrupted,
    SessionLogItem,
    SkillList,
    TrustInfo,
)
from opencode_session.schema.catalog import ModelList, ProviderAnswer, ProviderList
from opencode_session.schema.common import LocationRef, ModelRef
from opencode_session.schema.input import SessionInputAdmitted
from opencode_session.schema.instruction_entry import InstructionEntry
from opencode_session.schema.lifecycle import InboxItem, InboxSyntheticItem, SessionTranscript
from opencode_session.schema.location import LocationInfo
from opencode_session.schema.message import SessionMessage
from opencode_session.schema.model_context import StepModelContext
from opencode_session.schema.permission import (
    PermissionSavedInfo,
    PermissionV2Request,
    PermissionV2Rule,
    PermissionV2Source,
)
from opencode_session.schema.prompt import PromptInput
from opencode_session.schema.pty import PtySize
from opencode_session.schema.question import QuestionV2Request
from opencode_session.schema.session import FileDiff, RevertState, SessionActive, SessionOwner, SessionV2Info
from opencode_session.schema.stats import SessionStats

__all__ = [
    "AgentGroup",
    "CommandGroup",
    "CredentialGroup",
    "EventGroup",
    "ExperimentalGroup",
    "FsGroup",
    "HealthGroup",
    "IntegrationGroup",
    "LocationGroup",
    "McpGroup",
    "ModelGroup",
    "OpenCodeClient",
    "PermissionGroup",
    "ProviderGroup",
    "PtyGroup",
    "QuestionGroup",
    "ReferenceGroup",
    "SessionGroup",
    "SkillGroup",
]


class AgentGroup:
    """Operations of the `agent` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> AgentList:
        """List agents.

        Retrieve the agents available at the requested location: the built-in ones and the configured.

        `GET /api/agent` (v2.agent.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("AgentList", await self._client._call(
            "v2.agent.list",
            query={"location": location},
            options=options,
        ))


class CommandGroup:
    """Operations of the `command` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> CommandList:
        """List commands.

        The custom commands of the location: opencode.json's `command` entries and the markdown files
        under `command/` of the global config directory and of `.opencode/` in the project.

        `GET /api/command` (v2.command.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("CommandList", await self._client._call(
            "v2.command.list",
            query={"location": location},
            options=options,
        ))


class CredentialGroup:
    """Operations of the `credential` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def remove(
        self,
        credential_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Remove credential.

        Delete a stored credential: Steps that start after this no longer use it. Removing an unknown
        one is a no-op.

        `DELETE /api/credential/{credentialID}` (v2.credential.remove). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.credential.remove",
            path={"credentialID": credential_id},
            query={"location": location},
            options=options,
        )

    async def update(
        self,
        credential_id: str,
        *,
        label: str,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Rename credential.

        Change the label of a stored credential.

        `PATCH /api/credential/{credentialID}` (v2.credential.update). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.credential.update",
            path={"credentialID": credential_id},
            query={"location": location},
            body={"label": label},
            options=options,
        )


class EventGroup:
    """Operations of the `event` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    def subscribe(self, *, options: CallOptions | None = None) -> EventStream[InstanceEvent]:
        """Subscribe to events.

        Subscribe to native event payloads for the server.

        `GET /api/event` (v2.event.subscribe). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return self._client._stream("v2.event.subscribe", options=options)


class ExperimentalGroup:
    """Operations of the `experimental` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def session_export(
        self,
        session_id: str,
        *,
        sanitize: bool | None = None,
        options: CallOptions | None = None,
    ) -> SessionTranscript:
        """Export session.

        Retrieve a session's record and projected messages, oldest first. With sanitize=true,
        credentials, the absolute home directory, attachments' bytes and tool output file paths are
        removed.

        `GET /api/experimental/session/{sessionID}/export` (v2.experimental.session.export). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("SessionTranscript", await self._client._call(
            "v2.experimental.session.export",
            path={"sessionID": session_id},
            query={"sanitize": sanitize},
            options=options,
        ))

    async def session_import(
        self,
        *,
        info: SessionV2Info | dict[str, Any],
        messages: list[SessionMessage],
        location: LocationRef | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> SessionV2Info:
        """Import session.

        Recreate an exported session, in one transaction: it lists, replays and continues like any
        other. Parents must be imported before their children; an ID already here is a conflict.

        `POST /api/experimental/session/import` (v2.experimental.session.import). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), ConflictError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("SessionV2Info", await self._client._call(
            "v2.experimental.session.import",
            body={"info": info, "messages": messages, "location": location},
            options=options,
        ))

    async def session_stats(
        self,
        *,
        from_: int | None = None,
        to: int | None = None,
        project: str | None = None,
        timezone: str | None = None,
        tools: bool | None = None,
        options: CallOptions | None = None,
    ) -> SessionStats:
        """Session statistics.

        Retrieve usage over a time range: sessions, prompts, Steps, tokens and cost in all, per model,
        per agent and per day in the given time zone, and each tool's calls and failures.

        `GET /api/experimental/session/stats` (v2.experimental.session.stats). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("SessionStats", await self._client._call(
            "v2.experimental.session.stats",
            query={"from": from_, "to": to, "project": project, "timezone": timezone, "tools": tools},
            options=options,
        ))

    async def trust_get(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> TrustInfo:
        """Location trust.

        Extension (not in OpenCode 1.18.33's V2 API): whether the location's project configuration
        (opencode.json's hooks, MCP servers, plugins, providers, web search and permissions that
        widen) has authority, which the user gives by trusting the location with its content; until
        then those are ignored and `ignored` names them. The user's own configuration is always
        trusted.

        `GET /api/experimental/trust` (v2.experimental.trust.get). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("TrustInfo", await self._client._call(
            "v2.experimental.trust.get",
            query={"location": location},
            options=options,
        ))

    async def trust_grant(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        digest: str | None = None,
        options: CallOptions | None = None,
    ) -> TrustInfo:
        """Trust location.

        Extension: trust the location's project configuration with the content it has now (with
        `digest`, only if that is still its content: 409 otherwise), so its hooks, MCP servers,
        plugins and permissions apply from the next Step or session; a later change to it must be
        trusted again. Kept in the user's data directory, as `ocs trust` does.

        `POST /api/experimental/trust` (v2.experimental.trust.grant). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), ConflictError (409),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("TrustInfo", await self._client._call(
            "v2.experimental.trust.grant",
            query={"location": location},
            body={"digest": digest},
            options=options,
        ))


class FsGroup:
    """Operations of the `fs` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def find(
        self,
        *,
        query: str,
        location: LocationSelector | dict[str, Any] | None = None,
        type: Literal["file", "directory"] | None = None,
        limit: int | None = None,
        options: CallOptions | None = None,
    ) -> FsEntries:
        """Find files.

        Files and directories anywhere in the location ranked by how well their path matches `query`,
        as a fuzzy file finder ranks them, without the ones ignore files exclude; at most `limit` (50
        by default).

        `GET /api/fs/find` (v2.fs.find). Declared errors: InvalidRequestError (400), UnauthorizedError
        (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("FsEntries", await self._client._call(
            "v2.fs.find",
            query={"location": location, "query": query, "type": type, "limit": limit},
            options=options,
        ))

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        path: str | None = None,
        options: CallOptions | None = None,
    ) -> FsEntries:
        """List directory.

        The entries directly inside a directory of the location (`path`, relative to it; the location
        itself by default), directories first, without the ones ignore files exclude.

        `GET /api/fs/list` (v2.fs.list). Declared errors: InvalidRequestError (400), UnauthorizedError
        (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("FsEntries", await self._client._call(
            "v2.fs.list",
            query={"location": location, "path": path},
            options=options,
        ))

    async def read(
        self,
        path: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> bytes:
        """Read file.

        The bytes of one regular file, named by the path after `/api/fs/read/` relative to the
        location (`..` and symbolic links resolved; elsewhere only where a permission rule allows).
        The `X-File-Kind` header says `text` or `binary`.

        `GET /api/fs/read/*` (v2.fs.read). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("bytes", await self._client._call(
            "v2.fs.read",
            path={"path": path},
            query={"location": location},
            options=options,
        ))


class HealthGroup:
    """Operations of the `health` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def get(self, *, options: CallOptions | None = None) -> HealthStatus:
        """Check server health.

        Check whether the API server is ready to accept requests.

        `GET /api/health` (v2.health.get). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("HealthStatus", await self._client._call("v2.health.get", options=options))


class IntegrationGroup:
    """Operations of the `integration` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def attempt_cancel(
        self,
        attempt_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Cancel OAuth attempt.

        Abandon a pending OAuth attempt and release what it holds. Cancelling an unknown one is a no-
        op.

        `DELETE /api/integration/attempt/{attemptID}` (v2.integration.attempt.cancel). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.integration.attempt.cancel",
            path={"attemptID": attempt_id},
            query={"location": location},
            options=options,
        )

    async def attempt_complete(
        self,
        attempt_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        code: str | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Complete OAuth attempt.

        Finish a `code` mode attempt with the code the provider showed the user: the code is exchanged
        for a credential, which is stored.

        `POST /api/integration/attempt/{attemptID}/complete` (v2.integration.attempt.complete).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.integration.attempt.complete",
            path={"attemptID": attempt_id},
            query={"location": location},
            body={"code": code},
            options=options,
        )

    async def attempt_status(
        self,
        attempt_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> IntegrationAttemptStatusAnswer:
        """Get OAuth attempt status.

        Whether an OAuth attempt is pending, complete, failed (with why) or expired.

        `GET /api/integration/attempt/{attemptID}` (v2.integration.attempt.status). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("IntegrationAttemptStatusAnswer", await self._client._call(
            "v2.integration.attempt.status",
            path={"attemptID": attempt_id},
            query={"location": location},
            options=options,
        ))

    async def connect_key(
        self,
        integration_id: str,
        *,
        key: str,
        location: LocationSelector | dict[str, Any] | None = None,
        label: str | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Connect with a key.

        Store an API key for the provider: later Steps use it, without any configuration change. The
        key is never returned by any operation.

        `POST /api/integration/{integrationID}/connect/key` (v2.integration.connect.key). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.integration.connect.key",
            path={"integrationID": integration_id},
            query={"location": location},
            body={"key": key, "label": label},
            options=options,
        )

    async def connect_oauth(
        self,
        integration_id: str,
        *,
        method_id: str,
        inputs: dict[str, str],
        location: LocationSelector | dict[str, Any] | None = None,
        label: str | None = None,
        options: CallOptions | None = None,
    ) -> IntegrationAttemptAnswer:
        """Start an OAuth connection.

        Begin an OAuth attempt with one of the provider's OAuth methods: the answer has the
        authorization URL to open and the attempt's ID to poll, complete (with the code, in `code`
        mode) or cancel.

        `POST /api/integration/{integrationID}/connect/oauth` (v2.integration.connect.oauth). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("IntegrationAttemptAnswer", await self._client._call(
            "v2.integration.connect.oauth",
            path={"integrationID": integration_id},
            query={"location": location},
            body={"methodID": method_id, "inputs": inputs, "label": label},
            options=options,
        ))

    async def get(
        self,
        integration_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> IntegrationAnswer:
        """Get integration.

        One provider's connection methods and connections.

        `GET /api/integration/{integrationID}` (v2.integration.get). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("IntegrationAnswer", await self._client._call(
            "v2.integration.get",
            path={"integrationID": integration_id},
            query={"location": location},
            options=options,
        ))

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> IntegrationList:
        """List integrations.

        The providers this runtime can reach (built in and configured), how each can be connected, and
        the connections each has: stored credentials (newest first) and set environment variables.

        `GET /api/integration` (v2.integration.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("IntegrationList", await self._client._call(
            "v2.integration.list",
            query={"location": location},
            options=options,
        ))


class LocationGroup:
    """Operations of the `location` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def get(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> LocationInfo:
        """Get location.

        Resolve the requested location or the server default location.

        `GET /api/location` (v2.location.get). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("LocationInfo", await self._client._call(
            "v2.location.get",
            query={"location": location},
            options=options,
        ))


class McpGroup:
    """Operations of the `mcp` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def connect(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> McpStatusList:
        """Start MCP servers.

        Extension: starts the MCP servers opencode.json's `mcp` configures for the location that are
        not running (each waited for at most its `timeout`) and answers their status as `GET /api/mcp`
        does. A POST, so that no page can make a browser start a process with a plain load.

        `POST /api/mcp/connect` (v2.mcp.connect). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("McpStatusList", await self._client._call(
            "v2.mcp.connect",
            query={"location": location},
            options=options,
        ))

    async def status(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> McpStatusList:
        """MCP server status.

        Extension (not in OpenCode 1.18.33's V2 API; OpenCode's own `GET /mcp` answers the same map):
        the MCP servers opencode.json's `mcp` configures for the location, by name, each `connected`,
        `disabled` or `failed` with its `error`, or `stopped` when it is not running: a status read
        starts nothing (the next Step at the location starts them, or `POST /api/mcp/connect`).

        `GET /api/mcp` (v2.mcp.status). Declared errors: InvalidRequestError (400), UnauthorizedError
        (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("McpStatusList", await self._client._call(
            "v2.mcp.status",
            query={"location": location},
            options=options,
        ))


class ModelGroup:
    """Operations of the `model` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> ModelList:
        """List models.

        Retrieve available models ordered by release date.

        `GET /api/model` (v2.model.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429), ServiceUnavailableError (503).
        """
        return cast("ModelList", await self._client._call(
            "v2.model.list",
            query={"location": location},
            options=options,
        ))


class PermissionGroup:
    """Operations of the `permission` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def request_list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> PermissionRequestList:
        """List pending permission requests.

        Retrieve the permission requests waiting for a reply in the requested location's sessions.

        `GET /api/permission/request` (v2.permission.request.list). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PermissionRequestList", await self._client._call(
            "v2.permission.request.list",
            query={"location": location},
            options=options,
        ))

    async def saved_list(
        self,
        *,
        project_id: str | None = None,
        options: CallOptions | None = None,
    ) -> list[PermissionSavedInfo]:
        """List saved permissions.

        Retrieve the permissions remembered by an `always` reply, optionally for one project.

        `GET /api/permission/saved` (v2.permission.saved.list). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("list[PermissionSavedInfo]", await self._client._call(
            "v2.permission.saved.list",
            query={"projectID": project_id},
            options=options,
        ))

    async def saved_remove(self, id: str, *, options: CallOptions | None = None) -> None:
        """Remove saved permission.

        Forget one saved permission: calls it covered ask again. Removing an unknown one is a no-op.

        `DELETE /api/permission/saved/{id}` (v2.permission.saved.remove). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call("v2.permission.saved.remove", path={"id": id}, options=options)


class ProviderGroup:
    """Operations of the `provider` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def get(
        self,
        provider_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> ProviderAnswer:
        """Get provider.

        Retrieve a single AI provider so clients can inspect its availability and endpoint settings.

        `GET /api/provider/{providerID}` (v2.provider.get). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), ProviderNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429),
        ServiceUnavailableError (503).
        """
        return cast("ProviderAnswer", await self._client._call(
            "v2.provider.get",
            path={"providerID": provider_id},
            query={"location": location},
            options=options,
        ))

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> ProviderList:
        """List providers.

        Retrieve active AI providers so clients can show provider availability and configuration.

        `GET /api/provider` (v2.provider.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429), ServiceUnavailableError (503).
        """
        return cast("ProviderList", await self._client._call(
            "v2.provider.list",
            query={"location": location},
            options=options,
        ))


class PtyGroup:
    """Operations of the `pty` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    def connect(
        self,
        pty_id: str,
        *,
        location_directory: str | None = None,
        location_workspace: str | None = None,
        cursor: int | None = None,
        ticket: str | None = None,
        options: CallOptions | None = None,
    ) -> WebSocketSession:
        """Connect to terminal.

        A WebSocket to the terminal. The server sends the retained output after `cursor` (all of it
        when absent, none for -1) as text frames, then one binary frame of a 0x00 byte and the JSON
        `{"cursor": N}` (the absolute output position reached, to reconnect from), then live output as
        text frames, and closes when the process exits. The client sends input as text (or UTF-8
        binary) frames; a binary frame of a 0x00 byte and the JSON `{"size": {"rows": R, "cols": C}}`
        resizes the window. Without the password header, `ticket` (from connect-token) authorizes the
        connection.

        `GET /api/pty/{ptyID}/connect` (v2.pty.connect). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), PtyNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return self._client._websocket(
            "v2.pty.connect",
            path={"ptyID": pty_id},
            query={
                "location[directory]": location_directory,
                "location[workspace]": location_workspace,
                "cursor": cursor,
                "ticket": ticket,
            },
            options=options,
        )

    async def connect_token(
        self,
        pty_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> PtyTokenAnswer:
        """Create terminal connection ticket.

        A ticket that opens this terminal's WebSocket once, within a minute, for the same location:
        for a browser, which cannot send the password header on a WebSocket.

        `POST /api/pty/{ptyID}/connect-token` (v2.pty.connectToken). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), PtyNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PtyTokenAnswer", await self._client._call(
            "v2.pty.connectToken",
            path={"ptyID": pty_id},
            query={"location": location},
            options=options,
        ))

    async def create(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        command: str | None = None,
        args: builtins.list[str] | None = None,
        cwd: str | None = None,
        title: str | None = None,
        env: dict[str, str] | None = None,
        options: CallOptions | None = None,
    ) -> PtyAnswer:
        """Create terminal.

        Start the user's shell (or `command` with `args`) on a new pseudo-terminal in the location, or
        in `cwd` taken relative to it. The environment is the server's, then `env`, then the host's
        additions, then TERM and OPENCODE_TERMINAL.

        `POST /api/pty` (v2.pty.create). Declared errors: InvalidRequestError (400), UnauthorizedError
        (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("PtyAnswer", await self._client._call(
            "v2.pty.create",
            query={"location": location},
            body={"command": command, "args": args, "cwd": cwd, "title": title, "env": env},
            options=options,
        ))

    async def get(
        self,
        pty_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> PtyAnswer:
        """Get terminal.

        One pseudo-terminal of the location, with its exit code once its process has ended.

        `GET /api/pty/{ptyID}` (v2.pty.get). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), PtyNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PtyAnswer", await self._client._call(
            "v2.pty.get",
            path={"ptyID": pty_id},
            query={"location": location},
            options=options,
        ))

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> PtyList:
        """List terminals.

        The pseudo-terminals of the requested location; exited ones stay listed until they are
        removed.

        `GET /api/pty` (v2.pty.list). Declared errors: InvalidRequestError (400), UnauthorizedError
        (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("PtyList", await self._client._call(
            "v2.pty.list",
            query={"location": location},
            options=options,
        ))

    async def remove(
        self,
        pty_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Remove terminal.

        Kill the pseudo-terminal's process group and forget it.

        `DELETE /api/pty/{ptyID}` (v2.pty.remove). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), PtyNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.pty.remove",
            path={"ptyID": pty_id},
            query={"location": location},
            options=options,
        )

    async def update(
        self,
        pty_id: str,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        title: str | None = None,
        size: PtySize | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> PtyAnswer:
        """Update terminal.

        Rename a pseudo-terminal or resize its window (a running process is told of the new size).

        `PUT /api/pty/{ptyID}` (v2.pty.update). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), PtyNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PtyAnswer", await self._client._call(
            "v2.pty.update",
            path={"ptyID": pty_id},
            query={"location": location},
            body={"title": title, "size": size},
            options=options,
        ))


class QuestionGroup:
    """Operations of the `question` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def request_list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> QuestionRequestList:
        """List pending questions.

        Retrieve the questions waiting for an answer in the requested location's sessions.

        `GET /api/question/request` (v2.question.request.list). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("QuestionRequestList", await self._client._call(
            "v2.question.request.list",
            query={"location": location},
            options=options,
        ))


class ReferenceGroup:
    """Operations of the `reference` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> ReferenceList:
        """List references.

        The project references configured for the location (opencode.json's `references`): directories
        a session may consult, local or cloned from git.

        `GET /api/reference` (v2.reference.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("ReferenceList", await self._client._call(
            "v2.reference.list",
            query={"location": location},
            options=options,
        ))


class SessionGroup:
    """Operations of the `session` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def active(self, *, options: CallOptions | None = None) -> dict[str, SessionActive]:
        """List active sessions.

        Retrieve foreground Session drains currently owned by this OpenCode process. Sessions absent
        from the result are inactive.

        `GET /api/session/active` (v2.session.active). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("dict[str, SessionActive]", await self._client._call(
            "v2.session.active",
            options=options,
        ))

    async def compact(self, session_id: str, *, options: CallOptions | None = None) -> None:
        """Compact session.

        Admit a manual compaction barrier (coalesced with one already pending): input promotion waits
        until the conversation is summarised or compaction fails.

        `POST /api/session/{sessionID}/compact` (v2.session.compact). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429),
        ServiceUnavailableError (503).
        """
        await self._client._call("v2.session.compact", path={"sessionID": session_id}, options=options)

    async def context(
        self,
        session_id: str,
        *,
        options: CallOptions | None = None,
    ) -> builtins.list[SessionMessage]:
        """Get session context.

        Retrieve the active context messages for a session (all messages after the last compaction).

        `GET /api/session/{sessionID}/context` (v2.session.context). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429),
        UnknownError (500).
        """
        return cast("builtins.list[SessionMessage]", await self._client._call(
            "v2.session.context",
            path={"sessionID": session_id},
            options=options,
        ))

    async def context_entry_list(
        self,
        session_id: str,
        *,
        options: CallOptions | None = None,
    ) -> builtins.list[InstructionEntry]:
        """List instruction entries.

        Retrieve the API-managed instruction entries of a session.

        `GET /api/session/{sessionID}/context-entry` (v2.session.context.entry.list). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("builtins.list[InstructionEntry]", await self._client._call(
            "v2.session.context.entry.list",
            path={"sessionID": session_id},
            options=options,
        ))

    async def context_entry_put(
        self,
        session_id: str,
        key: str,
        *,
        value: Any,
        options: CallOptions | None = None,
    ) -> None:
        """Set instruction entry.

        Create or replace one instruction entry. The change reaches the model at the session's next
        safe step boundary.

        `PUT /api/session/{sessionID}/context-entry/{key}` (v2.session.context.entry.put). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.context.entry.put",
            path={"sessionID": session_id, "key": key},
            body={"value": value},
            options=options,
        )

    async def context_entry_remove(
        self,
        session_id: str,
        key: str,
        *,
        options: CallOptions | None = None,
    ) -> None:
        """Remove instruction entry.

        Remove one instruction entry. The change reaches the model at the session's next safe step
        boundary.

        `DELETE /api/session/{sessionID}/context-entry/{key}` (v2.session.context.entry.remove).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.context.entry.remove",
            path={"sessionID": session_id, "key": key},
            options=options,
        )

    async def create(
        self,
        *,
        id: str | None = None,
        agent: str | None = None,
        model: ModelRef | dict[str, Any] | None = None,
        location: LocationRef | dict[str, Any] | None = None,
        parent_id: str | None = None,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        permissions: builtins.list[PermissionV2Rule | dict[str, Any]] | None = None,
        options: CallOptions | None = None,
    ) -> SessionV2Info:
        """Create session.

        Create a session at the requested location; with parentID, a child of that session (at its
        location unless one is given).

        `POST /api/session` (v2.session.create). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("SessionV2Info", await self._client._call(
            "v2.session.create",
            body={
                "id": id,
                "agent": agent,
                "model": model,
                "location": location,
                "parentID": parent_id,
                "title": title,
                "metadata": metadata,
                "permissions": permissions,
            },
            options=options,
        ))

    async def diff(
        self,
        session_id: str,
        *,
        from_: str | None = None,
        to: str | None = None,
        context: int | None = None,
        options: CallOptions | None = None,
    ) -> builtins.list[FileDiff]:
        """Session diff.

        Retrieve what a turn, or a range of turns, changed on disk: each file that differs from the
        snapshot the range's first Step started on to the one its last Step ended on (a Step still
        running: the working copy now), with its additions, deletions and unified diff. Turns whose
        Steps ran no file-changing tool (or ran where snapshots are off) changed nothing.

        `GET /api/session/{sessionID}/diff` (v2.session.diff). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), MessageNotFoundError (404),
        SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("builtins.list[FileDiff]", await self._client._call(
            "v2.session.diff",
            path={"sessionID": session_id},
            query={"from": from_, "to": to, "context": context},
            options=options,
        ))

    async def environment(
        self,
        session_id: str,
        *,
        variables: dict[str, str],
        options: CallOptions | None = None,
    ) -> None:
        """Set session shell environment.

        Replace the variables the session's shell commands get over the server's environment (which
        they inherit without the server's secrets). Kept by this server process.

        `PUT /api/session/{sessionID}/environment` (v2.session.environment). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.environment",
            path={"sessionID": session_id},
            body={"variables": variables},
            options=options,
        )

    def events(
        self,
        session_id: str,
        *,
        after: int | None = None,
        options: CallOptions | None = None,
    ) -> EventStream[SessionDurableEvent]:
        """Subscribe to session events.

        Replay durable events after an aggregate sequence, then continue with new durable events.

        `GET /api/session/{sessionID}/event` (v2.session.events). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return self._client._stream(
            "v2.session.events",
            path={"sessionID": session_id},
            query={"after": after},
            options=options,
        )

    async def fork(
        self,
        session_id: str,
        *,
        message_id: str | None = None,
        options: CallOptions | None = None,
    ) -> SessionV2Info:
        """Fork session.

        Extension (not in OpenCode 1.18.33's V2 API): create a session whose parent is this one, in
        the same location, holding its settled history up to and including `messageID` (all of it when
        omitted). Its own log starts with session.forked. Allowed while the session executes.

        `POST /api/session/{sessionID}/fork` (v2.session.fork). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), MessageNotFoundError (404),
        SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("SessionV2Info", await self._client._call(
            "v2.session.fork",
            path={"sessionID": session_id},
            body={"messageID": message_id},
            options=options,
        ))

    async def generate(
        self,
        session_id: str,
        *,
        prompt: str,
        options: CallOptions | None = None,
    ) -> SessionGenerated:
        """Generate from session context.

        Answer a prompt with the session's model after its active history, without recording anything:
        its history, usage and log stay as they were.

        `POST /api/session/{sessionID}/generate` (v2.session.generate). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429),
        ServiceUnavailableError (503).
        """
        return cast("SessionGenerated", await self._client._call(
            "v2.session.generate",
            path={"sessionID": session_id},
            body={"prompt": prompt},
            options=options,
        ))

    async def get(self, session_id: str, *, options: CallOptions | None = None) -> SessionV2Info:
        """Get session.

        Retrieve a session by ID.

        `GET /api/session/{sessionID}` (v2.session.get). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("SessionV2Info", await self._client._call(
            "v2.session.get",
            path={"sessionID": session_id},
            options=options,
        ))

    async def inbox_cancel(
        self,
        session_id: str,
        inbox_id: str,
        *,
        options: CallOptions | None = None,
    ) -> None:
        """Cancel inbox item.

        Withdraw pending input before it is delivered: it never executes. An item no longer pending
        (delivered or cancelled already) is left as it is.

        `DELETE /api/session/{sessionID}/inbox/{inboxID}` (v2.session.inbox.cancel). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.inbox.cancel",
            path={"sessionID": session_id, "inboxID": inbox_id},
            options=options,
        )

    async def inbox_list(
        self,
        session_id: str,
        *,
        options: CallOptions | None = None,
    ) -> builtins.list[InboxItem]:
        """List session inbox.

        Retrieve the input admitted to a session but not yet delivered to it, in enqueue order.

        `GET /api/session/{sessionID}/inbox` (v2.session.inbox.list). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("builtins.list[InboxItem]", await self._client._call(
            "v2.session.inbox.list",
            path={"sessionID": session_id},
            options=options,
        ))

    async def inbox_update(
        self,
        session_id: str,
        inbox_id: str,
        *,
        delivery: Literal["steer", "queue"],
        options: CallOptions | None = None,
    ) -> None:
        """Change inbox item delivery.

        Change when pending input is delivered: `steer` at the next safe step boundary (execution is
        woken), `queue` once the session is idle.

        `PATCH /api/session/{sessionID}/inbox/{inboxID}` (v2.session.inbox.update). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), ConflictError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.inbox.update",
            path={"sessionID": session_id, "inboxID": inbox_id},
            body={"delivery": delivery},
            options=options,
        )

    async def interrupt(
        self,
        session_id: str,
        *,
        resume: bool | None = None,
        options: CallOptions | None = None,
    ) -> SessionInterrupted:
        """Interrupt session execution.

        Interrupt active execution owned by this OpenCode process (idle interruption is a no-op). With
        resume=true execution starts again when steering input or a compaction barrier is pending;
        with only queued prompts pending they stay parked until the session is next woken.

        `POST /api/session/{sessionID}/interrupt` (v2.session.interrupt). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("SessionInterrupted", await self._client._call(
            "v2.session.interrupt",
            path={"sessionID": session_id},
            query={"resume": resume},
            options=options,
        ))

    async def list(
        self,
        *,
        workspace: str | None = None,
        limit: int | None = None,
        order: Literal["asc", "desc"] | None = None,
        search: str | None = None,
        directory: str | None = None,
        project: str | None = None,
        subpath: str | None = None,
        parent_id: str | None = None,
        cursor: str | None = None,
        options: CallOptions | None = None,
    ) -> Page[SessionV2Info]:
        """List sessions.

        Retrieve sessions in the requested order. Items keep that order across pages; use cursor.next
        or cursor.previous to move through the ordered list.

        `GET /api/session` (v2.session.list). Declared errors: InvalidCursorError (400),
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), InvalidRequestError
        (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("Page[SessionV2Info]", await self._client._call(
            "v2.session.list",
            query={
                "workspace": workspace,
                "limit": limit,
                "order": order,
                "search": search,
                "directory": directory,
                "project": project,
                "subpath": subpath,
                "parentID": parent_id,
                "cursor": cursor,
            },
            options=options,
        ))

    def log(
        self,
        session_id: str,
        *,
        after: int | None = None,
        follow: bool | None = None,
        options: CallOptions | None = None,
    ) -> EventStream[SessionLogItem]:
        """Read session log.

        Replay public durable events after an aggregate sequence, then mark the synchronized watermark
        with one log.synced item. With follow=true the stream continues with newly committed durable
        events; otherwise it ends after the marker.

        `GET /api/session/{sessionID}/log` (v2.session.log). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return self._client._stream(
            "v2.session.log",
            path={"sessionID": session_id},
            query={"after": after, "follow": follow},
            options=options,
        )

    async def message(
        self,
        session_id: str,
        message_id: str,
        *,
        options: CallOptions | None = None,
    ) -> SessionMessage:
        """Get session message.

        Retrieve one projected message owned by the Session.

        `GET /api/session/{sessionID}/message/{messageID}` (v2.session.message). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), MessageNotFoundError
        (404), SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("SessionMessage", await self._client._call(
            "v2.session.message",
            path={"sessionID": session_id, "messageID": message_id},
            options=options,
        ))

    async def message_context(
        self,
        session_id: str,
        message_id: str,
        *,
        options: CallOptions | None = None,
    ) -> StepModelContext:
        """Step Model Context.

        Extension (not in OpenCode 1.18.33's V2 API): the Model Context the Step of this assistant
        message sent, as recorded when it was sent: the agent's system text, the Instruction Baseline,
        the Instruction Updates in the history sent, the Session History selected (after compaction
        and checkpoint cutoffs), the tool definitions offered, step-local additions and the request
        options, as sections keyed by source; per section what was added, removed or changed since the
        session's previous Step; and the request body exactly as the provider received it.

        `GET /api/session/{sessionID}/message/{messageID}/context` (v2.session.message.context).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        MessageNotFoundError (404), SessionNotFoundError (404), StepContextNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("StepModelContext", await self._client._call(
            "v2.session.message.context",
            path={"sessionID": session_id, "messageID": message_id},
            options=options,
        ))

    async def messages(
        self,
        session_id: str,
        *,
        limit: int | None = None,
        order: Literal["asc", "desc"] | None = None,
        cursor: str | None = None,
        options: CallOptions | None = None,
    ) -> Page[SessionMessage]:
        """Get session messages.

        Retrieve projected messages for a session. Items keep the requested order across pages; use
        cursor.next or cursor.previous to move through the ordered timeline.

        `GET /api/session/{sessionID}/message` (v2.session.messages). Declared errors:
        InvalidCursorError (400), InvalidRequestError (400), UnauthorizedError (401), ForbiddenError
        (403), SessionNotFoundError (404), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429), UnknownError (500).
        """
        return cast("Page[SessionMessage]", await self._client._call(
            "v2.session.messages",
            path={"sessionID": session_id},
            query={"limit": limit, "order": order, "cursor": cursor},
            options=options,
        ))

    async def move(
        self,
        session_id: str,
        *,
        location: LocationRef | dict[str, Any],
        options: CallOptions | None = None,
    ) -> SessionV2Info:
        """Move session.

        Extension (not in OpenCode 1.18.33's V2 API): move an idle session to another directory. Its
        next step runs there on a fresh instruction baseline. Refused while the session executes, and
        while a revert is staged (commit or clear it first).

        `POST /api/session/{sessionID}/move` (v2.session.move). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        ConflictError (409), SessionBusyError (409), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("SessionV2Info", await self._client._call(
            "v2.session.move",
            path={"sessionID": session_id},
            body={"location": location},
            options=options,
        ))

    async def owner(self, session_id: str, *, options: CallOptions | None = None) -> SessionOwner:
        """Get session owner.

        Extension (not in OpenCode 1.18.33's V2 API): which host executes the session now. Hosts that
        share one PostgreSQL database execute each session on one host at a time, under a lease; null
        fields: no host executes it.

        `GET /api/session/{sessionID}/owner` (v2.session.owner). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("SessionOwner", await self._client._call(
            "v2.session.owner",
            path={"sessionID": session_id},
            options=options,
        ))

    async def permission_create(
        self,
        session_id: str,
        *,
        action: str,
        resources: builtins.list[str],
        id: str | None = None,
        save: builtins.list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        source: PermissionV2Source | dict[str, Any] | None = None,
        agent: str | None = None,
        options: CallOptions | None = None,
    ) -> PermissionCreated:
        """Create session permission request.

        Ask for a permission on a session's behalf without waiting: the rules of the session's agent
        (or `agent`) answer `allow` or `deny` at once; otherwise the answer is `ask` and a pending
        request with the returned ID waits for a reply like any other.

        `POST /api/session/{sessionID}/permission` (v2.session.permission.create). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PermissionCreated", await self._client._call(
            "v2.session.permission.create",
            path={"sessionID": session_id},
            body={
                "id": id,
                "action": action,
                "resources": resources,
                "save": save,
                "metadata": metadata,
                "source": source,
                "agent": agent,
            },
            options=options,
        ))

    async def permission_get(
        self,
        session_id: str,
        request_id: str,
        *,
        options: CallOptions | None = None,
    ) -> PermissionV2Request:
        """Get session permission request.

        Retrieve one pending permission request of a session.

        `GET /api/session/{sessionID}/permission/{requestID}` (v2.session.permission.get). Declared
        errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        PermissionNotFoundError (404), SessionNotFoundError (404), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("PermissionV2Request", await self._client._call(
            "v2.session.permission.get",
            path={"sessionID": session_id, "requestID": request_id},
            options=options,
        ))

    async def permission_list(
        self,
        session_id: str,
        *,
        options: CallOptions | None = None,
    ) -> builtins.list[PermissionV2Request]:
        """List session permission requests.

        Retrieve the permission requests of a session that wait for a reply.

        `GET /api/session/{sessionID}/permission` (v2.session.permission.list). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("builtins.list[PermissionV2Request]", await self._client._call(
            "v2.session.permission.list",
            path={"sessionID": session_id},
            options=options,
        ))

    async def permission_reply(
        self,
        session_id: str,
        request_id: str,
        *,
        reply: Literal["once", "always", "reject"],
        message: str | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Reply to permission request.

        Answer a pending permission request: `once` allows this call, `always` also remembers the
        request's patterns for the project, `reject` refuses it (with a `message`, the model reads it
        and continues; without one the session stops).

        `POST /api/session/{sessionID}/permission/{requestID}/reply` (v2.session.permission.reply).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        PermissionNotFoundError (404), SessionNotFoundError (404), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.permission.reply",
            path={"sessionID": session_id, "requestID": request_id},
            body={"reply": reply, "message": message},
            options=options,
        )

    async def prompt(
        self,
        session_id: str,
        *,
        prompt: PromptInput | dict[str, Any],
        id: str | None = None,
        delivery: Literal["steer", "queue"] | None = None,
        resume: bool | None = None,
        options: CallOptions | None = None,
    ) -> SessionInputAdmitted:
        """Send message.

        Durably admit one session input and schedule agent-loop execution unless resume is false.

        `POST /api/session/{sessionID}/prompt` (v2.session.prompt). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), ConflictError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("SessionInputAdmitted", await self._client._call(
            "v2.session.prompt",
            path={"sessionID": session_id},
            body={"id": id, "prompt": prompt, "delivery": delivery, "resume": resume},
            options=options,
        ))

    async def question_list(
        self,
        session_id: str,
        *,
        options: CallOptions | None = None,
    ) -> builtins.list[QuestionV2Request]:
        """List session questions.

        Retrieve the questions of a session that wait for an answer.

        `GET /api/session/{sessionID}/question` (v2.session.question.list). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        return cast("builtins.list[QuestionV2Request]", await self._client._call(
            "v2.session.question.list",
            path={"sessionID": session_id},
            options=options,
        ))

    async def question_reject(
        self,
        session_id: str,
        request_id: str,
        *,
        options: CallOptions | None = None,
    ) -> None:
        """Reject question.

        Dismiss a pending question without answering: the tool call fails and the session stops.

        `POST /api/session/{sessionID}/question/{requestID}/reject` (v2.session.question.reject).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        QuestionNotFoundError (404), SessionNotFoundError (404), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.question.reject",
            path={"sessionID": session_id, "requestID": request_id},
            options=options,
        )

    async def question_reply(
        self,
        session_id: str,
        request_id: str,
        *,
        answers: builtins.list[builtins.list[str]],
        options: CallOptions | None = None,
    ) -> None:
        """Answer question.

        Answer a pending question: one list of chosen labels per question, in order.

        `POST /api/session/{sessionID}/question/{requestID}/reply` (v2.session.question.reply).
        Declared errors: InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403),
        QuestionNotFoundError (404), SessionNotFoundError (404), InvalidRequestError (413),
        InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.question.reply",
            path={"sessionID": session_id, "requestID": request_id},
            body={"answers": answers},
            options=options,
        )

    async def remove(self, session_id: str, *, options: CallOptions | None = None) -> None:
        """Remove session.

        Remove a session and its child sessions, recursively. An executing one is interrupted first;
        its messages, pending input, instruction entries and tool output files leave the store, and
        one session.deleted event per session tells event subscribers. Afterwards the session is not
        found.

        `DELETE /api/session/{sessionID}` (v2.session.remove). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call("v2.session.remove", path={"sessionID": session_id}, options=options)

    async def resume(self, session_id: str, *, options: CallOptions | None = None) -> None:
        """Resume session.

        Start execution without new input (or join the running one) and answer once it settled:
        pending input is delivered, and history that awaits an assistant reply is answered.

        `POST /api/session/{sessionID}/resume` (v2.session.resume). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429),
        ServiceUnavailableError (503).
        """
        await self._client._call("v2.session.resume", path={"sessionID": session_id}, options=options)

    async def revert_clear(self, session_id: str, *, options: CallOptions | None = None) -> None:
        """Clear staged revert.

        Drop the staged revert and put its files back as the agent left them. Refused while the
        session executes; without a staged revert it does nothing.

        `POST /api/session/{sessionID}/revert/clear` (v2.session.revert.clear). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), SessionBusyError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429), UnknownError (500).
        """
        await self._client._call("v2.session.revert.clear", path={"sessionID": session_id}, options=options)

    async def revert_commit(self, session_id: str, *, options: CallOptions | None = None) -> None:
        """Commit staged revert.

        Remove the staged boundary message and everything after it from the session's history (the
        durable log keeps them), keeping the files as staged. Refused while the session executes;
        without a staged revert it does nothing.

        `POST /api/session/{sessionID}/revert/commit` (v2.session.revert.commit). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), SessionBusyError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        await self._client._call("v2.session.revert.commit", path={"sessionID": session_id}, options=options)

    async def revert_stage(
        self,
        session_id: str,
        *,
        message_id: str,
        files: bool | None = None,
        options: CallOptions | None = None,
    ) -> RevertState:
        """Stage session revert.

        Stage or move a reversible session boundary and optionally apply its file changes: the files
        the agent changed at or after the message are restored to their content before it (unless
        `files` is false). Refused while the session executes, and (409, nothing touched) when a
        snapshot it needs cannot be read.

        `POST /api/session/{sessionID}/revert/stage` (v2.session.revert.stage). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), MessageNotFoundError
        (404), SessionNotFoundError (404), ConflictError (409), SessionBusyError (409),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429), UnknownError
        (500).
        """
        return cast("RevertState", await self._client._call(
            "v2.session.revert.stage",
            path={"sessionID": session_id},
            body={"messageID": message_id, "files": files},
            options=options,
        ))

    async def shell(
        self,
        session_id: str,
        *,
        command: str,
        id: str | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Run shell command.

        Run one shell command in the session's location while it is idle, under its bash permission
        rules (a deny refuses it). The session records it as a shell message between
        session.shell.started and session.shell.ended (with its merged output); the answer comes once
        it ended.

        `POST /api/session/{sessionID}/shell` (v2.session.shell). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        ConflictError (409), SessionBusyError (409), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.shell",
            path={"sessionID": session_id},
            body={"id": id, "command": command},
            options=options,
        )

    async def switch_agent(self, session_id: str, *, agent: str, options: CallOptions | None = None) -> None:
        """Switch session agent.

        Switch the agent used by subsequent provider turns.

        `POST /api/session/{sessionID}/agent` (v2.session.switchAgent). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.switchAgent",
            path={"sessionID": session_id},
            body={"agent": agent},
            options=options,
        )

    async def switch_model(
        self,
        session_id: str,
        *,
        model: ModelRef | dict[str, Any],
        options: CallOptions | None = None,
    ) -> None:
        """Switch session model.

        Switch the model used by subsequent provider turns.

        `POST /api/session/{sessionID}/model` (v2.session.switchModel). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.switchModel",
            path={"sessionID": session_id},
            body={"model": model},
            options=options,
        )

    async def synthetic(
        self,
        session_id: str,
        *,
        text: str,
        id: str | None = None,
        description: str | None = None,
        metadata: dict[str, Any] | None = None,
        delivery: Literal["steer", "queue"] | None = None,
        resume: bool | None = None,
        options: CallOptions | None = None,
    ) -> InboxSyntheticItem:
        """Send synthetic input.

        Durably admit input the model reads as the user's side, marked synthetic: it is delivered and
        executes as a prompt does (steer by default) unless resume is false. An exact retry of an ID
        answers the same item; another use of it is a conflict.

        `POST /api/session/{sessionID}/synthetic` (v2.session.synthetic). Declared errors:
        InvalidRequestError (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError
        (404), ConflictError (409), InvalidRequestError (413), InvalidRequestError (415),
        TooManyAttemptsError (429).
        """
        return cast("InboxSyntheticItem", await self._client._call(
            "v2.session.synthetic",
            path={"sessionID": session_id},
            body={
                "id": id,
                "text": text,
                "description": description,
                "metadata": metadata,
                "delivery": delivery,
                "resume": resume,
            },
            options=options,
        ))

    async def update(
        self,
        session_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        permissions: builtins.list[PermissionV2Rule | dict[str, Any]] | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Update session.

        Replace the session's title, metadata or permission rules (each field given). A title set here
        is never replaced by the automatic one.

        `PATCH /api/session/{sessionID}` (v2.session.update). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.update",
            path={"sessionID": session_id},
            body={"title": title, "metadata": metadata, "permissions": permissions},
            options=options,
        )

    async def view(self, session_id: str, *, idle: int, options: CallOptions | None = None) -> None:
        """Mark session viewed.

        Mark the idle transition the viewer saw (`idle`, epoch ms) as viewed: a durable session.viewed
        event tells the other viewers, so they need not notify their user of it again.

        `POST /api/session/{sessionID}/view` (v2.session.view). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), TooManyAttemptsError (429).
        """
        await self._client._call(
            "v2.session.view",
            path={"sessionID": session_id},
            body={"idle": idle},
            options=options,
        )

    async def wait(
        self,
        session_id: str,
        *,
        outcome: bool | None = None,
        options: CallOptions | None = None,
    ) -> None:
        """Wait for session.

        Wait for a session agent loop to become idle.

        `POST /api/session/{sessionID}/wait` (v2.session.wait). Declared errors: InvalidRequestError
        (400), UnauthorizedError (401), ForbiddenError (403), SessionNotFoundError (404),
        InvalidRequestError (413), InvalidRequestError (415), SessionExecutionFailedError (422),
        TooManyAttemptsError (429), ServiceUnavailableError (503).
        """
        await self._client._call(
            "v2.session.wait",
            path={"sessionID": session_id},
            query={"outcome": outcome},
            options=options,
        )


class SkillGroup:
    """Operations of the `skill` group."""

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    async def list(
        self,
        *,
        location: LocationSelector | dict[str, Any] | None = None,
        options: CallOptions | None = None,
    ) -> SkillList:
        """List skills.

        The skills the `skill` tool offers at the location, with their instructions.

        `GET /api/skill` (v2.skill.list). Declared errors: InvalidRequestError (400),
        UnauthorizedError (401), ForbiddenError (403), InvalidRequestError (413), InvalidRequestError
        (415), TooManyAttemptsError (429).
        """
        return cast("SkillList", await self._client._call(
            "v2.skill.list",
            query={"location": location},
            options=options,
        ))


class OpenCodeClient(BaseClient):
    """The OpenCode V2 network client: one attribute per operation group (`client.session.get(id)`)."""

    @cached_property
    def agent(self) -> AgentGroup:
        return AgentGroup(self)

    @cached_property
    def command(self) -> CommandGroup:
        return CommandGroup(self)

    @cached_property
    def credential(self) -> CredentialGroup:
        return CredentialGroup(self)

    @cached_property
    def event(self) -> EventGroup:
        return EventGroup(self)

    @cached_property
    def experimental(self) -> ExperimentalGroup:
        return ExperimentalGroup(self)

    @cached_property
    def fs(self) -> FsGroup:
        return FsGroup(self)

    @cached_property
    def health(self) -> HealthGroup:
        return HealthGroup(self)

    @cached_property
    def integration(self) -> IntegrationGroup:
        return IntegrationGroup(self)

    @cached_property
    def location(self) -> LocationGroup:
        return LocationGroup(self)

    @cached_property
    def mcp(self) -> McpGroup:
        return McpGroup(self)

    @cached_property
    def model(self) -> ModelGroup:
        return ModelGroup(self)

    @cached_property
    def permission(self) -> PermissionGroup:
        return PermissionGroup(self)

    @cached_property
    def provider(self) -> ProviderGroup:
        return ProviderGroup(self)

    @cached_property
    def pty(self) -> PtyGroup:
        return PtyGroup(self)

    @cached_property
    def question(self) -> QuestionGroup:
        return QuestionGroup(self)

    @cached_property
    def reference(self) -> ReferenceGroup:
        return ReferenceGroup(self)

    @cached_property
    def session(self) -> SessionGroup:
        return SessionGroup(self)

    @cached_property
    def skill(self) -> SkillGroup:
        return SkillGroup(self)
