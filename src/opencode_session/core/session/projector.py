"""The session read model: what each durable event changes in the projected session, its messages and its pending
input (the store's table modules say how that is stored), and the Location stamped on the event's envelope."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

from ...schema import events as ev
from ...schema import message_data as md
from ...schema.common import LocationRef, ModelRef, SessionErrorInfo, Tokens
from ...schema.events import EventRecord
from ...schema.ids import derived_message_id, message_id_from_event
from ..store import PendingInput, Tx
from ..store.codec import as_data
from ..store.rows import BARRIER

_HANDLERS: dict[type, Callable[[Tx, EventRecord, Any], None]] = {}


def handles(*types: type):
    def deco(fn):
        for t in types:
            _HANDLERS[t] = fn
        return fn

    return deco


def project(tx: Tx, record: EventRecord) -> None:
    data = record.data
    if record.location is None:
        record.location = _location_of(tx, record)
    handler = _HANDLERS.get(type(data))
    if handler is not None:
        handler(tx, record, data)
    if not isinstance(data, (ev.SessionCreated, ev.Imported, ev.Viewed)):  # a view changes nothing of the session
        tx.sessions.touch(record.aggregate_id, record.created)


def _location_of(tx: Tx, record: EventRecord) -> LocationRef | None:
    """Where the event happened: its session's Location before this event applies (a move happens at its source)."""
    if isinstance(record.data, (ev.SessionCreated, ev.Forked, ev.Imported)):
        return record.data.info.location
    return tx.sessions.location(record.aggregate_id)


# --- session row -------------------------------------------------------------------------------------


def _load_session(tx: Tx, session_id: str) -> dict[str, Any]:
    info = tx.sessions.load_data(session_id)
    if info is None:
        raise LookupError(f"projection for unknown session {session_id}")
    return info


@handles(ev.SessionCreated)
def _session_created(tx: Tx, record: EventRecord, data: ev.SessionCreated) -> None:
    tx.sessions.insert(data.info.wire())


@handles(ev.AgentSelected)
def _agent_selected(tx: Tx, record: EventRecord, data: ev.AgentSelected) -> None:
    info = _load_session(tx, data.sessionID)
    info["agent"] = data.agent
    tx.sessions.save_data(data.sessionID, info)
    _insert_message(tx, record, {"id": _message_id(record), "time": _created(record), "type": "agent-switched",
                                 "agent": data.agent})


@handles(ev.ModelSelected)
def _model_selected(tx: Tx, record: EventRecord, data: ev.ModelSelected) -> None:
    info = _load_session(tx, data.sessionID)
    info["model"] = data.model.wire()
    tx.sessions.save_data(data.sessionID, info)
    message: md.SessionMessageModelSwitchedData = {"id": _message_id(record), "time": _created(record),
                                                   "type": "model-switched", "model": _model(data.model)}
    if data.previous is not None:
        message["previous"] = _model(data.previous)
    _insert_message(tx, record, message)


@handles(ev.Renamed)
def _renamed(tx: Tx, record: EventRecord, data: ev.Renamed) -> None:
    info = _load_session(tx, data.sessionID)
    info["title"] = data.title
    tx.sessions.save_data(data.sessionID, info)


@handles(ev.Moved)
def _moved(tx: Tx, record: EventRecord, data: ev.Moved) -> None:
    info = _load_session(tx, data.sessionID)
    info["location"] = data.location.wire()
    if data.subpath is not None:
        info["subpath"] = data.subpath
    else:
        info.pop("subpath", None)
    if data.projectID is not None:
        info["projectID"] = data.projectID
    tx.sessions.save_data(data.sessionID, info)
    # a moved session re-initializes its instruction baseline in the destination before input promotes
    tx.instructions.reset(data.sessionID)


@handles(ev.Forked)
def _forked(tx: Tx, record: EventRecord, data: ev.Forked) -> None:
    tx.sessions.insert(data.info.wire())
    last = None if data.from_ is None else _boundary_seq(tx, data.parentID, data.from_)
    copied = -1
    for row in tx.messages.window(data.parentID, -1, -1):
        if last is not None and row.seq > last:
            break
        message = as_data(row.data)
        if _unsettled(message):
            continue  # a Step or compaction still under way in the parent: not history yet
        message["id"] = derived_message_id(data.sessionID, row.id)
        tx.messages.insert(data.sessionID, row.seq, message)
        copied = row.seq
    # the copies keep their sequences: the fork's own events (and the messages they make) come after them
    tx.events.reserve_seq(data.sessionID, copied)


def _unsettled(message: md.SessionMessageData) -> bool:
    if message["type"] == "assistant":
        return "completed" not in message["time"]
    return message["type"] == "compaction" and message.get("status") == "running"


def _boundary_seq(tx: Tx, session_id: str, message_id: str) -> int:
    placed = tx.messages.placement(message_id)
    if placed is None or placed.session_id != session_id:
        raise LookupError(f"no message {message_id} in session {session_id}")
    return placed.seq


# --- revert ------------------------------------------------------------------------------------------


@handles(ev.RevertStaged)
def _revert_staged(tx: Tx, record: EventRecord, data: ev.RevertStaged) -> None:
    info = _load_session(tx, data.sessionID)
    info["revert"] = data.revert.wire()
    tx.sessions.save_data(data.sessionID, info)


@handles(ev.RevertCleared)
def _revert_cleared(tx: Tx, record: EventRecord, data: ev.RevertCleared) -> None:
    info = _load_session(tx, data.sessionID)
    info.pop("revert", None)
    tx.sessions.save_data(data.sessionID, info)


@handles(ev.RevertCommitted)
def _revert_committed(tx: Tx, record: EventRecord, data: ev.RevertCommitted) -> None:
    # a boundary that is not there aborts the commit: the event is never stored without its effect
    tx.messages.remove_from(data.sessionID, _boundary_seq(tx, data.sessionID, data.to))
    info = _load_session(tx, data.sessionID)
    info.pop("revert", None)
    tx.sessions.save_data(data.sessionID, info)
    # the shortened history starts from a fresh instruction baseline, as after a move
    tx.instructions.reset(data.sessionID)


def _add_usage(tx: Tx, session_id: str, cost: float | None, tokens: Tokens | None) -> None:
    if cost is None and tokens is None:
        return
    info = _load_session(tx, session_id)
    info["cost"] = info.get("cost", 0) + (cost or 0)
    if tokens is not None:
        t = info.setdefault("tokens", {"input": 0, "output": 0, "reasoning": 0, "cache": {"read": 0, "write": 0}})
        t["input"] += tokens.input
        t["output"] += tokens.output
        t["reasoning"] += tokens.reasoning
        t["cache"]["read"] += tokens.cache.read
        t["cache"]["write"] += tokens.cache.write
    tx.sessions.save_data(session_id, info)
    tx.publish_live(ev.UsageUpdated.model_validate({"sessionID": session_id, "cost": info["cost"],
                                                     "tokens": info["tokens"]}), session_id)


# --- messages --------------------------------------------------------------------------------------
# Event data is a pydantic model; its wire form is, by construction, the mirrored TypedDict of message_data.py.


def _model(ref: ModelRef) -> md.ModelRefData:
    return cast(md.ModelRefData, ref.wire())


def _error(error: SessionErrorInfo) -> md.SessionErrorInfoData:
    return cast(md.SessionErrorInfoData, error.wire())


def _tokens(tokens: Tokens) -> md.TokensData:
    return cast(md.TokensData, tokens.wire())


def _message_id(record: EventRecord) -> str:
    return message_id_from_event(record.id)


def _created(record: EventRecord) -> md.CreatedTimeData:
    return {"created": record.created}


def _insert_message(tx: Tx, record: EventRecord, message: md.SessionMessageData) -> None:
    tx.messages.insert(record.aggregate_id, record.sequence, message)


@handles(ev.InputAdmitted)
def _admitted(tx: Tx, record: EventRecord, data: ev.InputAdmitted) -> None:
    tx.pending.insert(PendingInput(data.inputID, data.sessionID, data.input.type, data.input.data.wire(),
                                            data.input.delivery, record.sequence, record.created))


@handles(ev.InputPromoted)
def _promoted(tx: Tx, record: EventRecord, data: ev.InputPromoted) -> None:
    taken = tx.pending.take(data.sessionID, data.inputID)
    head = {"id": data.inputID, "time": _created(record)}
    # the pending row holds the admitted input's wire form: a Prompt, or synthetic input
    if taken.type == "user":
        _insert_message(tx, record, cast(md.SessionMessageUserData, {**head, "type": "user", **taken.data}))
    else:
        _insert_message(tx, record, cast(md.SessionMessageSyntheticData, {
            **head, "type": "synthetic", "sessionID": data.sessionID, **taken.data}))


@handles(ev.InstructionsUpdated)
def _instructions(tx: Tx, record: EventRecord, data: ev.InstructionsUpdated) -> None:
    _insert_message(tx, record, {"id": _message_id(record), "time": _created(record), "type": "system",
                                 "text": data.text})


@handles(ev.Synthetic)
def _synthetic(tx: Tx, record: EventRecord, data: ev.Synthetic) -> None:
    message: md.SessionMessageSyntheticData = {"id": _message_id(record), "time": _created(record),
                                               "type": "synthetic", "sessionID": data.sessionID, "text": data.text}
    if data.description is not None:
        message["description"] = data.description
    if data.metadata is not None:
        message["metadata"] = data.metadata
    _insert_message(tx, record, message)


@handles(ev.ShellStarted)
def _shell_started(tx: Tx, record: EventRecord, data: ev.ShellStarted) -> None:
    _insert_message(tx, record, {"id": data.messageID, "time": {"created": record.created}, "type": "shell",
                                 "callID": data.callID, "command": data.command, "output": ""})


@handles(ev.ShellEnded)
def _shell_ended(tx: Tx, record: EventRecord, data: ev.ShellEnded) -> None:
    message = tx.messages.shell(data.sessionID, data.callID)
    if message is None:
        return
    message["output"] = data.output
    message["time"]["completed"] = record.created
    tx.messages.save(message, record.created)


# --- assistant steps ---------------------------------------------------------------------------------


def _load_assistant(tx: Tx, message_id: str) -> md.SessionMessageAssistantData | None:
    message = tx.messages.load(message_id)
    return message if message is not None and message["type"] == "assistant" else None


def _assistant(tx: Tx, data: ev.StepEvent) -> md.SessionMessageAssistantData:
    message = _load_assistant(tx, data.assistantMessageID)
    if message is None:
        raise LookupError(f"no assistant message {data.assistantMessageID}")
    return message


@handles(ev.StepStarted)
def _step_started(tx: Tx, record: EventRecord, data: ev.StepStarted) -> None:
    # an older incomplete assistant (an interrupted step) is closed when a new one starts
    for older in tx.messages.open_assistants(data.sessionID, excluding=data.assistantMessageID):
        older["time"]["completed"] = record.created
        tx.messages.save(older, record.created)
    existing = _load_assistant(tx, data.assistantMessageID)
    if existing is None:
        message: md.SessionMessageAssistantData = {
            "id": data.assistantMessageID, "time": {"created": record.created}, "type": "assistant",
            "agent": data.agent, "model": _model(data.model), "content": []}
        if data.snapshot:
            message["snapshot"] = {"start": data.snapshot}
        _insert_message(tx, record, message)
        return
    # a retry reuses the assistant message: reset it to a fresh start
    existing.pop("retry", None)
    existing.pop("error", None)
    existing.pop("finish", None)
    existing.pop("cost", None)
    existing.pop("tokens", None)
    existing["time"].pop("completed", None)
    existing["agent"], existing["model"] = data.agent, _model(data.model)
    if data.snapshot:
        existing["snapshot"] = {"start": data.snapshot}
    else:
        existing.pop("snapshot", None)
    tx.messages.save(existing, record.created, usage=True)


@handles(ev.StepEnded)
def _step_ended(tx: Tx, record: EventRecord, data: ev.StepEnded) -> None:
    message = _assistant(tx, data)
    message["finish"] = data.finish
    message["cost"] = data.cost
    message["tokens"] = _tokens(data.tokens)
    message["time"]["completed"] = record.created
    _step_snapshot(message, data)
    message.pop("retry", None)
    tx.messages.save(message, record.created, usage=True)
    _add_usage(tx, data.sessionID, data.cost, data.tokens)


def _step_snapshot(message: md.SessionMessageAssistantData, data: ev.StepEnded | ev.StepFailed) -> None:
    """Where the Step's files ended up, and which it changed."""
    if data.snapshot or data.files:
        snap = message.setdefault("snapshot", {})
        if data.snapshot:
            snap["end"] = data.snapshot
        if data.files:
            snap["files"] = data.files


@handles(ev.StepFailed)
def _step_failed(tx: Tx, record: EventRecord, data: ev.StepFailed) -> None:
    message = _load_assistant(tx, data.assistantMessageID)
    if message is None:
        # a step can fail before any output (e.g. exhausted retries): the assistant still records the failure
        return
    message["finish"] = "error"
    message["error"] = _error(data.error)
    message["time"]["completed"] = record.created
    message.pop("retry", None)
    _step_snapshot(message, data)
    if data.cost is not None:
        message["cost"] = data.cost
    if data.tokens is not None:
        message["tokens"] = _tokens(data.tokens)
    tx.messages.save(message, record.created, usage=True)
    _add_usage(tx, data.sessionID, data.cost, data.tokens)


def _text_part(message: md.SessionMessageAssistantData, ordinal: int) -> md.SessionMessageAssistantTextData:
    for part in message["content"]:
        if part["type"] == "text" and part["id"] == f"text-{ordinal}":
            return part
    raise LookupError(f"no text part {ordinal} in {message['id']}")


def _reasoning_part(message: md.SessionMessageAssistantData,
                    ordinal: int) -> md.SessionMessageAssistantReasoningData:
    for part in message["content"]:
        if part["type"] == "reasoning" and part["id"] == f"reasoning-{ordinal}":
            return part
    raise LookupError(f"no reasoning part {ordinal} in {message['id']}")


def _tool_part(message: md.SessionMessageAssistantData, call_id: str) -> md.SessionMessageAssistantToolData | None:
    for part in message["content"]:
        if part["type"] == "tool" and part["id"] == call_id:
            return part
    return None


def _require_tool_part(message: md.SessionMessageAssistantData,
                       call_id: str) -> md.SessionMessageAssistantToolData:
    part = _tool_part(message, call_id)
    if part is None:
        raise LookupError(f"no tool part {call_id} in {message['id']}")
    return part


@handles(ev.TextStarted)
def _text_started(tx: Tx, record: EventRecord, data: ev.TextStarted) -> None:
    message = _assistant(tx, data)
    message["content"].append({"type": "text", "id": f"text-{data.ordinal}", "text": ""})
    tx.messages.save(message, record.created)


@handles(ev.TextEnded)
def _text_ended(tx: Tx, record: EventRecord, data: ev.TextEnded) -> None:
    message = _assistant(tx, data)
    _text_part(message, data.ordinal)["text"] = data.text
    tx.messages.save(message, record.created)


@handles(ev.ReasoningStarted)
def _reasoning_started(tx: Tx, record: EventRecord, data: ev.ReasoningStarted) -> None:
    message = _assistant(tx, data)
    part: md.SessionMessageAssistantReasoningData = {"type": "reasoning", "id": f"reasoning-{data.ordinal}",
                                                     "text": "", "time": {"created": record.created}}
    if data.state is not None:
        part["providerMetadata"] = data.state
    message["content"].append(part)
    tx.messages.save(message, record.created)


@handles(ev.ReasoningEnded)
def _reasoning_ended(tx: Tx, record: EventRecord, data: ev.ReasoningEnded) -> None:
    message = _assistant(tx, data)
    part = _reasoning_part(message, data.ordinal)
    part["text"] = data.text
    part.setdefault("time", {"created": record.created})["completed"] = record.created
    if data.state is not None:
        part["providerMetadata"] = data.state
    tx.messages.save(message, record.created)


@handles(ev.ToolInputStarted)
def _tool_input_started(tx: Tx, record: EventRecord, data: ev.ToolInputStarted) -> None:
    message = _assistant(tx, data)
    message["content"].append({
        "type": "tool", "id": data.callID, "name": data.name, "state": {"status": "streaming", "input": ""},
        "time": {"created": record.created},
    })
    tx.messages.save(message, record.created)


@handles(ev.ToolInputEnded)
def _tool_input_ended(tx: Tx, record: EventRecord, data: ev.ToolInputEnded) -> None:
    message = _assistant(tx, data)
    state = _require_tool_part(message, data.callID)["state"]
    if state["status"] == "streaming":
        state["input"] = data.text
    tx.messages.save(message, record.created)


@handles(ev.ToolCalled)
def _tool_called(tx: Tx, record: EventRecord, data: ev.ToolCalled) -> None:
    message = _assistant(tx, data)
    running: md.ToolStateRunningData = {"status": "running", "input": data.input, "structured": {}, "content": []}
    part = _tool_part(message, data.callID)
    settled = part is not None and part["state"]["status"] in ("completed", "error")
    if part is None:
        part = {"type": "tool", "id": data.callID, "name": data.name, "state": running,
                "time": {"created": record.created}}
        message["content"].append(part)
    part["name"] = data.name
    part["state"] = running
    provider: md.ToolProviderData = {"executed": data.executed}
    if data.state is not None:
        provider["metadata"] = data.state
    part["provider"] = provider
    part["time"]["ran"] = record.created
    tx.messages.save(message, record.created, usage=settled)  # a settled call running again is not counted


def _settle_tool(tx: Tx, record: EventRecord, data: ev.ToolSuccess | ev.ToolFailed,
                 state: md.ToolStateCompletedData | md.ToolStateErrorData) -> None:
    message = _assistant(tx, data)
    part = _require_tool_part(message, data.callID)
    raw_input = part["state"].get("input")
    state["input"] = raw_input if isinstance(raw_input, dict) else {}
    part["state"] = state
    if data.resultState is not None:
        part.setdefault("provider", {"executed": data.executed})["resultMetadata"] = data.resultState
    part["time"]["completed"] = record.created
    tx.messages.save(message, record.created, usage=True)  # the call counts for tool statistics once settled


@handles(ev.ToolSuccess)
def _tool_success(tx: Tx, record: EventRecord, data: ev.ToolSuccess) -> None:
    state: md.ToolStateCompletedData = {"status": "completed", "input": {},
                                        "content": [cast(md.ToolContentData, c.wire()) for c in data.content],
                                        "structured": data.structured}
    if data.outputPaths:
        state["outputPaths"] = data.outputPaths
    if data.executed and data.result is not None:
        state["result"] = data.result
    _settle_tool(tx, record, data, state)


@handles(ev.ToolFailed)
def _tool_failed(tx: Tx, record: EventRecord, data: ev.ToolFailed) -> None:
    state: md.ToolStateErrorData = {"status": "error", "input": {}, "content": [], "structured": {},
                                    "error": _error(data.error)}
    if data.result is not None:
        state["result"] = data.result
    _settle_tool(tx, record, data, state)


@handles(ev.RetryScheduled)
def _retry(tx: Tx, record: EventRecord, data: ev.RetryScheduled) -> None:
    message = _load_assistant(tx, data.assistantMessageID)
    if message is None:
        return
    message["retry"] = {"attempt": data.attempt, "at": data.at, "error": _error(data.error)}
    tx.messages.save(message, record.created)


@handles(ev.ExecutionSucceeded, ev.ExecutionFailed, ev.ExecutionInterrupted)
def _execution_settled(tx: Tx, record: EventRecord,
                       data: ev.ExecutionSucceeded | ev.ExecutionFailed | ev.ExecutionInterrupted) -> None:
    for message in tx.messages.retrying_assistants(data.sessionID):
        message.pop("retry", None)
        tx.messages.save(message, record.created)


# --- compaction ---------------------------------------------------------------------------------------------


@handles(ev.CompactionAdmitted)
def _compaction_admitted(tx: Tx, record: EventRecord, data: ev.CompactionAdmitted) -> None:
    tx.pending.insert(PendingInput(data.inputID, data.sessionID, BARRIER, {}, None,
                                            record.sequence, record.created))


@handles(ev.CompactionStarted)
def _compaction_started(tx: Tx, record: EventRecord, data: ev.CompactionStarted) -> None:
    _insert_message(tx, record, {"id": data.messageID, "time": _created(record), "type": "compaction",
                                 "reason": data.reason, "status": "running", "summary": "", "recent": data.recent})


@handles(ev.CompactionEnded, ev.CompactionFailed)
def _compaction_settled(tx: Tx, record: EventRecord, data: ev.CompactionEnded | ev.CompactionFailed) -> None:
    if data.inputID is not None:
        tx.pending.settle_barrier(data.sessionID, data.inputID)
    message = None if data.messageID is None else tx.messages.running_compaction(data.sessionID, data.messageID)
    if message is None:
        return  # failed before it started (e.g. nothing to compact)
    if isinstance(data, ev.CompactionEnded):
        message["status"], message["summary"], message["recent"] = "completed", data.text, data.recent
    else:
        message["status"] = "failed"
    tx.messages.save(message, record.created)


@handles(ev.UsageRecorded)
def _usage_recorded(tx: Tx, record: EventRecord, data: ev.UsageRecorded) -> None:
    _add_usage(tx, data.sessionID, data.cost, data.tokens)


# --- session management: update, delete, import, the inbox's own changes ----------------------------------


@handles(ev.Updated)
def _updated(tx: Tx, record: EventRecord, data: ev.Updated) -> None:
    info = _load_session(tx, data.sessionID)
    if data.title is not None:
        info["title"] = data.title
    if data.metadata is not None:
        info["metadata"] = data.metadata
    if data.permissions is not None:
        info["permissions"] = [rule.wire() for rule in data.permissions]
    tx.sessions.save_data(data.sessionID, info)


@handles(ev.Deleted)
def _deleted(tx: Tx, record: EventRecord, data: ev.Deleted) -> None:
    tx.lifecycle.remove(data.sessionID)  # replaying a tombstone finds nothing left to remove


@handles(ev.Imported)
def _imported(tx: Tx, record: EventRecord, data: ev.Imported) -> None:
    tx.sessions.insert(data.info.wire())
    # the messages keep their order, numbered after this event; the session's own events come after them
    seq = record.sequence
    for message in data.messages:
        seq += 1
        tx.messages.insert(data.sessionID, seq, cast(md.SessionMessageData, message))
    tx.events.reserve_seq(data.sessionID, seq)


@handles(ev.InputCancelled)
def _input_cancelled(tx: Tx, record: EventRecord, data: ev.InputCancelled) -> None:
    tx.lifecycle.cancel(data.sessionID, data.inputID)


@handles(ev.InputSteered, ev.InputQueued)
def _input_delivery(tx: Tx, record: EventRecord, data: ev.InputSteered | ev.InputQueued) -> None:
    tx.lifecycle.deliver(data.sessionID, data.inputID, "steer" if isinstance(data, ev.InputSteered) else "queue")
