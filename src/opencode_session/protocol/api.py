"""The V2 API as data: request payload models, stream item unions and the ENDPOINTS table."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Union

from pydantic import (
    BeforeValidator,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from opencode_session.schema.agent import AgentV2Info
from opencode_session.schema.base import Struct
from opencode_session.schema.catalog import ModelList, ProviderAnswer, ProviderList
from opencode_session.schema.command import CommandV2Info
from opencode_session.schema.common import LocationRef, ModelRef
from opencode_session.schema.errors import (
    ConflictError,
    ForbiddenError,
    InvalidCursorError,
    InvalidRequestError,
    MessageNotFoundError,
    PermissionNotFoundError,
    ProviderNotFoundError,
    PtyNotFoundError,
    QuestionNotFoundError,
    ServiceUnavailableError,
    SessionBusyError,
    SessionExecutionFailedError,
    SessionNotFoundError,
    StepContextNotFoundError,
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
from opencode_session.schema.fs import FileSystemEntry
from opencode_session.schema.ids import (
    MessageID,
    MessageIDIn,
    PermissionID,
    PermissionIDIn,
    PtyID,
    QuestionID,
    SessionID,
    SessionIDIn,
    WorkspaceID,
    well_formed,
)
from opencode_session.schema.input import SessionInputAdmitted
from opencode_session.schema.instruction_entry import EntryKey, InstructionEntry, InstructionEntryPut
from opencode_session.schema.integration import IntegrationAttempt, IntegrationAttemptStatus, IntegrationInfo
from opencode_session.schema.lifecycle import InboxDelivery, InboxItem, InboxSyntheticItem, SessionTranscript
from opencode_session.schema.location import LocationInfo
from opencode_session.schema.mcp import McpServerStatus
from opencode_session.schema.message import SessionMessage
from opencode_session.schema.model_context import StepModelContext
from opencode_session.schema.permission import (
    PermissionSavedInfo,
    PermissionV2Effect,
    PermissionV2Reply,
    PermissionV2Request,
    PermissionV2Rule,
    PermissionV2Source,
)
from opencode_session.schema.prompt import PromptInput
from opencode_session.schema.pty import Pty, PtySize, PtyTicketConnectToken
from opencode_session.schema.question import QuestionV2Reply, QuestionV2Request
from opencode_session.schema.reference import ReferenceInfo
from opencode_session.schema.session import FileDiff, RevertState, SessionActive, SessionOwner, SessionV2Info
from opencode_session.schema.skill import SkillV2Info
from opencode_session.schema.stats import SessionStats

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


class StepMessagePath(Struct):
    sessionID: SessionID
    messageID: MessageID = Field(description="The assistant message of the Step.")


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
    parentID: Annotated[str, Field(pattern=r"^(ses.*|null)$")] | None = Field(
        None, description="Only the children of this session; the string `null`: only root sessions.")
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


class SessionWaitQuery(Struct):
    outcome: QueryBool | None = Field(
        None, description="Also say how the latest execution ended: 204 when it succeeded or was interrupted (or none"
        " ran), SessionExecutionFailedError (422) with its error when it failed. Without it, always 204 (OpenCode's"
        " contract).")


class SessionLogQuery(Struct):
    after: Seq | None = None
    follow: QueryBool | None = None


# --- request bodies -------------------------------------------------------------------------------


class SessionCreateBody(Struct):
    id: SessionIDIn | None = None
    agent: str | None = None
    model: ModelRef | None = None
    location: LocationRef | None = None
    parentID: SessionIDIn | None = Field(None, description="A child session of this one, at its Location.")
    title: str | None = None
    metadata: dict[str, Any] | None = None
    permissions: list[PermissionV2Rule] | None = None


class SessionSwitchAgentBody(Struct):
    agent: str


class SessionSwitchModelBody(Struct):
    model: ModelRef


class SessionPromptBody(Struct):
    id: MessageIDIn | None = None
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
    id: PermissionIDIn | None = None
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


# --- terminals, files, provider connections, commands, skills, references -------------------------


def _int_from_query(value: Any) -> Any:
    # A URL carries a decimal string (a PTY cursor may be -1); Python callers pass ints.
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,19}", value):
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    raise ValueError("expected an integer")


MAX_FIND_RESULTS = 200

FindLimit = Annotated[
    int,
    BeforeValidator(_int_from_query),
    Field(ge=1, le=MAX_FIND_RESULTS),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": MAX_FIND_RESULTS}),
]
# an absolute output position; -1 asks for no replay, only what comes next
PtyCursor = Annotated[
    int,
    BeforeValidator(_int_from_query),
    Field(ge=-1, le=MAX_SEQ),
    WithJsonSchema({"type": "integer", "minimum": -1, "maximum": MAX_SEQ}),
]
# Argument and environment strings reach execve, which cannot carry a NUL byte (names are checked by the terminal
# manager: no NUL, no `=`, not empty).
ExecString = Annotated[str, Field(pattern=r"^[^\x00]*$")]


class _Body(Struct):
    """A request body whose optional fields are left out, never sent as null: the document admits no null."""

    @model_validator(mode="before")
    @classmethod
    def _absent_not_null(cls, data: Any) -> Any:
        if isinstance(data, dict):
            nulls = [key for name, info in cls.model_fields.items() if data.get(key := info.alias or name, 0) is None]
            if nulls:
                raise ValueError(f"{', '.join(nulls)}: leave an optional field out rather than send null")
        return data


class PtyPath(Struct):
    ptyID: PtyID


class PtyCreateBody(_Body):
    command: ExecString | None = None
    args: list[ExecString] | None = None
    cwd: ExecString | None = None
    title: str | None = None
    env: dict[str, ExecString] | None = None


class PtyUpdateBody(_Body):
    title: str | None = None
    size: PtySize | None = None


class PtyConnectQuery(Struct):
    # the reference names these two query parameters literally (not as one deepObject `location`)
    location_directory: str | None = Field(None, alias="location[directory]")
    location_workspace: WorkspaceID | None = Field(None, alias="location[workspace]")
    cursor: PtyCursor | None = None
    ticket: str | None = None


class PtyList(Struct):
    location: LocationInfo
    data: list[Pty]


class PtyAnswer(Struct):
    location: LocationInfo
    data: Pty


class PtyTokenAnswer(Struct):
    location: LocationInfo
    data: PtyTicketConnectToken


class FsReadPath(Struct):
    path: str


class FsListQuery(Struct):
    location: LocationSelector | None = None
    path: str | None = None


class FsFindQuery(Struct):
    location: LocationSelector | None = None
    query: str
    type: Literal["file", "directory"] | None = None
    limit: FindLimit | None = None


class FsEntries(Struct):
    location: LocationInfo
    data: list[FileSystemEntry]


class IntegrationPath(Struct):
    integrationID: str


class AttemptPath(Struct):
    attemptID: str


class CredentialPath(Struct):
    credentialID: str


class IntegrationKeyBody(_Body):
    key: str = Field(min_length=1)
    label: str | None = None


class IntegrationOAuthBody(_Body):
    methodID: str
    inputs: dict[str, str]
    label: str | None = None


class AttemptCompleteBody(_Body):
    code: str | None = None


class CredentialUpdateBody(_Body):
    label: str


class IntegrationList(Struct):
    location: LocationInfo
    data: list[IntegrationInfo]


class IntegrationAnswer(Struct):
    location: LocationInfo
    data: IntegrationInfo


class IntegrationAttemptAnswer(Struct):
    location: LocationInfo
    data: IntegrationAttempt


class IntegrationAttemptStatusAnswer(Struct):
    location: LocationInfo
    data: IntegrationAttemptStatus


class CommandList(Struct):
    location: LocationInfo
    data: list[CommandV2Info]


class SkillList(Struct):
    location: LocationInfo
    data: list[SkillV2Info]


class ReferenceList(Struct):
    location: LocationInfo
    data: list[ReferenceInfo]


class McpStatusList(Struct):
    location: LocationInfo
    data: dict[str, McpServerStatus]


class TrustInfo(Struct):
    """Whether a location's project configuration has authority (docs/security.md): `trusted` (also when it has no
    project file, or when every location is trusted: `trustAll`), the digest of its content now, the one last
    trusted there (`granted`; `changed` when they differ), its project files, and what it configures that is
    left out while it is not trusted (`ignored`: hooks, mcp, plugin, provider, websearch, permission rules other
    than deny)."""

    location: LocationInfo
    trusted: bool
    trustAll: bool = False
    digest: str | None = None
    granted: str | None = None
    changed: bool = False
    files: list[str] = Field(default_factory=list)
    ignored: list[str] = Field(default_factory=list)


class TrustGrantBody(_Body):
    # the digest the user was shown (from GET): trusted only if the content is still that one (409 otherwise)
    digest: str | None = None


# --- session management: update, remove, the inbox, export and import ---------------------------------


class SessionUpdateBody(_Body):
    title: str | None = None
    metadata: dict[str, Any] | None = None
    permissions: list[PermissionV2Rule] | None = None


class InboxPath(Struct):
    sessionID: SessionID
    inboxID: MessageID


class InboxUpdateBody(Struct):
    delivery: InboxDelivery


class SessionExportQuery(Struct):
    sanitize: QueryBool | None = None


# --- what a turn changed, and usage statistics --------------------------------------------------------

MAX_CONTEXT = 100_000

Context = Annotated[
    int,
    BeforeValidator(_seq_from_query),
    Field(ge=0, le=MAX_CONTEXT),
    WithJsonSchema({"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT}),
]


class SessionDiffQuery(Struct):
    from_: MessageID | None = Field(None, alias="from", description=(
        "A user message: its turn starts the range (default: the newest user message)."))
    to: MessageID | None = Field(None, description=(
        "A user message at or after `from`: its turn ends the range (default: `from`'s turn alone)."))
    context: Context | None = Field(None, description=(
        "Unchanged lines around each hunk; omitted: whole-file patches."))


class SessionStatsQuery(Struct):
    from_: Seq | None = Field(None, alias="from", description="Start of the range, epoch ms (inclusive).")
    to: Seq | None = Field(None, description="End of the range, epoch ms (exclusive; default: now).")
    project: str | None = Field(None, description="Only sessions of this project.")
    timezone: str | None = Field(None, max_length=64, description="IANA time zone the days are counted in (UTC).")
    tools: QueryBool | None = Field(None, description="Count each tool's calls and failures (default: true).")
class SessionInterruptQuery(Struct):
    resume: QueryBool | None = None


class SessionInterrupted(Struct):
    interrupted: bool = Field(description="Whether an execution was running and was stopped.")


class SessionSyntheticBody(_Body):
    id: MessageIDIn | None = None
    text: str
    description: str | None = None
    metadata: dict[str, Any] | None = None
    delivery: Delivery | None = None
    resume: bool | None = None


class SessionShellBody(_Body):
    id: MessageIDIn | None = None
    command: Annotated[str, Field(min_length=1, pattern=r"^[^\x00]*\S[^\x00]*$")]


class SessionEnvironmentBody(_Body):
    variables: dict[str, ExecString]


class SessionGenerateBody(_Body):
    prompt: str


class SessionGenerated(Struct):
    text: str


def _integral(value: Any) -> Any:
    # JSON does not tell 185 from 185.0: an integral number is that integer (the schema says "integer")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


class SessionViewBody(_Body):
    idle: Annotated[int, BeforeValidator(_integral)] = Field(
        ge=0, le=MAX_SEQ, description="The time (epoch ms) of the idle transition the viewer saw.")


def _stored_numbers(value: Any) -> Any:
    """An exported transcript's numbers as the store keeps them: an integral float is that integer (JSON does not
    tell 70 from 70.0), and none is beyond a signed 64-bit integer (what SQLite and PostgreSQL columns hold)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise ValueError("a number is beyond a signed 64-bit integer")
    if isinstance(value, list):
        return [_stored_numbers(v) for v in value]
    if isinstance(value, dict):
        return {k: _stored_numbers(v) for k, v in value.items()}
    return value


# The document spells the imported messages as objects: each is a SessionMessage as the export gave it (validated
# as one, each refusal naming the message's field), but a request schema of the whole message union nested in a
# body is deeper than request generators handle.
ImportedMessages = Annotated[list[SessionMessage], WithJsonSchema({
    "type": "array", "items": {"type": "object"},
    "description": "The transcript's messages, oldest first, each a SessionMessage as the export gave it.",
})]


class SessionImportBody(Struct):
    info: SessionV2Info
    messages: ImportedMessages
    location: LocationRef | None = Field(None, description="Where the session is recreated (default: the server's"
                                                           " directory, never the one the file names).")

    @field_validator("info", mode="before")
    @classmethod
    def _numbers(cls, value: Any) -> Any:
        return _stored_numbers(value)

    @field_validator("info", mode="after")
    @classmethod
    def _info_ids(cls, info: SessionV2Info) -> SessionV2Info:
        # a file's IDs enter here as a request's do: to their exact shape (they end up in URLs and pages)
        for field, value in (("id", info.id), ("parentID", info.parentID)):
            if value is not None and not well_formed("ses", value):
                raise PydanticCustomError("id_shape", "{field}: not a session ID: {value}",
                                          {"field": field, "value": repr(value[:140])})
        return info

    @field_validator("messages", mode="after")
    @classmethod
    def _message_ids(cls, messages: list[Any]) -> list[Any]:
        for index, message in enumerate(messages):
            if not well_formed("msg", message.id):
                raise PydanticCustomError("id_shape", "{index}.id: not a message ID: {value}",
                                          {"index": index, "value": repr(message.id[:140])})
        return messages

    @field_validator("messages", mode="wrap")
    @classmethod
    def _messages(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(_stored_numbers(value))
        except ValidationError as bad:
            first = bad.errors()[0]
            raise PydanticCustomError("transcript_message", "{where}: {problem}", {
                "where": ".".join(str(p) for p in first["loc"]), "problem": first["msg"]}) from None


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
                    " look up; or the `directory` query parameter, `location[directory]` and the"
                    " `x-opencode-directory` header name different directories")
_DIRECTORY_FILTER = Refusal(InvalidRequestError, "directory", "the directory is a path this machine cannot look up")
_MODEL = Refusal(InvalidRequestError, "model",
                 "the model is not declared under its provider in the configuration of the session's location")
_AGENT = Refusal(InvalidRequestError, "agent",
                 "the agent is not configured at the session's location (or its configuration cannot be read)")
_CURSOR = Refusal(InvalidCursorError, None,
                  "the cursor is not one this server issued for this list, or comes with the query parameters it"
                  " replaces")
_LOCATION_QUERY = (_LOCATION,)
_PTY_LOCATION = Refusal(InvalidRequestError, "location[directory]", _LOCATION.reason)
_NOT_UPGRADE = Refusal(InvalidRequestError, None, "the request is not a WebSocket upgrade")
_PTY_COMMAND = Refusal(InvalidRequestError, "command", "the command is not found on the PATH or cannot be run")
_PTY_CWD = Refusal(InvalidRequestError, "cwd", "the working directory does not exist or is not a directory")
_PTY_ENV = Refusal(InvalidRequestError, "env", "a variable's name or value cannot be passed to a process")
_PTY_LIMIT = Refusal(InvalidRequestError, None, "the server already runs as many terminals as it allows")
_INTEGRATION = Refusal(InvalidRequestError, "integrationID", "no provider by that ID is known at the location")
_ATTEMPT = Refusal(InvalidRequestError, "attemptID", "no OAuth attempt by that ID is known (it may have been removed)")
_CREDENTIAL = Refusal(InvalidRequestError, "credentialID", "no stored credential has that ID")

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
        description=(
            "Create a session at the requested location; with parentID, a child of that session (at its location"
            " unless one is given)."
        ),
        body=SessionCreateBody,
        success=SessionV2Info,
        unwrap_data=True,
        errors=_SESSION_404,
        refusals=(_LOCATION, _MODEL, _AGENT),
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
        operation_id="v2.session.owner",
        method="GET",
        path="/api/session/{sessionID}/owner",
        summary="Get session owner",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API): which host executes the session now. Hosts that share one"
            " PostgreSQL database execute each session on one host at a time, under a lease; null fields: no host"
            " executes it."
        ),
        path_params=SessionPath,
        success=SessionOwner,
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
        refusals=(_AGENT,),
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
        query=SessionWaitQuery,
        success_status=204,
        errors=(SessionNotFoundError, SessionExecutionFailedError, ServiceUnavailableError),
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
        description=(
            "Interrupt active execution owned by this OpenCode process (idle interruption is a no-op). With"
            " resume=true execution starts again when steering input or a compaction barrier is pending; with"
            " only queued prompts pending they stay parked until the session is next woken."
        ),
        path_params=SessionPath,
        query=SessionInterruptQuery,
        success=SessionInterrupted,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.synthetic",
        method="POST",
        path="/api/session/{sessionID}/synthetic",
        summary="Send synthetic input",
        description=(
            "Durably admit input the model reads as the user's side, marked synthetic: it is delivered and"
            " executes as a prompt does (steer by default) unless resume is false. An exact retry of an ID answers"
            " the same item; another use of it is a conflict."
        ),
        path_params=SessionPath,
        body=SessionSyntheticBody,
        success=InboxSyntheticItem,
        unwrap_data=True,
        errors=(ConflictError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.session.shell",
        method="POST",
        path="/api/session/{sessionID}/shell",
        summary="Run shell command",
        description=(
            "Run one shell command in the session's location while it is idle, under its bash permission rules"
            " (a deny refuses it). The session records it as a shell message between session.shell.started and"
            " session.shell.ended (with its merged output); the answer comes once it ended."
        ),
        path_params=SessionPath,
        body=SessionShellBody,
        success_status=204,
        errors=(SessionNotFoundError, SessionBusyError, ConflictError),
        refusals=(Refusal(InvalidRequestError, "command", "the command line holds no command (only separators)"),),
    ),
    Endpoint(
        operation_id="v2.session.resume",
        method="POST",
        path="/api/session/{sessionID}/resume",
        summary="Resume session",
        description=(
            "Start execution without new input (or join the running one) and answer once it settled: pending"
            " input is delivered, and history that awaits an assistant reply is answered."
        ),
        path_params=SessionPath,
        success_status=204,
        errors=(SessionNotFoundError, ServiceUnavailableError),
        waits=True,
    ),
    Endpoint(
        operation_id="v2.session.generate",
        method="POST",
        path="/api/session/{sessionID}/generate",
        summary="Generate from session context",
        description=(
            "Answer a prompt with the session's model after its active history, without recording anything:"
            " its history, usage and log stay as they were."
        ),
        path_params=SessionPath,
        body=SessionGenerateBody,
        success=SessionGenerated,
        unwrap_data=True,
        errors=(SessionNotFoundError, ServiceUnavailableError),
    ),
    Endpoint(
        operation_id="v2.session.view",
        method="POST",
        path="/api/session/{sessionID}/view",
        summary="Mark session viewed",
        description=(
            "Mark the idle transition the viewer saw (`idle`, epoch ms) as viewed: a durable session.viewed event"
            " tells the other viewers, so they need not notify their user of it again."
        ),
        path_params=SessionPath,
        body=SessionViewBody,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.environment",
        method="PUT",
        path="/api/session/{sessionID}/environment",
        summary="Set session shell environment",
        description=(
            "Replace the variables the session's shell commands get over the server's environment (which they"
            " inherit without the server's secrets). Kept by this server process."
        ),
        path_params=SessionPath,
        body=SessionEnvironmentBody,
        success_status=204,
        errors=_SESSION_404,
        refusals=(Refusal(InvalidRequestError, "variables",
                          "a variable's name is empty or holds `=` or NUL: no process can be given it"),),
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
        operation_id="v2.session.message.context",
        method="GET",
        path="/api/session/{sessionID}/message/{messageID}/context",
        summary="Step Model Context",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API): the Model Context the Step of this assistant message sent,"
            " as recorded when it was sent: the agent's system text, the Instruction Baseline, the Instruction"
            " Updates in the history sent, the Session History selected (after compaction and checkpoint cutoffs),"
            " the tool definitions offered, step-local additions and the request options, as sections keyed by"
            " source; per section what was added, removed or changed since the session's previous Step; and the"
            " request body exactly as the provider received it."
        ),
        path_params=StepMessagePath,
        success=StepModelContext,
        unwrap_data=True,
        errors=(SessionNotFoundError, MessageNotFoundError, StepContextNotFoundError),
        refusals=(Refusal(InvalidRequestError, "messageID", "the message is not a Step's assistant message"),),
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
            " false). Refused while the session executes, and (409, nothing touched) when a snapshot it needs"
            " cannot be read."
        ),
        path_params=SessionPath,
        body=SessionRevertStageBody,
        success=RevertState,
        unwrap_data=True,
        errors=(MessageNotFoundError, SessionNotFoundError, SessionBusyError, ConflictError, UnknownError),
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
    # --- session management: update, remove, the inbox, export and import ---
    Endpoint(
        operation_id="v2.session.remove",
        method="DELETE",
        path="/api/session/{sessionID}",
        summary="Remove session",
        description=(
            "Remove a session and its child sessions, recursively. An executing one is interrupted first; its"
            " messages, pending input, instruction entries and tool output files leave the store, and one"
            " session.deleted event per session tells event subscribers. Afterwards the session is not found."
        ),
        path_params=SessionPath,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.update",
        method="PATCH",
        path="/api/session/{sessionID}",
        summary="Update session",
        description=(
            "Replace the session's title, metadata or permission rules (each field given). A title set here is"
            " never replaced by the automatic one."
        ),
        path_params=SessionPath,
        body=SessionUpdateBody,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.inbox.list",
        method="GET",
        path="/api/session/{sessionID}/inbox",
        summary="List session inbox",
        description="Retrieve the input admitted to a session but not yet delivered to it, in enqueue order.",
        path_params=SessionPath,
        success=list[InboxItem],
        unwrap_data=True,
        errors=_SESSION_404,
        provides=(("inboxID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.session.inbox.cancel",
        method="DELETE",
        path="/api/session/{sessionID}/inbox/{inboxID}",
        summary="Cancel inbox item",
        description=(
            "Withdraw pending input before it is delivered: it never executes. An item no longer pending"
            " (delivered or cancelled already) is left as it is."
        ),
        path_params=InboxPath,
        success_status=204,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.session.inbox.update",
        method="PATCH",
        path="/api/session/{sessionID}/inbox/{inboxID}",
        summary="Change inbox item delivery",
        description=(
            "Change when pending input is delivered: `steer` at the next safe step boundary (execution is woken),"
            " `queue` once the session is idle."
        ),
        path_params=InboxPath,
        body=InboxUpdateBody,
        success_status=204,
        errors=(ConflictError, SessionNotFoundError),
    ),
    Endpoint(
        operation_id="v2.experimental.session.export",
        method="GET",
        path="/api/experimental/session/{sessionID}/export",
        summary="Export session",
        description=(
            "Retrieve a session's record and projected messages, oldest first. With sanitize=true, credentials,"
            " the absolute home directory, attachments' bytes and tool output file paths are removed."
        ),
        path_params=SessionPath,
        query=SessionExportQuery,
        success=SessionTranscript,
        unwrap_data=True,
        errors=_SESSION_404,
    ),
    Endpoint(
        operation_id="v2.experimental.session.import",
        method="POST",
        path="/api/experimental/session/import",
        summary="Import session",
        description=(
            "Recreate an exported session, in one transaction: it lists, replays and continues like any other."
            " Parents must be imported before their children; an ID already here is a conflict."
        ),
        body=SessionImportBody,
        success=SessionV2Info,
        unwrap_data=True,
        errors=(ConflictError, SessionNotFoundError),
        refusals=(_LOCATION,
                  Refusal(InvalidRequestError, "info", "a number is beyond a signed 64-bit integer"),
                  Refusal(InvalidRequestError, "messages",
                          "a message is not a SessionMessage, a number is beyond a signed 64-bit integer, or two"
                          " messages have the same ID")),
        provides=(("sessionID", "/data/id"),),
    ),
    Endpoint(
        operation_id="v2.session.diff",
        method="GET",
        path="/api/session/{sessionID}/diff",
        summary="Session diff",
        description=(
            "Retrieve what a turn, or a range of turns, changed on disk: each file that differs from the snapshot the"
            " range's first Step started on to the one its last Step ended on (a Step still running: the working"
            " copy now), with its additions, deletions and unified diff. Turns whose Steps ran no file-changing"
            " tool (or ran where snapshots are off) changed nothing."
        ),
        path_params=SessionPath,
        query=SessionDiffQuery,
        success=list[FileDiff],
        unwrap_data=True,
        errors=(MessageNotFoundError, SessionNotFoundError),
        refusals=(Refusal(InvalidRequestError, "to",
                          "`to` is earlier than `from`, or the range's Steps ran in more than one location (the"
                          " session was moved between them)"),
                  Refusal(InvalidRequestError, "from", "`to` is given without `from`"),
                  Refusal(InvalidRequestError, None, "a snapshot of the range is no longer available")),
    ),
    Endpoint(
        operation_id="v2.experimental.session.stats",
        method="GET",
        path="/api/experimental/session/stats",
        summary="Session statistics",
        description=(
            "Retrieve usage over a time range: sessions, prompts, Steps, tokens and cost in all, per model, per"
            " agent and per day in the given time zone, and each tool's calls and failures."
        ),
        query=SessionStatsQuery,
        success=SessionStats,
        unwrap_data=True,
        refusals=(Refusal(InvalidRequestError, "timezone", "the time zone is not one this machine knows"),
                  Refusal(InvalidRequestError, "to", "the range ends before it starts")),
    ),
    Endpoint(
        operation_id="v2.experimental.trust.get",
        method="GET",
        path="/api/experimental/trust",
        summary="Location trust",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API): whether the location's project configuration"
            " (opencode.json's hooks, MCP servers, plugins, providers, web search and permissions that widen) has"
            " authority, which the user gives by trusting the location with its content; until then those are"
            " ignored and `ignored` names them. The user's own configuration is always trusted."
        ),
        query=LocationQuery,
        success=TrustInfo,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.experimental.trust.grant",
        method="POST",
        path="/api/experimental/trust",
        summary="Trust location",
        description=(
            "Extension: trust the location's project configuration with the content it has now (with `digest`,"
            " only if that is still its content: 409 otherwise), so its hooks, MCP servers, plugins and permissions"
            " apply from the next Step or session; a later change to it must be trusted again. Kept in the user's"
            " data directory, as `ocs trust` does."
        ),
        query=LocationQuery,
        body=TrustGrantBody,
        success=TrustInfo,
        errors=(ConflictError,),
        refusals=_LOCATION_QUERY,
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
    # --- terminals -------------------------------------------------------------------------------------------
    Endpoint(
        operation_id="v2.pty.list",
        method="GET",
        path="/api/pty",
        summary="List terminals",
        description="The pseudo-terminals of the requested location; exited ones stay listed until they are removed.",
        query=LocationQuery,
        success=PtyList,
        refusals=_LOCATION_QUERY,
        provides=(("ptyID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.pty.create",
        method="POST",
        path="/api/pty",
        summary="Create terminal",
        description=(
            "Start the user's shell (or `command` with `args`) on a new pseudo-terminal in the location, or in `cwd`"
            " taken relative to it. The environment is the server's, then `env`, then the host's additions, then"
            " TERM and OPENCODE_TERMINAL."
        ),
        query=LocationQuery,
        body=PtyCreateBody,
        success=PtyAnswer,
        refusals=(_LOCATION, _PTY_COMMAND, _PTY_CWD, _PTY_ENV, _PTY_LIMIT),
        provides=(("ptyID", "/data/id"),),
    ),
    Endpoint(
        operation_id="v2.pty.get",
        method="GET",
        path="/api/pty/{ptyID}",
        summary="Get terminal",
        description="One pseudo-terminal of the location, with its exit code once its process has ended.",
        path_params=PtyPath,
        query=LocationQuery,
        success=PtyAnswer,
        errors=(PtyNotFoundError,),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.pty.update",
        method="PUT",
        path="/api/pty/{ptyID}",
        summary="Update terminal",
        description="Rename a pseudo-terminal or resize its window (a running process is told of the new size).",
        path_params=PtyPath,
        query=LocationQuery,
        body=PtyUpdateBody,
        success=PtyAnswer,
        errors=(PtyNotFoundError,),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.pty.remove",
        method="DELETE",
        path="/api/pty/{ptyID}",
        summary="Remove terminal",
        description="Kill the pseudo-terminal's process group and forget it.",
        path_params=PtyPath,
        query=LocationQuery,
        success_status=204,
        errors=(PtyNotFoundError,),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.pty.connectToken",
        method="POST",
        path="/api/pty/{ptyID}/connect-token",
        summary="Create terminal connection ticket",
        description=(
            "A ticket that opens this terminal's WebSocket once, within a minute, for the same location: for a"
            " browser, which cannot send the password header on a WebSocket."
        ),
        path_params=PtyPath,
        query=LocationQuery,
        success=PtyTokenAnswer,
        errors=(ForbiddenError, PtyNotFoundError),
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.pty.connect",
        method="GET",
        path="/api/pty/{ptyID}/connect",
        summary="Connect to terminal",
        description=(
            "A WebSocket to the terminal. The server sends the retained output after `cursor` (all of it when absent,"
            " none for -1) as text frames, then one binary frame of a 0x00 byte and the JSON `{\"cursor\": N}` (the"
            " absolute output position reached, to reconnect from), then live output as text frames, and closes when"
            " the process exits. The client sends input as text (or UTF-8 binary) frames; a binary frame of a 0x00"
            " byte and the JSON `{\"size\": {\"rows\": R, \"cols\": C}}` resizes the window. Without the"
            " password header, `ticket` (from connect-token) authorizes the connection."
        ),
        path_params=PtyPath,
        query=PtyConnectQuery,
        success=bool,
        errors=(ForbiddenError, PtyNotFoundError),
        refusals=(_PTY_LOCATION, _NOT_UPGRADE),
        websocket=True,
    ),
    # --- files --------------------------------------------------------------------------------------------
    Endpoint(
        operation_id="v2.fs.read",
        method="GET",
        path="/api/fs/read/*",
        summary="Read file",
        description=(
            "The bytes of one regular file, named by the path after `/api/fs/read/` relative to the location (`..`"
            " and symbolic links resolved; elsewhere only where a permission rule allows). The `X-File-Kind` header"
            " says `text` or `binary`."
        ),
        path_params=FsReadPath,
        query=LocationQuery,
        success=bytes,
        refusals=(_LOCATION, Refusal(InvalidRequestError, "path",
                                     "the path names no regular file (missing, a directory, or not a usable path),"
                                     " or one larger than the limit")),
        wildcard="path",
    ),
    Endpoint(
        operation_id="v2.fs.list",
        method="GET",
        path="/api/fs/list",
        summary="List directory",
        description=(
            "The entries directly inside a directory of the location (`path`, relative to it; the location itself by"
            " default), directories first, without the ones ignore files exclude."
        ),
        query=FsListQuery,
        success=FsEntries,
        refusals=(_LOCATION, Refusal(InvalidRequestError, "path",
                                     "the path names no directory (missing, a file, or not a usable path)")),
    ),
    Endpoint(
        operation_id="v2.fs.find",
        method="GET",
        path="/api/fs/find",
        summary="Find files",
        description=(
            "Files and directories anywhere in the location ranked by how well their path matches `query`, as a fuzzy"
            " file finder ranks them, without the ones ignore files exclude; at most `limit` (50 by default)."
        ),
        query=FsFindQuery,
        success=FsEntries,
        refusals=_LOCATION_QUERY,
    ),
    # --- provider connections ---------------------------------------------------------------------------------
    Endpoint(
        operation_id="v2.integration.list",
        method="GET",
        path="/api/integration",
        summary="List integrations",
        description=(
            "The providers this runtime can reach (built in and configured), how each can be connected, and the"
            " connections each has: stored credentials (newest first) and set environment variables."
        ),
        query=LocationQuery,
        success=IntegrationList,
        refusals=_LOCATION_QUERY,
        provides=(("integrationID", "/data/0/id"),),
    ),
    Endpoint(
        operation_id="v2.integration.get",
        method="GET",
        path="/api/integration/{integrationID}",
        summary="Get integration",
        description="One provider's connection methods and connections.",
        path_params=IntegrationPath,
        query=LocationQuery,
        success=IntegrationAnswer,
        refusals=(_LOCATION, _INTEGRATION),
    ),
    Endpoint(
        operation_id="v2.integration.connect.key",
        method="POST",
        path="/api/integration/{integrationID}/connect/key",
        summary="Connect with a key",
        description=(
            "Store an API key for the provider: later Steps use it, without any configuration change. The key is"
            " never returned by any operation."
        ),
        path_params=IntegrationPath,
        query=LocationQuery,
        body=IntegrationKeyBody,
        success_status=204,
        refusals=(_LOCATION, _INTEGRATION),
    ),
    Endpoint(
        operation_id="v2.integration.connect.oauth",
        method="POST",
        path="/api/integration/{integrationID}/connect/oauth",
        summary="Start an OAuth connection",
        description=(
            "Begin an OAuth attempt with one of the provider's OAuth methods: the answer has the authorization URL"
            " to open and the attempt's ID to poll, complete (with the code, in `code` mode) or cancel."
        ),
        path_params=IntegrationPath,
        query=LocationQuery,
        body=IntegrationOAuthBody,
        success=IntegrationAttemptAnswer,
        refusals=(_LOCATION, _INTEGRATION,
                  Refusal(InvalidRequestError, "methodID", "the provider has no OAuth method of that ID (a provider"
                                                           " without OAuth has none)")),
        provides=(("attemptID", "/data/attemptID"),),
    ),
    Endpoint(
        operation_id="v2.integration.attempt.status",
        method="GET",
        path="/api/integration/attempt/{attemptID}",
        summary="Get OAuth attempt status",
        description="Whether an OAuth attempt is pending, complete, failed (with why) or expired.",
        path_params=AttemptPath,
        query=LocationQuery,
        success=IntegrationAttemptStatusAnswer,
        refusals=(_LOCATION, _ATTEMPT),
    ),
    Endpoint(
        operation_id="v2.integration.attempt.cancel",
        method="DELETE",
        path="/api/integration/attempt/{attemptID}",
        summary="Cancel OAuth attempt",
        description="Abandon a pending OAuth attempt and release what it holds. Cancelling an unknown one is a no-op.",
        path_params=AttemptPath,
        query=LocationQuery,
        success_status=204,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.integration.attempt.complete",
        method="POST",
        path="/api/integration/attempt/{attemptID}/complete",
        summary="Complete OAuth attempt",
        description=(
            "Finish a `code` mode attempt with the code the provider showed the user: the code is exchanged for a"
            " credential, which is stored."
        ),
        path_params=AttemptPath,
        query=LocationQuery,
        body=AttemptCompleteBody,
        success_status=204,
        refusals=(_LOCATION, _ATTEMPT,
                  Refusal(InvalidRequestError, "code", "the code is missing, or the provider did not accept it")),
    ),
    Endpoint(
        operation_id="v2.credential.update",
        method="PATCH",
        path="/api/credential/{credentialID}",
        summary="Rename credential",
        description="Change the label of a stored credential.",
        path_params=CredentialPath,
        query=LocationQuery,
        body=CredentialUpdateBody,
        success_status=204,
        refusals=(_LOCATION, _CREDENTIAL),
    ),
    Endpoint(
        operation_id="v2.credential.remove",
        method="DELETE",
        path="/api/credential/{credentialID}",
        summary="Remove credential",
        description=(
            "Delete a stored credential: Steps that start after this no longer use it. Removing an unknown one is a"
            " no-op."
        ),
        path_params=CredentialPath,
        query=LocationQuery,
        success_status=204,
        refusals=_LOCATION_QUERY,
    ),
    # --- commands, skills, references -----------------------------------------------------------------------
    Endpoint(
        operation_id="v2.command.list",
        method="GET",
        path="/api/command",
        summary="List commands",
        description=(
            "The custom commands of the location: opencode.json's `command` entries and the markdown files under"
            " `command/` of the global config directory and of `.opencode/` in the project."
        ),
        query=LocationQuery,
        success=CommandList,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.skill.list",
        method="GET",
        path="/api/skill",
        summary="List skills",
        description="The skills the `skill` tool offers at the location, with their instructions.",
        query=LocationQuery,
        success=SkillList,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.reference.list",
        method="GET",
        path="/api/reference",
        summary="List references",
        description=(
            "The project references configured for the location (opencode.json's `references`): directories a"
            " session may consult, local or cloned from git."
        ),
        query=LocationQuery,
        success=ReferenceList,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.mcp.status",
        method="GET",
        path="/api/mcp",
        summary="MCP server status",
        description=(
            "Extension (not in OpenCode 1.18.33's V2 API; OpenCode's own `GET /mcp` answers the same map): the MCP"
            " servers opencode.json's `mcp` configures for the location, by name, each `connected`, `disabled` or"
            " `failed` with its `error`, or `stopped` when it is not running: a status read starts nothing (the next"
            " Step at the location starts them, or `POST /api/mcp/connect`)."
        ),
        query=LocationQuery,
        success=McpStatusList,
        refusals=_LOCATION_QUERY,
    ),
    Endpoint(
        operation_id="v2.mcp.connect",
        method="POST",
        path="/api/mcp/connect",
        summary="Start MCP servers",
        description=(
            "Extension: starts the MCP servers opencode.json's `mcp` configures for the location that are not"
            " running (each waited for at most its `timeout`) and answers their status as `GET /api/mcp` does. A"
            " POST, so that no page can make a browser start a process with a plain load."
        ),
        query=LocationQuery,
        success=McpStatusList,
        refusals=_LOCATION_QUERY,
    ),
)

_BY_ID = {e.operation_id: e for e in ENDPOINTS}
if len(_BY_ID) != len(ENDPOINTS):
    raise RuntimeError("duplicate operation IDs in ENDPOINTS")


def endpoint(operation_id: str) -> Endpoint:
    """The endpoint declared under `operation_id`; KeyError when there is none."""
    return _BY_ID[operation_id]
