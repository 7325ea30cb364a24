"""Projected Session messages: the union clients read from messages, message and context."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import Struct
from .common import Millis, ModelRef, SessionErrorInfo, Tokens
from .ids import MessageID, SessionID
from .prompt import PromptAgentAttachment, PromptFileAttachment


class CreatedTime(Struct):
    created: Millis


class CompletedTime(Struct):
    created: Millis
    completed: Millis | None = None


class _Message(Struct):
    id: MessageID
    metadata: dict[str, Any] | None = None
    time: CreatedTime


class SessionMessageUser(_Message):
    type: Literal["user"] = "user"
    text: str
    files: list[PromptFileAttachment] | None = None
    agents: list[PromptAgentAttachment] | None = None


class SessionMessageSynthetic(_Message):
    type: Literal["synthetic"] = "synthetic"
    sessionID: SessionID
    text: str
    description: str | None = None


class SessionMessageSystem(_Message):
    """A chronological Instruction Update shown to the model at its position in history."""

    type: Literal["system"] = "system"
    text: str


class SessionMessageAgentSwitched(_Message):
    type: Literal["agent-switched"] = "agent-switched"
    agent: str


class SessionMessageModelSwitched(_Message):
    type: Literal["model-switched"] = "model-switched"
    model: ModelRef
    previous: ModelRef | None = None


class SessionMessageShell(Struct):
    id: MessageID
    metadata: dict[str, Any] | None = None
    time: CompletedTime
    type: Literal["shell"] = "shell"
    callID: str
    command: str
    output: str


class SessionMessageCompaction(_Message):
    type: Literal["compaction"] = "compaction"
    reason: Literal["auto", "manual"]
    status: Literal["running", "completed", "failed"] | None = None
    summary: str
    recent: str


class ToolTextContent(Struct):
    type: Literal["text"] = "text"
    text: str


class ToolFileContent(Struct):
    type: Literal["file"] = "file"
    uri: str
    mime: str
    name: str | None = None


ToolContent = Annotated[ToolTextContent | ToolFileContent, Field(discriminator="type")]


class ToolStateStreaming(Struct):
    status: Literal["streaming"] = "streaming"
    input: str = ""


class ToolStateRunning(Struct):
    status: Literal["running"] = "running"
    input: dict[str, Any]
    structured: dict[str, Any] = Field(default_factory=dict)
    content: list[ToolContent] = Field(default_factory=list)


class ToolStateCompleted(Struct):
    status: Literal["completed"] = "completed"
    input: dict[str, Any]
    content: list[ToolContent]
    structured: dict[str, Any] = Field(default_factory=dict)
    outputPaths: list[str] | None = None
    result: Any = None


class ToolStateError(Struct):
    status: Literal["error"] = "error"
    input: dict[str, Any]
    content: list[ToolContent] = Field(default_factory=list)
    structured: dict[str, Any] = Field(default_factory=dict)
    error: SessionErrorInfo
    result: Any = None


ToolState = Annotated[
    ToolStateStreaming | ToolStateRunning | ToolStateCompleted | ToolStateError, Field(discriminator="status")
]


class ToolProvider(Struct):
    executed: bool = False
    metadata: dict[str, Any] | None = None
    resultMetadata: dict[str, Any] | None = None


class ToolTime(Struct):
    created: Millis
    ran: Millis | None = None
    completed: Millis | None = None


class SessionMessageAssistantText(Struct):
    type: Literal["text"] = "text"
    id: str
    text: str


class SessionMessageAssistantReasoning(Struct):
    type: Literal["reasoning"] = "reasoning"
    id: str
    text: str
    providerMetadata: dict[str, Any] | None = None
    time: CompletedTime | None = None


class SessionMessageAssistantTool(Struct):
    type: Literal["tool"] = "tool"
    id: str
    name: str
    provider: ToolProvider | None = None
    state: ToolState
    time: ToolTime


AssistantContent = Annotated[
    SessionMessageAssistantText | SessionMessageAssistantReasoning | SessionMessageAssistantTool,
    Field(discriminator="type"),
]


class RetryState(Struct):
    attempt: int
    at: Millis
    error: SessionErrorInfo


class AssistantSnapshot(Struct):
    start: str | None = None
    end: str | None = None
    files: list[str] | None = None


class SessionMessageAssistant(Struct):
    id: MessageID
    metadata: dict[str, Any] | None = None
    time: CompletedTime
    type: Literal["assistant"] = "assistant"
    agent: str
    model: ModelRef
    content: list[AssistantContent] = Field(default_factory=list)
    snapshot: AssistantSnapshot | None = None
    finish: str | None = None
    cost: float | None = None
    tokens: Tokens | None = None
    error: SessionErrorInfo | None = None
    retry: RetryState | None = None


SessionMessage = Annotated[
    SessionMessageAgentSwitched
    | SessionMessageModelSwitched
    | SessionMessageUser
    | SessionMessageSynthetic
    | SessionMessageSystem
    | SessionMessageShell
    | SessionMessageAssistant
    | SessionMessageCompaction,
    Field(discriminator="type"),
]
