"""The provider-neutral LLM model: one request per Step (system text, history, tools, generation controls and
Model Request Options), the events a provider stream yields, token usage, and the `Provider` interface every protocol
adapter implements."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeAlias, runtime_checkable

# ---------------------------------------------------------------------------------------------
# The resolved model a request targets (resolution itself lives in `catalog`).


@dataclass(frozen=True)
class ModelCost:
    """USD per million tokens; all zero when the catalog knows no price."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


WireProtocol: TypeAlias = str
"""The name a wire protocol's adapter is registered under (`providers.register_adapter`); the built-ins are `chat`
(OpenAI Chat Completions), `responses` (OpenAI Responses) and `messages` (Anthropic Messages)."""


@dataclass(frozen=True)
class Capabilities:
    """What a model accepts and does. `input` lists modalities ("text", "image", "pdf", ...); tools read `images`
    to decide whether an image may be attached."""

    tools: bool = True
    reasoning: bool = False
    attachments: bool = False
    temperature: bool = True  # accepts a sampling temperature (reasoning models often refuse one)
    input: tuple[str, ...] = ("text",)
    output: tuple[str, ...] = ("text",)

    @property
    def images(self) -> bool:
        return "image" in self.input


@dataclass(frozen=True)
class GenerationControls:
    """Provider-neutral sampling and output controls; None leaves the provider's default."""

    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_output_tokens: int | None = None
    stop: tuple[str, ...] | None = None
    seed: int | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None

    def over(self, base: GenerationControls) -> GenerationControls:
        """These controls, falling back to `base` for every one left unset."""
        return GenerationControls(**{
            name: mine if mine is not None else getattr(base, name)
            for name, mine in ((f, getattr(self, f)) for f in self.__dataclass_fields__)
        })


@dataclass(frozen=True)
class ResolvedModel:
    """Everything needed to call one model: where, with which credentials, and its limits and prices."""

    provider_id: str
    model_id: str
    base_url: str
    api_key: str | None = field(default=None, repr=False)  # never printed: reprs end up in logs
    headers: Mapping[str, str] = field(default_factory=dict)
    npm: str | None = None
    context_limit: int | None = None
    output_limit: int | None = None
    input_limit: int | None = None
    cost: ModelCost | None = None
    # Name sent on the wire; differs from `model_id` when a config entry aliases a server model.
    api_model_id: str | None = None
    # Seconds; None means the adapter default, 0 means no timeout (OpenCode's `timeout: false`).
    timeout: float | None = None
    protocol: WireProtocol = "chat"
    capabilities: Capabilities = field(default_factory=Capabilities)
    # Model Request Options (provider-semantic, the active variant applied), encoded only by the adapter
    options: Mapping[str, Any] = field(default_factory=dict)
    controls: GenerationControls = field(default_factory=GenerationControls)
    # compatibility body fields: sent as they are, whatever the protocol
    body: Mapping[str, Any] = field(default_factory=dict)
    variant: str | None = None

    @property
    def wire_model(self) -> str:
        return self.api_model_id or self.model_id


# ---------------------------------------------------------------------------------------------
# Request.


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    parameters: dict[str, Any]


@dataclass(frozen=True)
class TextPart:
    text: str


@dataclass(frozen=True)
class FilePart:
    """An attachment. `uri` is a `data:` URI, a `file://` URI (or plain path) or a remote URL. A local file's bytes
    are loaded into `data` under the Location authority before a request reaches an adapter; adapters never read
    the disk."""

    uri: str
    mime: str
    name: str | None = None
    data: bytes | None = field(default=None, repr=False)


@dataclass(frozen=True)
class ReasoningPart:
    text: str
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolCallPart:
    call_id: str
    name: str
    input: dict[str, Any]
    metadata: dict[str, Any] | None = None
    # a hosted call: the provider ran it, and its result travels inline with the call
    provider_executed: bool = False
    result: Any = None


@dataclass(frozen=True)
class SystemUpdate:
    """A chronological Instruction Update at its position in history (not part of the baseline)."""

    text: str


@dataclass(frozen=True)
class UserMessage:
    """`tool_files`: the images of the tool results just before it, repeated for a protocol whose tool results
    cannot carry images (Chat Completions); a protocol whose can (each ToolResultMessage's `files`) skips it."""

    parts: list[TextPart | FilePart]
    tool_files: bool = False


@dataclass(frozen=True)
class AssistantMessage:
    parts: list[TextPart | ReasoningPart | ToolCallPart]


@dataclass(frozen=True)
class ToolResultMessage:
    """A local call's result: its text, and `files` (images, as `data:` URIs) for a model that accepts them."""

    call_id: str
    name: str
    text: str
    is_error: bool = False
    files: tuple[FilePart, ...] = ()


LLMMessage: TypeAlias = SystemUpdate | UserMessage | AssistantMessage | ToolResultMessage
ToolChoice: TypeAlias = Literal["auto", "none"]


@dataclass(frozen=True)
class LLMRequest:
    model: ResolvedModel
    system: list[str]
    messages: list[LLMMessage]
    tools: list[ToolSpec] = field(default_factory=list)
    tool_choice: ToolChoice = "auto"
    prompt_cache_key: str | None = None
    controls: GenerationControls = field(default_factory=GenerationControls)
    options: Mapping[str, Any] = field(default_factory=dict)  # Model Request Options for the adapter to encode


# ---------------------------------------------------------------------------------------------
# Stream events.


@dataclass(frozen=True)
class TextStart:
    id: str


@dataclass(frozen=True)
class TextDelta:
    id: str
    delta: str


@dataclass(frozen=True)
class TextEnd:
    id: str


@dataclass(frozen=True)
class ReasoningStart:
    id: str


@dataclass(frozen=True)
class ReasoningDelta:
    id: str
    delta: str


@dataclass(frozen=True)
class ReasoningEnd:
    id: str
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class ToolInputStart:
    call_id: str
    name: str


@dataclass(frozen=True)
class ToolInputDelta:
    call_id: str
    delta: str


@dataclass(frozen=True)
class ToolInputEnd:
    call_id: str


@dataclass(frozen=True)
class ToolCall:
    """A complete tool call. When the provider's arguments were not a JSON object, `input` is `{}` and
    `input_error` says why, so the runner can record the call and fail it durably instead of losing it."""

    call_id: str
    name: str
    input: dict[str, Any]
    provider_executed: bool = False
    input_error: str | None = None
    raw_input: str | None = None
    metadata: dict[str, Any] | None = None  # Native Continuation Metadata (a provider's own item ID, say)


@dataclass(frozen=True)
class ToolResult:
    """The result of a provider-executed (hosted) tool call, as the provider reported it. `metadata` is the
    Native Continuation Metadata needed to replay the result to the same model."""

    call_id: str
    name: str
    result: Any
    text: str = ""
    is_error: bool = False
    metadata: dict[str, Any] | None = None


FinishReason: TypeAlias = Literal["stop", "length", "tool-calls", "content-filter", "other"]


@dataclass(frozen=True)
class Usage:
    """Token counts for one provider call. `input` excludes cached (read and written) prompt tokens;
    `output` excludes reasoning tokens. All are clamped to >= 0."""

    input: int = 0
    output: int = 0
    reasoning: int = 0
    cache_read: int = 0
    cache_write: int = 0

    def __post_init__(self) -> None:
        for name in ("input", "output", "reasoning", "cache_read", "cache_write"):
            value = getattr(self, name)
            object.__setattr__(self, name, max(0, int(value or 0)))


@dataclass(frozen=True)
class Finish:
    reason: FinishReason
    usage: Usage = field(default_factory=Usage)


StreamEvent: TypeAlias = (
    TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolInputStart
    | ToolInputDelta
    | ToolInputEnd
    | ToolCall
    | ToolResult
    | Finish
)


class Provider(Protocol):
    """One protocol adapter. `stream` makes exactly one provider call (no retries: the runtime owns them)
    and raises `ProviderError` subclasses from the iterator."""

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]: ...


@runtime_checkable
class EncodingProvider(Protocol):
    """An adapter that sends one JSON body per call and can encode it first: the caller keeps the exact bytes
    (what a Step records of its request) and hands them to `stream`."""

    def encode_request(self, request: LLMRequest) -> bytes: ...

    def stream(self, request: LLMRequest, body: bytes | None = None) -> AsyncIterator[StreamEvent]: ...


__all__ = [
    "AssistantMessage",
    "EncodingProvider",
    "Capabilities",
    "GenerationControls",
    "WireProtocol",
    "ToolResult",
    "FilePart",
    "Finish",
    "FinishReason",
    "LLMMessage",
    "LLMRequest",
    "ModelCost",
    "Provider",
    "ReasoningDelta",
    "ReasoningEnd",
    "ReasoningPart",
    "ReasoningStart",
    "ResolvedModel",
    "StreamEvent",
    "SystemUpdate",
    "TextDelta",
    "TextEnd",
    "TextPart",
    "TextStart",
    "ToolCall",
    "ToolCallPart",
    "ToolChoice",
    "ToolInputDelta",
    "ToolInputEnd",
    "ToolInputStart",
    "ToolResultMessage",
    "ToolSpec",
    "Usage",
    "UserMessage",
]
