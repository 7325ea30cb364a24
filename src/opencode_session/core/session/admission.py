"""Prompt admission and promotion: the durable inbox between a client's prompt and Session History."""

from __future__ import annotations

import json
import mimetypes
from typing import Literal, NamedTuple, cast
from urllib.parse import unquote, urlparse

from ...schema import events as ev
from ...schema.errors import ConflictError, InvalidRequestError
from ...schema.input import SessionInputAdmitted
from ...schema.prompt import Prompt, PromptFileAttachment, PromptInput
from ..store import PendingInput, Reader, Tx
from .revert import commit_staged

PromotionScope = Literal["steer", "input"]


def _mime_of(uri: str) -> str:
    parsed = urlparse(uri)
    if parsed.scheme == "data":
        head = parsed.path.split(",", 1)[0]
        return head.split(";", 1)[0] or "text/plain"
    if parsed.scheme not in ("file", "http", "https", ""):
        raise InvalidRequestError(f"Unsupported attachment URI scheme: {parsed.scheme}", field="prompt.files")
    path = unquote(parsed.path)
    if path.endswith("/"):
        return "application/x-directory"
    guessed, _ = mimetypes.guess_type(path)
    return guessed or "text/plain"


def resolve_prompt(prompt: PromptInput) -> Prompt:
    """The stored form of a prompt: every attachment carries its MIME type (deterministic, so retries compare)."""
    files = None
    if prompt.files is not None:
        files = [
            PromptFileAttachment(uri=f.uri, mime=_mime_of(f.uri), name=f.name, description=f.description,
                                 source=f.source)
            for f in prompt.files
        ]
    return Prompt(text=prompt.text, files=files, agents=prompt.agents)


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _conflict(input_id: str) -> ConflictError:
    return ConflictError(f"Prompt message ID conflicts with an existing durable record: {input_id}",
                         resource=input_id)


class Admitted(NamedTuple):
    """Where an input was admitted: the sequence and time of its `session.input.admitted` event, and the sequence of
    its message once promoted (None while it waits)."""

    seq: int
    created: int
    promoted_seq: int | None = None


def admit(tx: Tx, session_id: str, input_id: str, input: ev.AdmittedInput) -> tuple[Admitted, bool]:
    """Admit one input (a user's prompt, or synthetic input the model reads as the user's side) in the caller's
    transaction. An exact retry (the same ID, session, kind, delivery and content), waiting or promoted already,
    answers where it was admitted; any other reuse of the ID is a conflict. Returns that and whether it is new."""
    payload = input.data.wire()
    waiting = tx.pending.get(input_id)
    if waiting is not None:
        if (waiting.session_id, waiting.type, waiting.delivery) != (session_id, input.type, input.delivery) or \
                _canonical(waiting.data) != _canonical(payload):
            raise _conflict(input_id)
        return Admitted(waiting.admitted_seq, waiting.time_created), False
    promoted = tx.messages.placement(input_id)
    if promoted is not None:
        admitted = tx.events.admission_of(session_id, input_id)
        if promoted.session_id != session_id or promoted.type != input.type or admitted is None or \
                not isinstance(admitted.data, ev.InputAdmitted):
            raise _conflict(input_id)
        was = admitted.data.input
        if (was.type, was.delivery) != (input.type, input.delivery) or \
                _canonical(was.data.wire()) != _canonical(payload):
            raise _conflict(input_id)
        return Admitted(admitted.sequence, admitted.created, promoted.seq), False
    record = tx.append(ev.InputAdmitted(sessionID=session_id, inputID=input_id, input=input))
    return Admitted(record.sequence, record.created), True


def _from_pending(item: PendingInput) -> SessionInputAdmitted:
    return SessionInputAdmitted(admittedSeq=item.admitted_seq, id=item.id, sessionID=item.session_id,
                                prompt=Prompt.model_validate(item.data),
                                delivery=cast(ev.Delivery, item.delivery),  # a user input always has one
                                timeCreated=item.time_created)


def pending_inputs(reader: Reader, session_id: str) -> list[SessionInputAdmitted]:
    return [_from_pending(item) for item in reader.pending.user_inputs(session_id)]


def promote(tx: Tx, session_id: str, scope: PromotionScope) -> list[str]:
    """Promote eligible input at a Safe Step Boundary: all steers in admission order; at the idle boundary
    (`scope="input"`) with no steer pending, the oldest queued input alone. Nothing while a manual compaction
    barrier is pending. Input entering history while a revert is staged commits the revert first (admission already
    did, unless the revert was staged while the prompt was being admitted)."""
    tx.lifecycle.lock(session_id)  # a cancel of the same input either committed before this reads, or waits for it
    if tx.pending.barrier(session_id) is not None:
        return []
    inputs = tx.pending.promotable(session_id)
    steers = [input_id for input_id, delivery in inputs if delivery == "steer"]
    chosen = steers
    if not steers and scope == "input":
        chosen = [input_id for input_id, delivery in inputs if delivery == "queue"][:1]
    if chosen:
        commit_staged(tx, session_id)
    for input_id in chosen:
        tx.append(ev.InputPromoted(sessionID=session_id, inputID=input_id))
    return chosen


def admit_compaction(tx: Tx, session_id: str, input_id: str) -> str:
    """Admit a manual compaction barrier, or coalesce into the one already pending. Returns the barrier's ID."""
    existing = tx.pending.barrier(session_id)
    if existing is not None:
        return existing
    tx.append(ev.CompactionAdmitted(sessionID=session_id, inputID=input_id))
    return input_id
