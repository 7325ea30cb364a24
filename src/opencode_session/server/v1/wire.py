"""V1's wire shapes as types: the request bodies the V1 routes read (what OpenCode's clients send; fields they send
that ocs has no use for are ignored) and the answers the routes give (`routes.py` declares one per route, and
`tests/api/test_v1_contract.py` holds each route's answers to it). The routes build their answers as plain JSON
values, so the bytes stay OpenCode's; these types say what those values are."""

from __future__ import annotations

from typing import Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, field_validator
from typing_extensions import TypedDict

from ...schema.ids import well_formed
from ...schema.question import QuestionV2Request

# ---- bodies


class V1Body(BaseModel):
    """A body OpenCode's clients send: what ocs reads is typed, anything else they add is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


class V1Rule(V1Body):
    permission: str
    pattern: str
    action: Literal["allow", "deny", "ask"]


class SessionCreateBody(V1Body):
    """`POST /session`. `permission` rules are the session's own: `opencode run` denies the tools that would wait on a
    person (`question`), which takes them out of what the model is offered."""

    title: str | None = None
    parentID: str | None = None
    permission: list[V1Rule] | None = None


class SessionUpdateBody(V1Body):
    """`PATCH /session/{sessionID}`."""

    title: str | None = None


class SessionForkBody(V1Body):
    """`POST /session/{sessionID}/fork`: fork up to this message (all of it without one)."""

    messageID: str | None = None


class V1Part(V1Body):
    """A prompt part; ocs reads the text of `text` parts."""

    type: str
    text: str | None = None


class V1ModelChoice(V1Body):
    providerID: str
    modelID: str


class PromptBody(V1Body):
    """`POST /session/{sessionID}/message` and `/prompt_async`. `messageID` is the client's own ID for the prompt
    (the web app shows its message at once under it)."""

    parts: list[V1Part] = Field(min_length=1)
    model: V1ModelChoice | None = None
    variant: str | None = None
    agent: str | None = None
    messageID: str | None = None

    @field_validator("messageID")
    @classmethod
    def _message_id(cls, value: str | None) -> str | None:
        if value is not None and not well_formed("msg", value):
            raise ValueError("not a message ID")
        return value


class PermissionReplyBody(V1Body):
    """`POST /permission/{requestID}/reply`."""

    reply: Literal["once", "always", "reject"]
    message: str | None = None


class QuestionReplyBody(V1Body):
    """`POST /question/{requestID}/reply`: one list of chosen labels per question."""

    answers: list[list[str]]


# ---- answers


class _Closed(TypedDict):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]


class Cache(_Closed):
    read: float
    write: float


class Tokens(_Closed):
    input: float
    output: float
    reasoning: float
    cache: Cache


class SessionTime(_Closed):
    created: int
    updated: int
    archived: NotRequired[int]


class SessionModel(_Closed):
    id: str
    providerID: str
    variant: str


class Rule(_Closed):
    permission: str
    pattern: str
    action: str


class Session(_Closed):
    id: str
    slug: str
    projectID: str
    directory: str
    path: str
    title: str
    version: str
    cost: float
    tokens: Tokens
    time: SessionTime
    parentID: NotRequired[str]
    agent: NotRequired[str]
    model: NotRequired[SessionModel]
    permission: NotRequired[list[Rule]]


class MessageModel(_Closed):
    providerID: str
    modelID: str


class Created(_Closed):
    created: int


class UserInfo(_Closed):
    id: str
    sessionID: str
    role: Literal["user"]
    time: Created
    agent: str
    model: NotRequired[MessageModel]


class AssistantTime(_Closed):
    created: int
    completed: NotRequired[int]


class WorkPath(_Closed):
    cwd: str
    root: str


class ErrorData(_Closed):
    message: str


class MessageError(_Closed):
    name: str
    data: ErrorData


class AssistantInfo(_Closed):
    id: str
    sessionID: str
    role: Literal["assistant"]
    mode: str
    agent: str
    path: WorkPath
    cost: float
    tokens: Tokens
    modelID: str
    providerID: str
    time: AssistantTime
    parentID: NotRequired[str]
    finish: NotRequired[str]
    error: NotRequired[MessageError]


class Span(_Closed):
    start: int
    end: NotRequired[int]


class _Part(_Closed):
    id: str
    sessionID: str
    messageID: str


class StepStartPart(_Part):
    type: Literal["step-start"]


class TextPart(_Part):
    type: Literal["text"]
    text: str
    time: NotRequired[Span]


class ReasoningPart(_Part):
    type: Literal["reasoning"]
    text: str
    metadata: dict[str, Any]
    time: Span


class ToolState(_Closed):
    status: Literal["pending", "running", "completed", "error"]
    input: dict[str, Any]
    raw: NotRequired[str]
    time: NotRequired[Span]
    title: NotRequired[str]
    output: NotRequired[str]
    error: NotRequired[str]
    metadata: NotRequired[dict[str, Any]]


class ToolPart(_Part):
    type: Literal["tool"]
    callID: str
    tool: str
    state: ToolState


class StepFinishPart(_Part):
    type: Literal["step-finish"]
    reason: str
    cost: float
    tokens: Tokens


Part = StepStartPart | TextPart | ReasoningPart | ToolPart | StepFinishPart


class Message(_Closed):
    info: UserInfo | AssistantInfo
    parts: list[Part]


class Busy(_Closed):
    type: Literal["busy"]


class Health(_Closed):
    healthy: bool
    version: str


class ProviderName(_Closed):
    name: str


class Config(_Closed):
    """A V1 `Config`: the providers by name only (their options hold credentials, which never leave the server)."""

    agent: dict[str, Any]
    command: dict[str, Any]
    mode: dict[str, Any]
    plugin: list[str]
    provider: dict[str, ProviderName]
    model: NotRequired[str]
    small_model: NotRequired[str]
    default_agent: NotRequired[str]


class Provider(_Closed):
    id: str
    name: str
    source: str
    env: list[str]
    options: dict[str, Any]
    models: dict[str, dict[str, Any]]


class ConfigProviders(_Closed):
    providers: list[Provider]
    default: dict[str, str]


class ProviderList(_Closed):
    all: list[Provider]
    default: dict[str, str]
    connected: list[str]


class Paths(_Closed):
    home: str
    state: str
    config: str
    worktree: str
    directory: str


class ProjectCurrent(_Closed):
    id: str
    worktree: str
    time: Created


class Project(_Closed):
    id: str
    worktree: str
    time: Created
    sandboxes: list[Any]
    vcs: NotRequired[Literal["git"]]


class Agent(_Closed):
    name: str
    description: str | None
    mode: str
    hidden: bool | None
    native: bool
    permission: list[Any]
    options: dict[str, Any]


class Permission(_Closed):
    id: str
    sessionID: str
    permission: str
    patterns: list[str]
    always: list[str]
    metadata: dict[str, Any]


class Command(_Closed):
    name: str
    template: str
    description: NotRequired[str]
    agent: NotRequired[str]
    model: NotRequired[dict[str, Any]]
    subtask: NotRequired[bool]
    source: Literal["command"]
    hints: list[str]


class McpStatus(_Closed):
    status: str
    error: NotRequired[str]


class Branch(TypedDict, total=False):
    __pydantic_config__ = ConfigDict(extra="forbid")  # type: ignore[misc]
    branch: str
    default_branch: None


class Capabilities(_Closed):
    backgroundSubagents: bool


class Console(_Closed):
    consoleManagedProviders: list[Any]
    switchableOrgCount: int


Question = QuestionV2Request
