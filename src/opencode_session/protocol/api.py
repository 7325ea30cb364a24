"""The V2 API as data: request payload models, stream item unions and the ENDPOINTS table."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import BeforeValidator, Field, WithJsonSchema

from opencode_session.schema.agent import AgentV2Info
from opencode_session.schema.base import Struct
from opencode_session.schema.catalog import ModelList, ProviderAnswer, ProviderList
from opencode_session.schema.common import LocationRef, ModelRef
from opencode_session.schema.errors import (
    ConflictError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    PermissionNotFoundError,
    ProviderNotFoundError,
    QuestionNotFoundError,
    ServiceUnavailableError,
    SessionBusyError,
    SessionNotFoundError,
    UnknownError,
)
from opencode_session.schema.events import (
    Delivery,
    Event,
    GlobalDisposed,
    LogSynced,
    ServerConnected,
    envelope_model,
    public_durable_types,
)
from opencode_session.schema.ids import MessageID, PermissionID, QuestionID, SessionID, WorkspaceID
from opencode_session.schema.input import SessionInputAdmitted
from opencode_session.schema.instruction_entry import EntryKey, InstructionEntry, InstructionEntryPut
from opencode_session.schema.location import LocationInfo
from opencode_session.schema.message import SessionMessage
from opencode_session.schema.permission import (
    PermissionSavedInfo,
    PermissionV2Effect,
    PermissionV2Reply,
    PermissionV2Request,
    PermissionV2Source,
)
from opencode_session.schema.prompt import PromptInput
from opencode_session.schema.question import QuestionV2Reply, QuestionV2Request
from opencode_session.schema.session import RevertState, SessionActive, SessionV2Info

from .endpoint import Endpoint, Refusal, StreamSpec

# --- query scalars: typed for callers, strings on the wire ---------------------------------------


def _seq_from_query(value: Any) -> Any:
    # Strings are what arrive from a URL; ints are what Python callers hold. Nothing else is a sequence.
    if isinstance(value, str) and re.fullmatch(r"[0-9]+", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected a non-negative integer")


def _bool_from_query(value: Any) -> Any:
    # Only the two spellings the contract names; pydantic's lax bool would also take "yes", "1", "on".
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):
        return value == "true"
    raise ValueError('expected "true" or "false"')


MAX_SEQ = 2**63 - 1  # SQLite integers are signed 64-bit; a larger sequence can only be a forged one

Seq = Annotated[
    int,
    BeforeValidator(_seq_from_query),
    Field(ge=0, le=MAX_SEQ),
    # a decimal integer in the URL; the bounds are the server's (SQLite's signed 64-bit integers)
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_SEQ}),
]
QueryBool = Annotated[
    bool,
    BeforeValidator(_bool_from_query),
    WithJsonSchema({"type": "string", "enum": ["true", "false"]}),
]
Order = Literal["asc", "desc"]


# --- responses that are not domain records --------------------------------------------------------


class HealthStatus(Struct):
    healthy: Literal[True]


class PermissionRequestList(Struct):
    location: LocationInfo
    data: list[PermissionV2Request]


class QuestionRequestList(Struct):
    location: LocationInfo
    data: list[QuestionV2Request]


class AgentList(Struct):
    location: LocationInfo
    data: list[AgentV2Info]


# --- path parameters ------------------------------------------------------------------------------


class SessionPath(Struct):
    sessionID: SessionID


class SessionMessagePath(Struct):
    sessionID: SessionID
    messageID: MessageID


class PermissionRequestPath(Struct):
    sessionID: SessionID
    requestID: PermissionID


class QuestionRequestPath(Struct):
    sessionID: SessionID
    requestID: QuestionID


class SavedPermissionPath(Struct):
    id: str


class ContextEntryPath(Struct):
    sessionID: SessionID
    key: EntryKey


# --- query parameters -----------------------------------------------------------------------------


class LocationSelector(Struct):
    directory: str | None = None
    workspace: WorkspaceID | None = None


class LocationQuery(Struct):
    location: LocationSelector | None = None


class ProviderPath(Struct):
    providerID: str
class SavedPermissionQuery(Struct):
    projectID: str | None = None


class SessionListQuery(Struct):
    workspace: WorkspaceID | None = None
    limit: int = Field(50, ge=1)
    order: Order | None = None
    search: str | None = None
    directory: str | None = None
    project: str | None = None
    subpath: str | None = None
    cursor: str | None = Field(
        None,
        description="Opaque pagination cursor returned as cursor.previous or cursor.next in the previous response.",
    )


class SessionMessagesQuery(Struct):
    limit: int = Field(50, ge=1, le=200)
    order: Order | None = None
    cursor: str | None = Field(
        None,
        description=(
            "Opaque pagination cursor returned as cursor.previous or cursor.next in the previous response."
            " Do not combine with order."
        ),
    )


class SessionEventsQuery(Struct):
    after: Seq | None = None


class SessionLogQuery(Struct):
    after: Seq | None = None
    follow: QueryBool | None = None


# --- request bodies -------------------------------------------------------------------------------


class SessionCreateBody(Struct):
    id: SessionID | None = None
    agent: str | None = None
    model: ModelRef | None = None
    location: LocationRef | None = None


class SessionSwitchAgentBody(Struct):
    agent: str


class SessionSwitchModelBody(Struct):
    model: ModelRef


class SessionPromptBody(Struct):
    id: MessageID | None = None
    prompt: PromptInput
    delivery: Delivery | None = None
    resume: bool | None = None


class SessionRevertStageBody(Struct):
    messageID: MessageID
    files: bool | None = None


class SessionForkBody(Struct):
    messageID: MessageID | None = None


class SessionMoveBody(Struct):
    location: LocationRef


class SessionPermissionCreateBody(Struct):
    id: PermissionID | None = None
    action: str
    resources: list[str]
    save: list[str] | None = None
    metadata: dict[str, Any] | None = None
    source: PermissionV2Source | None = None
    agent: str | None = None


class PermissionCreated(Struct):
    id: PermissionID
    effect: PermissionV2Effect


class PermissionReplyBody(Struct):
    reply: PermissionV2Reply
    message: str | None = None


# --- stream items ---------------------------------------------------------------------------------

DURABLE_EVENT_MODELS = tuple(envelope_model(t) for t in public_durable_types())

# A union over a tuple built at import time: no static type checker can see its members.
_KNOWN_DURABLE = Annotated[Union[DURABLE_EVENT_MODELS], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007

# Event types a newer server may add still decode, as the open envelope, instead of failing the stream.
SessionDurableEvent = Annotated[_KNOWN_DURABLE | Event, Field(union_mode="left_to_right")]
"""One public durable Session event envelope, discriminated by `type` (unknown types: the open envelope)."""

SessionLogItem = Annotated[
    # again a union over a tuple built at import time
    Annotated[Union[(*DURABLE_EVENT_MODELS, LogSynced)], Field(discriminator="type")]  # type: ignore[valid-type]  # noqa: UP007
    | Event,
    Field(union_mode="left_to_right"),
]
"""A durable Session event envelope or the `log.synced` marker (unknown types: the open envelope)."""

# The instance stream carries event types this build may not know; the open envelope keeps them readable.
InstanceEvent = Annotated[ServerConnected | GlobalDisposed | Event, Field(union_mode="left_to_right")]
"""The first `server.connected` frame, then any instance-wide event envelope; `global.disposed` when the server
shuts down."""


# --- refusals no schema can state -----------------------------------------------------------------

_LOCATION = Refusal(InvalidRequestError, "location.directory",
                    "the location's directory does not exist, is not a directory, or is a path this machine cannot"
                    " look up")
_DIRECTORY_FILTER = Refusal(InvalidRequestError, "directory", "the directory is a path this machine cannot look up")
_MODEL = Refusal(InvalidRequestError, "model",
                 "the model is not declared under its provider in the configuration of the session's location")
_CURSOR = Refusal(InvalidCursorError, None,
                  "the cursor is not one this server issued for this list, or comes with the query parameters it"
                  " replaces")
_LOCATION_QUERY = (_LOCATION,)

# --- the table ------------------------------------------------------------------------------------

_SESSION_404 = (SessionNotFoundError,)

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint(
        operation_id="v2.health.get",
        method="GET",
        path="/api/health",
        summary="Check server health",
        description="Check whether the API server is ready to accept requests.",
        success=HealthStatus,
    ),
    Endpoint(
        operation_id="v2.location.get",
        method="GET",
        path="/api/location",
        summary="Get location",
        description="Resolve the requested location or the server default location.",
        query=LocationQuery,
        success=LocationInfo,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.session.list",
        method="GET",
        path="/api/session",
        summary="List sessions",
        description=(
            "Retrieve sessions in the requested order. Items keep that order across pages;"
            " use cursor.next or cursor.previous to move through the ordered list."
        ),
        query=SessionListQuery,
        success=SessionV2Info,
        page=True,
        errors=(InvalidCursorError, InvalidRequestError),
        refusals=(_CURSOR, _DIRECTORY_FILTER),
    ),
    Endpoint(
        operation_id="v2.session.create",
        method="POST",
        path="/api/session",
        summary="Create session",
        description="Create a session at the requested location.",
        body=SessionCreateBody,
        success=SessionV2Info,
        unwrap_data=True,
        refusals=(_LOCATION, _MODEL),
        provides=(("sessionID", "/data/id"),),
    ),
    Endpoint(
        operation_id="v2.session.active",
        method="GET",
        path="/api/session/active",
        summary="List active sessions",
        description=(
            "Retrieve foreground Session drains currently owned by this OpenCode process."
            " Sessions absent from the result are inactive."
        ),
        success=dict[SessionID, SessionActive],
        unwrap_data=True,
    ),
    Endpoint(
        operation_id="v2.session.get",
        method="GET",
        path="/api/session/{sessionID}",
        summary="Get session",
        description="Retrieve a session by ID.",
        path_params=SessionPath,
        success=SessionV2Info,
        unwrap_data=True,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.switchAgent",
        method="POST",
        path="/api/session/{sessionID}/agent",
        summary="Switch session agent",
        description="Switch the agent used by subsequent provider turns.",
        path_params=SessionPath,
        body=SessionSwitchAgentBody,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.switchModel",
        method="POST",
        path="/api/session/{sessionID}/model",
        summary="Switch session model",
        description="Switch the model used by subsequent provider turns.",
        path_params=SessionPath,
        body=SessionSwitchModelBody,
        success_status=204,
        errors=_SESSION_404,
        refusals=(_MODEL,),
    ),
    Endpoint(
        operation_id="v2.session.prompt",
        method="POST",
        path="/api/session/{sessionID}/prompt",
        summary="Send message",
        description="Durably admit one session input and schedule agent-loop execution unless resume is false.",
        path_params=SessionPath,
        body=SessionPromptBody,
        success=SessionInputAdmitted,
        unwrap_data=True,
        errors=(SessionNotFoundError, ConflictError),
        refusals=(Refusal(InvalidRequestError, "prompt.files.*.uri",
                          "an attachment is one the session may not read: outside its location without an allow"
                          " rule, denied, missing, not a regular file, or too large"),),
        provides=(("messageID", "/data/id"),),
    ),
    Endpoint(
        operation_id="v2.session.wait",
        method="POST",
        path="/api/session/{sessionID}/wait",
        summary="Wait for session",
        description="Wait for a session agent loop to become idle.",
        path_params=SessionPath,
        success_status=204,
        errors=(SessionNotFoundError, ServiceUnavailableError),
        waits=True,
    ),
    Endpoint(
        operation_id="v2.session.context",
        method="GET",
        path="/api/session/{sessionID}/context",
        summary="Get session context",
        description="Retrieve the active context messages for a session (all messages after the last compaction).",
        path_params=SessionPath,
        success=list[SessionMessage],
        unwrap_data=True,
        errors=(SessionNotFoundError, UnknownError),
    ),
    Endpoint(
        operation_id="v2.session.events",
        method="GET",
        path="/api/session/{sessionID}/event",
        summary="Subscribe to session events",
        description="Replay durable events after an aggregate sequence, then continue with new durable events.",
        path_params=SessionPath,
        query=SessionEventsQuery,
        stream=StreamSpec(item=SessionDurableEvent, name="SessionDurableEvent", endless=True, sequenced=True),
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.log",
        method="GET",
        path="/api/session/{sessionID}/log",
        summary="Read session log",
        description=(
            "Replay public durable events after an aggregate sequence, then mark the synchronized watermark"
            " with one log.synced item. With follow=true the stream continues with newly committed durable"
            " events; otherwise it ends after the marker."
        ),
        path_params=SessionPath,
        query=SessionLogQuery,
        stream=StreamSpec(item=SessionLogItem, name="SessionLogItem", endless="follow", sequenced=True),
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.compact",
        method="POST",
        path="/api/session/{sessionID}/compact",
        summary="Compact session",
        description=(
            "Admit a manual compaction barrier (coalesced with one already pending): input promotion waits until "
            "the conversation is summarised or compaction fails."
        ),
        path_params=SessionPath,
        success_status=204,
        errors=(SessionNotFoundError, ServiceUnavailableError),
    ),
    Endpoint(
        operation_id="v2.session.interrupt",
        method="POST",
        path="/api/session/{sessionID}/interrupt",
        summary="Interrupt session execution",
        description="Interrupt active execution owned by this OpenCode process. Idle interruption is a no-op.",
        path_params=SessionPath,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.message",
        method="GET",
        path="/api/session/{sessionID}/message/{messageID}",
        summary="Get session message",
        description="Retrieve one projected message owned by the Session.",
        path_params=SessionMessagePath,
        success=SessionMessage,
        unwrap_data=True,
        errors=(SessionNotFoundError, MessageNotFoundError),
    ),
    Endpoint(
        operation_id="v2.session.messages",
        method="GET",
        path="/api/session/{sessionID}/message",
        summary="Get session messages",
        description=(
            "Retrieve projected messages for a session. Items keep the requested order across pages;"
            " use cursor.next or cursor.previous to move through the ordered timeline."
        ),
        path_params=SessionPath,
        query=SessionMessagesQuery,
        success=SessionMessage,
        page=True,
        errors=(InvalidCursorError, InvalidRequestError, SessionNotFoundError, UnknownError),
        refusals=(_CURSOR,),
        provides=(("messageID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.session.revert.stage",
        method="POST",
        path="/api/session/{sessionID}/revert/stage",
        summary="Stage session revert",
        description=(
            "Stage or move a reversible session boundary and optionally apply its file changes: the files the"
            " agent changed at or after the message are restored to their content before it (unless `files` is"
            " false). Refused while the session executes."
        ),
        path_params=SessionPath,
        body=SessionRevertStageBody,
        success=RevertState,
        unwrap_data=True,
        errors=(MessageNotFoundError, SessionNotFoundError, SessionBusyError, UnknownError),
    ),
    Endpoint(
        operation_id="v2.session.revert.clear",
        method="POST",
        path="/api/session/{sessionID}/revert/clear",
        summary="Clear staged revert",
        description=(
            "Drop the staged revert and put its files back as the agent left them. Refused while the session"
            " executes; without a staged revert it does nothing."
        ),
        path_params=SessionPath,
        success_status=204,
        errors=(SessionNotFoundError, SessionBusyError, UnknownError),
    ),
    Endpoint(
        operation_id="v2.session.revert.commit",
        method="POST",
        path="/api/session/{sessionID}/revert/commit",
        summary="Commit staged revert",
        description=(
            "Remove the staged boundary message and everything after it from the session's history (the"
            " durable log keeps them), keeping the files as staged. Refused while the session executes; without"
            " a staged revert it does nothing."
        ),
        path_params=SessionPath,
        success_status=204,
        errors=(SessionNotFoundError, SessionBusyError),
    ),
    Endpoint(
        operation_id="v2.session.fork",
        method="POST",
        path="/api/session/{sessionID}/fork",
        summary="Fork session",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API): create a session whose parent is this one, in the same"
            " location, holding its settled history up to and including `messageID` (all of it when omitted)."
            " Its own log starts with session.forked. Allowed while the session executes."
        ),
        path_params=SessionPath,
        body=SessionForkBody,
        success=SessionV2Info,
        unwrap_data=True,
        errors=(SessionNotFoundError, MessageNotFoundError),
        provides=(("sessionID", "/data/id"),),
    ),
    Endpoint(
        operation_id="v2.session.move",
        method="POST",
        path="/api/session/{sessionID}/move",
        summary="Move session",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API): move an idle session to another directory. Its next"
            " step runs there on a fresh instruction baseline. Refused while the session executes, and while a"
            " revert is staged (commit or clear it first)."
        ),
        path_params=SessionPath,
        body=SessionMoveBody,
        success=SessionV2Info,
        unwrap_data=True,
        errors=(SessionNotFoundError, SessionBusyError, ConflictError),
        refusals=(_LOCATION,),
    ),
    Endpoint(
        operation_id="v2.session.context.entry.list",
        method="GET",
        path="/api/session/{sessionID}/context-entry",
        summary="List instruction entries",
        description="Retrieve the API-managed instruction entries of a session.",
        path_params=SessionPath,
        success=list[InstructionEntry],
        unwrap_data=True,
        errors=_SESSION_404,
        provides=(("key", "/data/0/key"),),
    ),
    Endpoint(
        operation_id="v2.session.context.entry.put",
        method="PUT",
        path="/api/session/{sessionID}/context-entry/{key}",
        summary="Set instruction entry",
        description=(
            "Create or replace one instruction entry. The change reaches the model at the session's next"
            " safe step boundary."
        ),
        path_params=ContextEntryPath,
        body=InstructionEntryPut,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.context.entry.remove",
        method="DELETE",
        path="/api/session/{sessionID}/context-entry/{key}",
        summary="Remove instruction entry",
        description=(
            "Remove one instruction entry. The change reaches the model at the session's next safe step boundary."
        ),
        path_params=ContextEntryPath,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.model.list",
        method="GET",
        path="/api/model",
        summary="List models",
        description="Retrieve available models ordered by release date.",
        query=LocationQuery,
        success=ModelList,
        errors=(ServiceUnavailableError,),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.provider.list",
        method="GET",
        path="/api/provider",
        summary="List providers",
        description="Retrieve active AI providers so clients can show provider availability and configuration.",
        query=LocationQuery,
        success=ProviderList,
        errors=(ServiceUnavailableError,),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.provider.get",
        method="GET",
        path="/api/provider/{providerID}",
        summary="Get provider",
        description="Retrieve a single AI provider so clients can inspect its availability and endpoint settings.",
        path_params=ProviderPath,
        query=LocationQuery,
        success=ProviderAnswer,
        errors=(ProviderNotFoundError, ServiceUnavailableError),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.agent.list",
        method="GET",
        path="/api/agent",
        summary="List agents",
        description="Retrieve the agents available at the requested location: the built-in ones and the configured.",
        query=LocationQuery,
        success=AgentList,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.permission.request.list",
        method="GET",
        path="/api/permission/request",
        summary="List pending permission requests",
        description="Retrieve the permission requests waiting for a reply in the requested location's sessions.",
        query=LocationQuery,
        success=PermissionRequestList,
        refusals=_LOCATION_QUERY,
        provides=(("sessionID", "/data/0/sessionID"), ("requestID", "/data/0/id")),
    ),
    Endpoint(
        operation_id="v2.permission.saved.list",
        method="GET",
        path="/api/permission/saved",
        summary="List saved permissions",
        description="Retrieve the permissions remembered by an `always` reply, optionally for one project.",
        query=SavedPermissionQuery,
        success=list[PermissionSavedInfo],
        unwrap_data=True,
    ),
    Endpoint(
        operation_id="v2.permission.saved.remove",
        method="DELETE",
        path="/api/permission/saved/{id}",
        summary="Remove saved permission",
        description="Forget one saved permission: calls it covered ask again. Removing an unknown one is a no-op.",
        path_params=SavedPermissionPath,
        success_status=204,
    ),
    Endpoint(
        operation_id="v2.session.permission.create",
        method="POST",
        path="/api/session/{sessionID}/permission",
        summary="Create session permission request",
        description=(
            "Ask for a permission on a session's behalf without waiting: the rules of the session's agent (or"
            " `agent`) answer `allow` or `deny` at once; otherwise the answer is `ask` and a pending request with"
            " the returned ID waits for a reply like any other."
        ),
        path_params=SessionPath,
        body=SessionPermissionCreateBody,
        success=PermissionCreated,
        unwrap_data=True,
        errors=_SESSION_404,
        refusals=(Refusal(InvalidRequestError, "agent", "the agent is not configured"),
                  Refusal(InvalidRequestError, "id", "the request ID is already in use")),
        # no link from the answer's `id`: it names a pending request only when the effect is `ask`
    ),
    Endpoint(
        operation_id="v2.session.permission.list",
        method="GET",
        path="/api/session/{sessionID}/permission",
        summary="List session permission requests",
        description="Retrieve the permission requests of a session that wait for a reply.",
        path_params=SessionPath,
        success=list[PermissionV2Request],
        unwrap_data=True,
        errors=_SESSION_404,
        provides=(("requestID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.session.permission.get",
        method="GET",
        path="/api/session/{sessionID}/permission/{requestID}",
        summary="Get session permission request",
        description="Retrieve one pending permission request of a session.",
        path_params=PermissionRequestPath,
        success=PermissionV2Request,
        unwrap_data=True,
        errors=(PermissionNotFoundError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.session.permission.reply",
        method="POST",
        path="/api/session/{sessionID}/permission/{requestID}/reply",
        summary="Reply to permission request",
        description=(
            "Answer a pending permission request: `once` allows this call, `always` also remembers the request's"
            " patterns for the project, `reject` refuses it (with a `message`, the model reads it and continues;"
            " without one the session stops)."
        ),
        path_params=PermissionRequestPath,
        body=PermissionReplyBody,
        success_status=204,
        errors=(PermissionNotFoundError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.question.request.list",
        method="GET",
        path="/api/question/request",
        summary="List pending questions",
        description="Retrieve the questions waiting for an answer in the requested location's sessions.",
        query=LocationQuery,
        success=QuestionRequestList,
        refusals=_LOCATION_QUERY,
        provides=(("sessionID", "/data/0/sessionID"), ("requestID", "/data/0/id")),
    ),
    Endpoint(
        operation_id="v2.session.question.list",
        method="GET",
        path="/api/session/{sessionID}/question",
        summary="List session questions",
        description="Retrieve the questions of a session that wait for an answer.",
        path_params=SessionPath,
        success=list[QuestionV2Request],
        unwrap_data=True,
        errors=_SESSION_404,
        provides=(("requestID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.session.question.reply",
        method="POST",
        path="/api/session/{sessionID}/question/{requestID}/reply",
        summary="Answer question",
        description="Answer a pending question: one list of chosen labels per question, in order.",
        path_params=QuestionRequestPath,
        body=QuestionV2Reply,
        success_status=204,
        errors=(QuestionNotFoundError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.session.question.reject",
        method="POST",
        path="/api/session/{sessionID}/question/{requestID}/reject",
        summary="Reject question",
        description="Dismiss a pending question without answering: the tool call fails and the session stops.",
        path_params=QuestionRequestPath,
        success_status=204,
        errors=(QuestionNotFoundError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.event.subscribe",
        method="GET",
        path="/api/event",
        summary="Subscribe to events",
        description="Subscribe to native event payloads for the server.",
        stream=StreamSpec(item=InstanceEvent, name="InstanceEvent", endless=True),
    ),
)

_BY_ID = {e.operation_id: e for e in ENDPOINTS}
if len(_BY_ID) != len(ENDPOINTS):
    raise RuntimeError("duplicate operation IDs in ENDPOINTS")


def endpoint(operation_id: str) -> Endpoint:
    """The endpoint declared under `operation_id`; KeyError when there is none."""
    return _BY_ID[operation_id]
