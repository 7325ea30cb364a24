"""Projected messages as the plain JSON the store keeps: TypedDicts (free at run time) mirroring the wire form of
`message.py`'s models, for the code that reads and changes messages as data (the projector, history, lowering, the
runner). A key is NotRequired exactly where the model's field may be None (omitted on the wire); a test keeps both
files in step, so a renamed field fails the type checker instead of a later read."""

# No postponed annotations here: a TypedDict reads NotRequired when its class is created.
from typing import Any, Literal, NotRequired, TypedDict

# --- shared records (common.py, prompt.py) ---------------------------------------------------------------------


class ModelRefData(TypedDict):
    id: str
    providerID: str
    variant: NotRequired[str]


class SessionErrorInfoData(TypedDict):
    type: str
    message: str
    status: NotRequired[int]


class TokenCacheData(TypedDict):
    read: int
    write: int


class TokensData(TypedDict):
    input: int
    output: int
    reasoning: int
    cache: TokenCacheData


class PromptSourceData(TypedDict):
    start: float
    end: float
    text: str


class PromptFileAttachmentData(TypedDict):
    uri: str
    mime: str
    name: NotRequired[str]
    description: NotRequired[str]
    source: NotRequired[PromptSourceData]


class PromptAgentAttachmentData(TypedDict):
    name: str
    source: NotRequired[PromptSourceData]


# --- times -----------------------------------------------------------------------------------------------------


class CreatedTimeData(TypedDict):
    created: int


class CompletedTimeData(TypedDict):
    created: int
    completed: NotRequired[int]


# --- non-assistant messages ------------------------------------------------------------------------------------


class SessionMessageUserData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["user"]
    text: str
    files: NotRequired[list[PromptFileAttachmentData]]
    agents: NotRequired[list[PromptAgentAttachmentData]]


class SessionMessageSyntheticData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["synthetic"]
    sessionID: str
    text: str
    description: NotRequired[str]


class SessionMessageSystemData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["system"]
    text: str


class SessionMessageAgentSwitchedData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["agent-switched"]
    agent: str


class SessionMessageModelSwitchedData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["model-switched"]
    model: ModelRefData
    previous: NotRequired[ModelRefData]


class SessionMessageShellData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CompletedTimeData
    type: Literal["shell"]
    callID: str
    command: str
    output: str


class SessionMessageCompactionData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CreatedTimeData
    type: Literal["compaction"]
    reason: Literal["auto", "manual"]
    status: NotRequired[Literal["running", "completed", "failed"]]
    summary: str
    recent: str


# --- assistant content -----------------------------------------------------------------------------------------


class ToolTextContentData(TypedDict):
    type: Literal["text"]
    text: str


class ToolFileContentData(TypedDict):
    type: Literal["file"]
    uri: str
    mime: str
    name: NotRequired[str]


ToolContentData = ToolTextContentData | ToolFileContentData


class ToolStateStreamingData(TypedDict):
    status: Literal["streaming"]
    input: str


class ToolStateRunningData(TypedDict):
    status: Literal["running"]
    input: dict[str, Any]
    structured: dict[str, Any]
    content: list[ToolContentData]


class ToolStateCompletedData(TypedDict):
    status: Literal["completed"]
    input: dict[str, Any]
    content: list[ToolContentData]
    structured: dict[str, Any]
    outputPaths: NotRequired[list[str]]
    result: NotRequired[Any]


class ToolStateErrorData(TypedDict):
    status: Literal["error"]
    input: dict[str, Any]
    content: list[ToolContentData]
    structured: dict[str, Any]
    error: SessionErrorInfoData
    result: NotRequired[Any]


ToolStateData = ToolStateStreamingData | ToolStateRunningData | ToolStateCompletedData | ToolStateErrorData


class ToolProviderData(TypedDict):
    executed: bool
    metadata: NotRequired[dict[str, Any]]
    resultMetadata: NotRequired[dict[str, Any]]


class ToolTimeData(TypedDict):
    created: int
    ran: NotRequired[int]
    completed: NotRequired[int]


class SessionMessageAssistantTextData(TypedDict):
    type: Literal["text"]
    id: str
    text: str


class SessionMessageAssistantReasoningData(TypedDict):
    type: Literal["reasoning"]
    id: str
    text: str
    providerMetadata: NotRequired[dict[str, Any]]
    time: NotRequired[CompletedTimeData]


class SessionMessageAssistantToolData(TypedDict):
    type: Literal["tool"]
    id: str
    name: str
    provider: NotRequired[ToolProviderData]
    state: ToolStateData
    time: ToolTimeData


AssistantContentData = (
    SessionMessageAssistantTextData | SessionMessageAssistantReasoningData | SessionMessageAssistantToolData
)


class RetryStateData(TypedDict):
    attempt: int
    at: int
    error: SessionErrorInfoData


class AssistantSnapshotData(TypedDict):
    start: NotRequired[str]
    end: NotRequired[str]
    files: NotRequired[list[str]]


class SessionMessageAssistantData(TypedDict):
    id: str
    metadata: NotRequired[dict[str, Any]]
    time: CompletedTimeData
    type: Literal["assistant"]
    agent: str
    model: ModelRefData
    content: list[AssistantContentData]
    snapshot: NotRequired[AssistantSnapshotData]
    finish: NotRequired[str]
    cost: NotRequired[float]
    tokens: NotRequired[TokensData]
    error: NotRequired[SessionErrorInfoData]
    retry: NotRequired[RetryStateData]


SessionMessageData = (
    SessionMessageAgentSwitchedData
    | SessionMessageModelSwitchedData
    | SessionMessageUserData
    | SessionMessageSyntheticData
    | SessionMessageSystemData
    | SessionMessageShellData
    | SessionMessageAssistantData
    | SessionMessageCompactionData
)
