"""The store's operations as a backend must provide them: per concern (events, sessions, messages, pending input,
instruction state, Step context records, saved permissions, suspension marks, continuation claims, session leases)
a read protocol and a write protocol, plus the plain values they exchange. Core speaks only these; `sqlite/` (and
any other backend) implements them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from .keyset import KeysetPage, PageRequest

if TYPE_CHECKING:  # names of the protocols' signatures only: importing the plain values loads no schema
    from ...schema.common import LocationRef
    from ...schema.events import EventRecord
    from ...schema.message import SessionMessage
    from ...schema.message_data import (
        SessionMessageAssistantData,
        SessionMessageCompactionData,
        SessionMessageData,
        SessionMessageShellData,
    )
    from ...schema.permission import PermissionSavedInfo
    from ...schema.session import SessionV2Info

# --- values ------------------------------------------------------------------------------------------------


# What promotion takes from the inbox: user prompts and synthetic input (the compaction barrier is neither).
PROMOTABLE = ("user", "synthetic")
# The manual compaction barrier: at most one per session (admission coalesces), consumed when compaction settles.
BARRIER = "compaction"


class PendingInput(NamedTuple):
    """One admitted input waiting in a session's inbox; `data` is the admitted input's wire form."""

    id: str
    session_id: str
    type: str
    data: dict[str, Any]
    delivery: str | None
    admitted_seq: int
    time_created: int


class Placement(NamedTuple):
    """Which session holds a message, its type and sequence."""

    session_id: str
    type: str
    seq: int


class HistoryRow(NamedTuple):
    """A message of the active history window as stored: its JSON text undecoded, with its revision."""

    id: str
    seq: int
    rev: int
    type: str
    data: str
    updated: int


class Checkpoint(NamedTuple):
    """A session's InstructionCheckpoint: the baseline text, the Applied Instructions record (JSON text) and the
    sequence the baseline was taken at."""

    baseline: str
    applied: str
    baseline_seq: int


class StepContextRow(NamedTuple):
    """One Step's stored context record: the change from its base record (None: a full record), as JSON text."""

    message_id: str
    base_id: str | None
    data: str


class Lease(NamedTuple):
    """Who executes a session: the owning host, the epoch (the fencing token: it moves on whenever the lease changes
    hands) and when the lease expires unless renewed (epoch milliseconds)."""

    session_id: str
    owner: str
    epoch: int
    expires: int


@dataclass(frozen=True)
class SessionFilter:
    """Which sessions a list shows; None leaves a field unfiltered. `directory` is the stored (resolved) form."""

    search: str | None = None
    directory: str | None = None
    project: str | None = None
    workspace: str | None = None
    subpath: str | None = None
    parent: str | None = None  # a parent session's ID: its children; "null": root sessions only


@dataclass(frozen=True)
class StatsFilter:
    """Which messages usage statistics count: created in [start, end) (epoch ms), of sessions in `project` (None: any).
    `shifts` turns a time into local time for per-day counts: each (until, offset) applies to times before `until`,
    the first that does wins; `offset` (ms) applies after the last."""

    start: int
    end: int
    project: str | None = None
    shifts: tuple[tuple[int, int], ...] = ()
    offset: int = 0


class UsageRow(NamedTuple):
    """Counted usage of one group (`key`: its grouping values, empty for the total; a day is a day number since the
    epoch, in local time)."""

    key: tuple[Any, ...]
    sessions: int
    prompts: int
    steps: int
    failed: int
    input: int
    output: int
    reasoning: int
    cache_read: int
    cache_write: int
    cost: float


# --- reads -------------------------------------------------------------------------------------------------


class EventReads(Protocol):
    def latest_seq(self, aggregate_id: str) -> int:
        """The newest sequence of `aggregate_id`; -1 before its first event."""
        ...

    def after(self, aggregate_id: str, seq: int, limit: int) -> list[EventRecord]:
        """At most `limit` events of `aggregate_id` after `seq` (exclusive), in sequence order."""
        ...

    def of_types(self, aggregate_id: str, types: tuple[str, ...], after: int, through: int) -> list[EventRecord]:
        """The aggregate's events of these stored types with `after` < seq <= `through`, in order."""
        ...

    def latest_of_types(self, aggregate_id: str, types: tuple[str, ...]) -> EventRecord | None:
        """The aggregate's newest event of these stored types, if any."""
        ...

    def from_position(self, position: int, limit: int) -> list[tuple[int, EventRecord]]:
        """At most `limit` events committed after store position `position`, oldest first, with their positions.
        Positions are commit-ordered: an event committed later has a larger position, whoever wrote it."""
        ...

    def every(self) -> Iterator[EventRecord]:
        """Every stored event in commit order (replay: a fork copies its parent's projection as it was when the
        fork committed)."""
        ...

    def admission_of(self, session_id: str, input_id: str) -> EventRecord | None:
        """The `session.input.admitted` event that admitted `input_id` into `session_id`, if any."""
        ...


class SessionReads(Protocol):
    def load_data(self, session_id: str) -> dict[str, Any] | None:
        """The stored wire record of a session, for a projection to change and save."""
        ...

    def location(self, session_id: str) -> LocationRef | None: ...

    def load(self, session_id: str) -> SessionV2Info | None: ...

    def page(self, where: SessionFilter, request: PageRequest) -> KeysetPage[SessionV2Info]:
        """One page of sessions in creation order; the keys are (time created, creation order)."""
        ...

    def suspended(self, session_ids: list[str]) -> set[str]:
        """Those of the sessions a graceful shutdown interrupted that no host has resumed yet."""
        ...


class MessageReads(Protocol):
    def load(self, message_id: str) -> SessionMessageData | None:
        """The stored JSON of a message, for a projection to change and save."""
        ...

    def find(self, session_id: str, message_id: str) -> SessionMessage | None:
        """A message of `session_id`; None when absent or owned by another session."""
        ...

    def placement(self, message_id: str) -> Placement | None: ...

    def page(self, session_id: str, request: PageRequest) -> KeysetPage[SessionMessage]:
        """One page of a session's messages in sequence order; the key is the sequence."""
        ...

    def open_assistants(self, session_id: str, *,
                        excluding: str | None = None) -> list[SessionMessageAssistantData]:
        """Assistant messages not yet completed (an interrupted or running Step), in sequence order."""
        ...

    def retrying_assistants(self, session_id: str) -> list[SessionMessageAssistantData]:
        """Assistant messages that show a scheduled retry."""
        ...

    def first_user_text(self, session_id: str) -> str | None: ...

    def latest_completed_compaction(self, session_id: str) -> int | None:
        """The sequence of the session's latest completed compaction message, if any."""
        ...

    def running_compaction(self, session_id: str, message_id: str) -> SessionMessageCompactionData | None: ...

    def shell(self, session_id: str, call_id: str) -> SessionMessageShellData | None:
        """The session's `shell` message of the command `call_id`, for its end to complete."""
        ...

    def injected_instruction_paths(self, session_id: str) -> set[str]:
        """The nearby instruction files already shown to the model as synthetic messages."""
        ...

    def window(self, session_id: str, after: int, updates_through: int) -> list[HistoryRow]:
        """Messages after sequence `after`, except Instruction Updates at or before `updates_through` (folded into
        the baseline), in sequence order."""
        ...

    def compaction_trigger(self, session_id: str, compaction_seq: int) -> HistoryRow | None:
        """The input an automatic compaction at `compaction_seq` was made for: the newest user message before it,
        unless a completed manual compaction lies between the two (that message had its answer before then)."""
        ...

    def removed(self, session_id: str) -> int:
        """How many of the session's messages have ever been removed."""
        ...

    def touched_since(self, session_id: str, watermark: int) -> list[HistoryRow]:
        """Every message of the session created or updated at or after `watermark`, in sequence order."""
        ...


class PendingReads(Protocol):
    def get(self, input_id: str) -> PendingInput | None: ...

    def user_inputs(self, session_id: str) -> list[PendingInput]:
        """The session's pending user prompts in admission order."""
        ...

    def promotable(self, session_id: str) -> list[tuple[str, str | None]]:
        """(input ID, delivery) of every input promotion may take, in admission order."""
        ...

    def any_promotable(self, session_id: str) -> bool: ...

    def barrier(self, session_id: str) -> str | None:
        """The input ID of the session's pending manual compaction barrier, if one is pending."""
        ...

    def unowned(self, admitted_before: int, limit: int = 100) -> list[str]:
        """Sessions with promotable input admitted before `admitted_before` whose lease no host holds (on a
        shared database: the host that admitted it died before it woke the session)."""
        ...

    def input_recorded(self, input_id: str) -> bool:
        """Whether an input with this ID was admitted, still pending or already promoted into a message."""
        ...

    def first_trace(self, session_id: str) -> str | None:
        """The W3C traceparent of the session's oldest pending input admitted with one (tracing)."""
        ...


class InstructionReads(Protocol):
    def checkpoint(self, session_id: str) -> Checkpoint | None: ...

    def baseline_seq(self, session_id: str) -> int:
        """The sequence the baseline was taken at; -1 without a checkpoint."""
        ...

    def entries(self, session_id: str) -> list[tuple[str, Any]]:
        """The session's InstructionEntry values by key, in key order."""
        ...


class PermissionReads(Protocol):
    def listed(self, project_id: str | None = None) -> list[PermissionSavedInfo]:
        """Saved permissions, oldest first; all projects' when `project_id` is None."""
        ...


class LeaseReads(Protocol):
    def holder(self, session_id: str) -> Lease | None:
        """The session's lease while some host holds it (expired or not); None when nobody does."""
        ...

    def holds(self, lease: Lease) -> bool:
        """Whether `lease` is still the session's lease (same owner and epoch): the fencing check."""
        ...

    def expired(self, now: int, limit: int = 100) -> list[Lease]:
        """Leases still held whose expiry has passed (their owner stopped renewing), oldest expiry first."""
        ...

    def next_expiry(self, now: int, other_than: str) -> int | None:
        """The earliest expiry (epoch ms) not yet passed of a lease another host than `other_than` holds; None when
        there is none."""
        ...


class LifecycleReads(Protocol):
    def children(self, session_id: str) -> list[str]:
        """The IDs of the sessions whose parent is this one, oldest first."""
        ...

    def inbox(self, session_id: str) -> list[PendingInput]:
        """Every pending item of the session (user, synthetic, compaction), in enqueue order."""
        ...

    def output_paths(self, session_id: str) -> list[str]:
        """The Managed Tool Output Files the session's messages name."""
        ...

    def referenced(self, path: str) -> bool:
        """Whether any session's messages still name this tool output file."""
        ...


class StatsReads(Protocol):
    def usage(self, where: StatsFilter) -> dict[str, list[UsageRow]]:
        """Prompts and Steps counted in SQL, grouped: "total" (one row, or none), "model" (key: provider, model),
        "agent" and "day" (key: the local day number)."""
        ...

    def earliest(self) -> int | None:
        """When the oldest stored session was created."""
        ...

    def tools(self, where: StatsFilter) -> list[tuple[str, int, int]]:
        """Each tool's settled calls and failed calls, most called first."""
        ...

    def created(self, where: StatsFilter) -> int:
        """Sessions created in the range."""
        ...


class Reader(Protocol):
    """A read handle: the backend's reader, or an open write transaction (which sees its own writes)."""

    @property
    def events(self) -> EventReads: ...

    @property
    def sessions(self) -> SessionReads: ...

    @property
    def messages(self) -> MessageReads: ...

    @property
    def pending(self) -> PendingReads: ...

    @property
    def instructions(self) -> InstructionReads: ...

    @property
    def contexts(self) -> ContextReads: ...

    @property
    def permissions(self) -> PermissionReads: ...

    @property
    def leases(self) -> LeaseReads: ...

    @property
    def lifecycle(self) -> LifecycleReads: ...

    @property
    def stats(self) -> StatsReads: ...


# --- writes ------------------------------------------------------------------------------------------------


class EventWrites(EventReads, Protocol):
    def allocate_seq(self, aggregate_id: str) -> int:
        """Reserve the aggregate's next sequence in this transaction: gap-free and ordered under concurrent
        writers (a rolled-back write gives its number back)."""
        ...

    def insert(self, record: EventRecord, data_text: str) -> None:
        """Store one event (its data already encoded as `data_text`); its store position is given at commit."""
        ...

    def reserve_seq(self, aggregate_id: str, seq: int) -> None:
        """Move the aggregate's counter on so that its next sequence comes after `seq` (never back): a fork's copied
        messages keep their parent's sequences, and the fork's own events follow them."""
        ...


class SessionWrites(SessionReads, Protocol):
    def insert(self, info: dict[str, Any]) -> None:
        """A new session row from its wire record; it lists after every session created before it."""
        ...

    def save_data(self, session_id: str, info: dict[str, Any]) -> None:
        """Store a changed wire record (its title, Location and project are what lists filter on)."""
        ...

    def touch(self, session_id: str, at: int) -> None:
        """Record activity: the session's `time.updated`."""
        ...


class MessageWrites(MessageReads, Protocol):
    def insert(self, session_id: str, seq: int, message: SessionMessageData) -> None:
        """A new message at `seq` (the sequence of the event that created it)."""
        ...

    def save(self, message: SessionMessageData, updated: int, *, usage: bool = False) -> None:
        """Store a changed message: a new revision, updated at `updated`; `usage`: the change is to what usage
        statistics count (a Step's tokens, cost, failure, model, or a tool call settling), which is written too."""
        ...

    def remove_from(self, session_id: str, seq: int) -> int:
        """Remove the session's messages at or after `seq` (a committed revert) and count them as removed; returns
        how many there were."""
        ...


class PendingWrites(PendingReads, Protocol):
    def insert(self, item: PendingInput) -> None: ...

    def set_trace(self, input_id: str, traceparent: str) -> None:
        """Keep the caller's traceparent with a pending input (telemetry only: a replay does not restore it)."""
        ...

    def take(self, session_id: str, input_id: str) -> PendingInput:
        """Remove one pending input of `session_id` and return it; LookupError when it is not pending there."""
        ...

    def settle_barrier(self, session_id: str, input_id: str) -> None:
        """Consume the barrier `input_id` (a no-op when it is already gone)."""
        ...


class InstructionWrites(InstructionReads, Protocol):
    def initialize(self, session_id: str, fresh: Checkpoint) -> str:
        """Store the session's first checkpoint unless one exists already; returns the baseline in effect."""
        ...

    def rebaseline(self, session_id: str, fresh: Checkpoint) -> None: ...

    def advance(self, session_id: str, applied: str) -> None:
        """Overwrite the Applied Instructions record (with the Instruction Update that told the model)."""
        ...

    def reset(self, session_id: str) -> None:
        """Drop the checkpoint: the next Step initializes a fresh baseline."""
        ...

    def put_entry(self, session_id: str, key: str, value: Any, now: int) -> None: ...

    def remove_entry(self, session_id: str, key: str) -> None: ...


class PermissionWrites(PermissionReads, Protocol):
    def save(self, project_id: str, action: str, resources: list[str], now: int) -> None:
        """Remember each resource pattern as allowed for `action` in the project; one already saved stays."""
        ...

    def remove(self, saved_id: str) -> None: ...


class ContextReads(Protocol):
    def chain(self, session_id: str, message_id: str) -> list[StepContextRow]:
        """The records that rebuild the Step's context record and the session's record before it, oldest first
        (the Step's last); empty when the Step has none."""
        ...


class ContextWrites(ContextReads, Protocol):
    def put(self, session_id: str, message_id: str, root_id: str, base_id: str | None, data: str) -> None:
        """Store (or replace) the Step's context record: the change from `base_id`'s, its chain starting at
        `root_id`."""
        ...


class SuspensionWrites(Protocol):
    """The private mark a graceful shutdown leaves on the sessions it interrupts (replay never infers it)."""

    def mark(self, session_ids: list[str], at: int) -> None: ...

    def clear(self, session_id: str) -> None: ...

    def take_all(self) -> list[str]:
        """Consume every mark; returns the sessions that were marked, each once."""
        ...


class LeaseWrites(LeaseReads, Protocol):
    def take(self, session_id: str, owner: str, now: int, expires: int, *, steal: bool = False) -> Lease | None:
        """Take (or extend) the session's lease for `owner` until `expires`: granted when nobody holds it, its
        holder's expiry passed before `now`, `owner` holds it already (same epoch while it is live) or `steal`; a
        change of hands, or `owner` taking back its own expired lease, moves the epoch on. None while another
        owner's lease is live."""
        ...

    def renew(self, lease: Lease, expires: int) -> bool:
        """Extend a lease still held as `lease`; False when it changed hands."""
        ...

    def release(self, lease: Lease) -> None:
        """Give the lease up (a no-op when it changed hands); its epoch stays, so the next holder's is newer."""
        ...

    def claimable(self, now: int, limit: int = 100) -> list[Lease]:
        """`expired` leases this transaction holds the rows of from now on, to take them: on a shared database a row
        another transaction has locked is left out (looked at again by the next sweep), never waited for, so one
        busy or stuck row cannot hold back the takeover of every other session."""
        ...


class ContinuationWrites(Protocol):
    """Private execution claims and the record of automatic continuations (replay never infers either): a claim is
    made with an execution's durable start and released with its terminal, so a claim that outlives its process marks
    an execution whose host was lost."""

    def claim(self, session_id: str, at: int) -> None: ...

    def release(self, session_id: str) -> None: ...

    def claimed(self) -> list[str]:
        """Every session claimed and not released (on a single-host backend at start: the executions a lost process
        left), oldest claim first."""
        ...

    def is_claimed(self, session_id: str) -> bool:
        """Whether an execution of the session holds its claim (started, not yet settled)."""
        ...

    def continued(self, session_id: str) -> list[int]:
        """When (ms) the session was continued automatically after a lost host, as last recorded, oldest first."""
        ...

    def record_continued(self, session_id: str, times: list[int]) -> None:
        """Replace that record."""
        ...


class LifecycleWrites(LifecycleReads, Protocol):
    def lock(self, session_id: str) -> None:
        """Serialize the transaction with every other write of the session until it ends."""
        ...

    def remove(self, session_id: str) -> None:
        """Everything stored of the session but its log."""
        ...

    def purge_events(self, session_id: str, keep: str) -> None:
        """The session's events leave the log, all but the event `keep` (its tombstone, appended just before: the
        newest position stays taken); its sequence counter stays."""
        ...

    def cancel(self, session_id: str, input_id: str) -> bool:
        """Remove a pending item; whether it was there."""
        ...

    def deliver(self, session_id: str, input_id: str, delivery: str) -> None:
        """Change a pending item's delivery."""
        ...


class Writer(Protocol):
    """One open write transaction of a backend: every concern's reads and writes."""

    @property
    def events(self) -> EventWrites: ...

    @property
    def sessions(self) -> SessionWrites: ...

    @property
    def messages(self) -> MessageWrites: ...

    @property
    def pending(self) -> PendingWrites: ...

    @property
    def instructions(self) -> InstructionWrites: ...

    @property
    def contexts(self) -> ContextWrites: ...

    @property
    def permissions(self) -> PermissionWrites: ...

    @property
    def suspension(self) -> SuspensionWrites: ...

    @property
    def leases(self) -> LeaseWrites: ...

    @property
    def continuation(self) -> ContinuationWrites: ...

    @property
    def lifecycle(self) -> LifecycleWrites: ...

    @property
    def stats(self) -> StatsReads: ...

    def replace_projections(self, replay: Callable[[], None]) -> None:
        """Empty every table the projector writes and call `replay` to write them again from the log. State kept
        beside the projections but not derived from events (instruction checkpoints and entries, Step context records,
        saved permissions, suspension marks, continuation claims and records, removal counts) reads exactly the same
        afterwards, whatever replay touched."""
        ...
