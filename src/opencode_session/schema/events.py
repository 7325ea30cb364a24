"""The event catalogue: durable Session events (stored as "<type>.<version>") and live-only events, plus the
envelope."""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, Literal, TypeVar

from pydantic import Field, create_model

from .base import Struct
from .common import LocationRef, Millis, ModelRef, SessionErrorInfo, Tokens
from .ids import EventID, MessageID, PermissionID, QuestionID, SessionID
from .message import ToolContent
from .permission import PermissionV2Reply, PermissionV2Request, PermissionV2Rule
from .prompt import Prompt
from .question import QuestionV2Answer, QuestionV2Request
from .session import RevertState, SessionV2Info

Delivery = Literal["steer", "queue"]
S = TypeVar("S", bound=Struct)


@dataclass(frozen=True)
class EventDef:
    type: str
    version: int
    data: builtins.type[Struct]  # `type` is the field above in here
    durable: bool
    public: bool = True

    @property
    def stored_type(self) -> str:
        return f"{self.type}.{self.version}"


DEFINITIONS: dict[str, EventDef] = {}
BY_STORED_TYPE: dict[str, EventDef] = {}
_BY_CLASS: dict[type[Struct], EventDef] = {}


def _register(type_: str, version: int, durable: bool, public: bool) -> Callable[[type[S]], type[S]]:
    def deco(cls: type[S]) -> type[S]:
        definition = EventDef(type_, version, cls, durable, public)
        DEFINITIONS[type_] = definition
        if durable:
            BY_STORED_TYPE[definition.stored_type] = definition
        _BY_CLASS[cls] = definition
        return cls

    return deco


def durable(type_: str, version: int = 1, public: bool = True) -> Callable[[type[S]], type[S]]:
    return _register(type_, version, True, public)


def live(type_: str) -> Callable[[type[S]], type[S]]:
    return _register(type_, 1, False, True)


def definition_of(data: Struct) -> EventDef:
    return definition_for(type(data))


def definition_for(cls: type[Struct]) -> EventDef:
    """The catalogue entry of an event data class."""
    return _BY_CLASS[cls]


class DurableRef(Struct):
    aggregateID: str
    seq: int = Field(ge=0)
    version: int = Field(ge=1)


class Event(Struct):
    """The wire envelope of every event; `durable` is present on durable events only."""

    id: EventID
    created: Millis
    metadata: dict[str, Any] | None = None
    type: str
    durable: DurableRef | None = None
    location: LocationRef | None = None
    data: dict[str, Any]


# --- session lifecycle ---------------------------------------------------------------------------


@durable("session.created", public=False)
class SessionCreated(Struct):
    sessionID: SessionID
    info: SessionV2Info


@durable("session.agent.selected")
class AgentSelected(Struct):
    sessionID: SessionID
    agent: str


@durable("session.model.selected")
class ModelSelected(Struct):
    sessionID: SessionID
    model: ModelRef
    previous: ModelRef | None = None


@durable("session.renamed")
class Renamed(Struct):
    sessionID: SessionID
    title: str


@durable("session.moved")
class Moved(Struct):
    sessionID: SessionID
    location: LocationRef
    subpath: str | None = None
    projectID: str | None = None  # the destination's project, when it is another one


@durable("session.forked")
class Forked(Struct):
    """The first event of a fork's own log: it creates the session (`info`, `parentID` set) and copies the parent's
    settled history up to and including message `from` (all of it without one), as the parent's projection held it
    when this event committed."""

    sessionID: SessionID
    parentID: SessionID
    from_: MessageID | None = Field(None, alias="from")
    info: SessionV2Info


# --- session management (issue 33: update, delete, import, the inbox) ---------------------------------


@durable("session.updated")
class Updated(Struct):
    """A client changed the session (`PATCH`): each field present replaces the session's own; an explicit title
    is never replaced by the automatic one."""

    sessionID: SessionID
    title: str | None = None
    metadata: dict[str, Any] | None = None
    permissions: list[PermissionV2Rule] | None = None


@durable("session.viewed")
class Viewed(Struct):
    """A viewer saw the session go idle at `idle` (epoch ms): other viewers need not tell their user of it again."""

    sessionID: SessionID
    idle: int = Field(ge=0)


@durable("session.deleted", version=2)
class Deleted(Struct):
    """The session is gone: its projection, pending input, entries and state leave the store, and so do its earlier
    events; this event alone stays in the log as its tombstone (other hosts and `/api/event` readers learn of it)."""

    sessionID: SessionID


@durable("session.imported", public=False)
class Imported(Struct):
    """The first event of an imported session: it creates the session (`info`) holding the exported transcript
    (`messages`, their wire form, in order); the session's own events come after it."""

    sessionID: SessionID
    info: SessionV2Info
    messages: list[dict[str, Any]]


@durable("session.input.cancelled")
class InputCancelled(Struct):
    """Pending input left the inbox before it was delivered: it will never execute."""

    sessionID: SessionID
    inputID: MessageID


@durable("session.input.steered")
class InputSteered(Struct):
    """Pending input now waits for the next Safe Step Boundary (steer) instead of the idle one."""

    sessionID: SessionID
    inputID: MessageID


@durable("session.input.queued")
class InputQueued(Struct):
    """Pending input now waits until the session is idle (queue) instead of the next boundary."""

    sessionID: SessionID
    inputID: MessageID


# --- revert ----------------------------------------------------------------------------------------


@durable("session.revert.staged")
class RevertStaged(Struct):
    """A revert was staged (or its boundary moved): the session shows it, its files are already restored."""

    sessionID: SessionID
    revert: RevertState


@durable("session.revert.cleared")
class RevertCleared(Struct):
    """The staged revert was dropped: its files were put back as the agent left them."""

    sessionID: SessionID


@durable("session.revert.committed")
class RevertCommitted(Struct):
    """History from message `to` on leaves the projection (the log keeps it); the files stay as staged and the
    instruction checkpoint is reset."""

    sessionID: SessionID
    to: MessageID


# --- input ---------------------------------------------------------------------------------------


class UserInput(Struct):
    type: Literal["user"] = "user"
    data: Prompt
    delivery: Delivery = "steer"


class SyntheticInputData(Struct):
    text: str
    description: str | None = None
    metadata: dict[str, Any] | None = None


class SyntheticInput(Struct):
    type: Literal["synthetic"] = "synthetic"
    data: SyntheticInputData
    delivery: Delivery = "steer"


AdmittedInput = UserInput | SyntheticInput


@durable("session.input.admitted")
class InputAdmitted(Struct):
    sessionID: SessionID
    inputID: MessageID
    input: AdmittedInput = Field(discriminator="type")


@durable("session.input.promoted")
class InputPromoted(Struct):
    sessionID: SessionID
    inputID: MessageID


# --- execution -----------------------------------------------------------------------------------


@durable("session.execution.started")
class ExecutionStarted(Struct):
    sessionID: SessionID


@durable("session.execution.succeeded")
class ExecutionSucceeded(Struct):
    sessionID: SessionID


@durable("session.execution.failed")
class ExecutionFailed(Struct):
    sessionID: SessionID
    error: SessionErrorInfo


@durable("session.execution.interrupted")
class ExecutionInterrupted(Struct):
    sessionID: SessionID
    reason: Literal["user", "shutdown", "superseded"]


# --- instructions and synthetic context ----------------------------------------------------------


@durable("session.instructions.updated")
class InstructionsUpdated(Struct):
    sessionID: SessionID
    text: str


@durable("session.hook.failed")
class HookFailed(Struct):
    """A user hook's handler could not answer (not found, timed out, exited other than 0 or 2): it decided nothing
    and the session went on."""

    sessionID: SessionID
    hook: str  # the event it ran for (`PreToolUse`, ...)
    handler: str  # `command <line>` or `http <url>`
    message: str


@durable("session.synthetic")
class Synthetic(Struct):
    sessionID: SessionID
    text: str
    description: str | None = None
    metadata: dict[str, Any] | None = None


@durable("session.shell.started")
class ShellStarted(Struct):
    """A user's shell command began in the session's Location: a `shell` message (id `messageID`) shows it."""

    sessionID: SessionID
    messageID: MessageID
    callID: str
    command: str


@durable("session.shell.ended")
class ShellEnded(Struct):
    """The shell command of `callID` ended: its merged stdout and stderr (with a note of a failing exit)."""

    sessionID: SessionID
    callID: str
    output: str


# --- steps ---------------------------------------------------------------------------------------


class StepEvent(Struct):
    """What every event of one Step carries: its session and its assistant message."""

    sessionID: SessionID
    assistantMessageID: MessageID


@durable("session.step.started")
class StepStarted(StepEvent):
    agent: str
    model: ModelRef
    snapshot: str | None = None


@durable("session.step.ended")
class StepEnded(StepEvent):
    finish: str
    cost: float = 0
    tokens: Tokens = Field(default_factory=Tokens)
    snapshot: str | None = None
    files: list[str] | None = None


@durable("session.step.failed")
class StepFailed(StepEvent):
    error: SessionErrorInfo
    cost: float | None = None
    tokens: Tokens | None = None
    snapshot: str | None = None
    files: list[str] | None = None


@durable("session.text.started")
class TextStarted(StepEvent):
    ordinal: int = Field(ge=0)


@live("session.text.delta")
class TextDelta(StepEvent):
    ordinal: int = Field(ge=0)
    delta: str


@durable("session.text.ended")
class TextEnded(StepEvent):
    ordinal: int = Field(ge=0)
    text: str


@durable("session.reasoning.started")
class ReasoningStarted(StepEvent):
    ordinal: int = Field(ge=0)
    state: dict[str, Any] | None = None


@live("session.reasoning.delta")
class ReasoningDelta(StepEvent):
    ordinal: int = Field(ge=0)
    delta: str


@durable("session.reasoning.ended")
class ReasoningEnded(StepEvent):
    ordinal: int = Field(ge=0)
    text: str
    state: dict[str, Any] | None = None


@durable("session.tool.input.started")
class ToolInputStarted(StepEvent):
    callID: str
    name: str


@live("session.tool.input.delta")
class ToolInputDelta(StepEvent):
    callID: str
    delta: str


@durable("session.tool.input.ended")
class ToolInputEnded(StepEvent):
    callID: str
    text: str


@durable("session.tool.called")
class ToolCalled(StepEvent):
    callID: str
    name: str
    input: dict[str, Any]
    executed: bool = False
    state: dict[str, Any] | None = None


@live("session.tool.progress")
class ToolProgress(StepEvent):
    """A running call's state so far (e.g. the latest output of a command); each one replaces the previous.
    Live only, as in OpenCode's later E2 catalogue: the settlement is the durable record."""

    callID: str
    structured: dict[str, Any] = Field(default_factory=dict)
    content: list[ToolContent] = Field(default_factory=list)


@durable("session.tool.success")
class ToolSuccess(StepEvent):
    callID: str
    structured: dict[str, Any] = Field(default_factory=dict)
    content: list[ToolContent] = Field(default_factory=list)
    outputPaths: list[str] | None = None
    result: Any = None
    executed: bool = False
    resultState: dict[str, Any] | None = None


@durable("session.tool.failed")
class ToolFailed(StepEvent):
    callID: str
    error: SessionErrorInfo
    result: Any = None
    executed: bool = False
    resultState: dict[str, Any] | None = None


class Todo(Struct):
    """One item of a session's todo list, as `todowrite` writes it."""

    content: str
    status: str  # pending, in_progress, completed or cancelled
    priority: str  # high, medium or low


@live("todo.updated")
class TodoUpdated(Struct):
    """A `todowrite` call replaced the session's todo list. Live only: the durable record is the call itself (its
    input and its `session.tool.success`), which replay and the messages already carry; like OpenCode's event it
    is outside the Session catalogue, so the log does not repeat it."""

    sessionID: SessionID
    todos: list[Todo]


@durable("session.retry.scheduled")
class RetryScheduled(StepEvent):
    attempt: int = Field(ge=1)
    at: Millis
    error: SessionErrorInfo


@live("session.usage.updated")
class UsageUpdated(Struct):
    sessionID: SessionID
    cost: float
    tokens: Tokens


# --- asking the user: pending requests live in memory, so these are live-only -------------------------


@live("permission.v2.asked")
class PermissionAsked(PermissionV2Request):
    pass


@live("permission.v2.replied")
class PermissionReplied(Struct):
    sessionID: SessionID
    requestID: PermissionID
    reply: PermissionV2Reply


@live("question.v2.asked")
class QuestionAsked(QuestionV2Request):
    pass


@live("question.v2.replied")
class QuestionReplied(Struct):
    sessionID: SessionID
    requestID: QuestionID
    answers: list[QuestionV2Answer]


@live("question.v2.rejected")
class QuestionRejected(Struct):
    sessionID: SessionID
    requestID: QuestionID
# --- compaction --------------------------------------------------------------------------------------

CompactionReason = Literal["auto", "manual"]


@durable("session.compaction.admitted")
class CompactionAdmitted(Struct):
    """A manual compaction barrier entered the pending input: later promotion waits until it ends or fails."""

    sessionID: SessionID
    inputID: MessageID


@durable("session.compaction.started")
class CompactionStarted(Struct):
    """A compaction message begins (`messageID` is the barrier's input ID for a manual one); `recent` is the
    serialized recent tail it will keep."""

    sessionID: SessionID
    messageID: MessageID
    reason: CompactionReason
    recent: str
    inputID: MessageID | None = None


@live("session.compaction.delta")
class CompactionDelta(Struct):
    sessionID: SessionID
    messageID: MessageID
    text: str


@durable("session.compaction.ended")
class CompactionEnded(Struct):
    """The summary is durable: active history now starts at this compaction message."""

    sessionID: SessionID
    messageID: MessageID
    reason: CompactionReason
    text: str
    recent: str
    inputID: MessageID | None = None


@durable("session.compaction.failed")
class CompactionFailed(Struct):
    """No summary: history is unchanged; a manual barrier is consumed all the same."""

    sessionID: SessionID
    messageID: MessageID | None = None
    reason: CompactionReason
    error: SessionErrorInfo
    inputID: MessageID | None = None


@durable("session.usage.recorded")
class UsageRecorded(Struct):
    """Usage of a model call that is not a Step (a compaction summary). Served in the log like every durable event
    after the session's creation, so its numbering has no holes (OpenCode keeps it internal, leaving a gap)."""

    sessionID: SessionID
    source: Literal["title", "compaction"]
    cost: float
    tokens: Tokens


# --- markers ---------------------------------------------------------------------------------------


class LogSynced(Struct):
    """The synchronization marker of a followed log: everything at or below `seq` has been delivered."""

    type: Literal["log.synced"] = "log.synced"
    aggregateID: str
    seq: int | None = None


class ServerConnected(Struct):
    id: EventID
    created: Millis
    type: Literal["server.connected"] = "server.connected"
    data: dict[str, Any] = Field(default_factory=dict)


class GlobalDisposed(Struct):
    """The instance stream's last frame when the server shuts down: the stream ends next, nothing more will come."""

    id: EventID
    created: Millis
    type: Literal["global.disposed"] = "global.disposed"
    data: dict[str, Any] = Field(default_factory=dict)


@dataclass
class EventRecord:
    """A committed or live event with typed data; `seq` is None for live-only events."""

    id: str
    created: Millis
    data: Struct
    aggregate_id: str
    seq: int | None = None
    location: LocationRef | None = None

    @property
    def sequence(self) -> int:
        """The durable sequence; a live-only event has none (ValueError)."""
        if self.seq is None:
            raise ValueError(f"the live-only event {self.type} has no sequence")
        return self.seq

    @property
    def definition(self) -> EventDef:
        return definition_of(self.data)

    @property
    def type(self) -> str:
        return self.definition.type

    def wire(self) -> dict[str, Any]:
        d = self.definition
        out: dict[str, Any] = {"id": self.id, "created": self.created, "type": d.type}
        if d.durable and self.seq is not None:
            out["durable"] = {"aggregateID": self.aggregate_id, "seq": self.seq, "version": d.version}
        if self.location is not None:
            out["location"] = self.location.wire()
        out["data"] = self.data.wire()
        return out


def _camel(type_: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in type_.replace("-", ".").split("."))


@cache
def envelope_model(type_: str) -> type[Struct]:
    """A typed envelope model for one event type, named after it (for OpenAPI and typed clients)."""
    d = DEFINITIONS[type_]
    fields: dict[str, Any] = {
        "id": (EventID, ...),
        "created": (Millis, ...),
        "metadata": (dict[str, Any] | None, None),
        "type": (Literal[d.type], ...),
        "location": (LocationRef | None, None),
        "data": (d.data, ...),
    }
    if d.durable:
        fields["durable"] = (DurableRef, ...)
    return create_model(_camel(d.type) + "Event", __base__=Struct, **fields)


def public_durable_types() -> list[str]:
    return [t for t, d in DEFINITIONS.items() if d.durable and d.public]
