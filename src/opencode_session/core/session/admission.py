"""Prompt admission and promotion: the durable inbox between a client's prompt and Session History."""

from __future__ import annotations

import json
import mimetypes
from typing import Literal
from urllib.parse import unquote, urlparse

from ...schema import events as ev
from ...schema.errors import ConflictError, InvalidRequestError
from ...schema.input import SessionInputAdmitted
from ...schema.prompt import Prompt, PromptFileAttachment, PromptInput
from ..store.db import Tx

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


def admit(tx: Tx, session_id: str, input_id: str, prompt: Prompt, delivery: ev.Delivery) -> tuple[SessionInputAdmitted, bool]:
    """Admit one user input in the caller's transaction. Returns the admission and whether it is new."""
    payload = prompt.wire()
    pending = tx.execute("SELECT * FROM session_pending WHERE id = ?", (input_id,)).fetchone()
    if pending is not None:
        if (pending["session_id"], pending["type"], pending["delivery"]) != (session_id, "user", delivery) or \
                _canonical(json.loads(pending["data"])) != _canonical(payload):
            raise _conflict(input_id)
        return _from_pending(pending), False
    promoted = tx.execute("SELECT session_id, type, seq FROM session_message WHERE id = ?", (input_id,)).fetchone()
    if promoted is not None:
        if promoted["session_id"] != session_id or promoted["type"] != "user":
            raise _conflict(input_id)
        admitted = _admission_event(tx, session_id, input_id)
        if admitted is None:
            raise _conflict(input_id)
        record_seq, created, data = admitted
        if data.input.type != "user" or data.input.delivery != delivery or \
                _canonical(data.input.data.wire()) != _canonical(payload):
            raise _conflict(input_id)
        return SessionInputAdmitted(admittedSeq=record_seq, id=input_id, sessionID=session_id, prompt=data.input.data,
                                    delivery=delivery, timeCreated=created, promotedSeq=promoted["seq"]), False
    record = tx.append(ev.InputAdmitted(sessionID=session_id, inputID=input_id,
                                        input=ev.UserInput(data=prompt, delivery=delivery)))
    return SessionInputAdmitted(admittedSeq=record.seq, id=input_id, sessionID=session_id, prompt=prompt,
                                delivery=delivery, timeCreated=record.created), True


def input_recorded(tx_or_conn, input_id: str) -> bool:
    """Whether an input with this ID was already admitted (pending or promoted): a retry reconciles, unchecked."""
    row = tx_or_conn.execute("SELECT 1 FROM session_pending WHERE id = ?"
                             " UNION ALL SELECT 1 FROM session_message WHERE id = ? LIMIT 1", (input_id, input_id))
    return row.fetchone() is not None


def _admission_event(tx: Tx, session_id: str, input_id: str) -> tuple[int, int, ev.InputAdmitted] | None:
    row = tx.execute(
        "SELECT seq, created, data FROM event WHERE aggregate_id = ? AND type = ?"
        " AND json_extract(data, '$.inputID') = ?",
        (session_id, ev.InputAdmitted.definition.stored_type, input_id),  # type: ignore[attr-defined]
    ).fetchone()
    if row is None:
        return None
    return row["seq"], row["created"], ev.InputAdmitted.model_validate_json(row["data"])


def _from_pending(row) -> SessionInputAdmitted:
    return SessionInputAdmitted(admittedSeq=row["admitted_seq"], id=row["id"], sessionID=row["session_id"],
                                prompt=Prompt.model_validate_json(row["data"]), delivery=row["delivery"],
                                timeCreated=row["time_created"])


def pending_inputs(tx_or_conn, session_id: str) -> list[SessionInputAdmitted]:
    rows = tx_or_conn.execute(
        "SELECT * FROM session_pending WHERE session_id = ? AND type = 'user' ORDER BY admitted_seq", (session_id,)
    ).fetchall()
    return [_from_pending(r) for r in rows]


def has_pending(tx_or_conn, session_id: str, delivery: ev.Delivery | None = None) -> bool:
    sql = "SELECT 1 FROM session_pending WHERE session_id = ? AND type IN ('user', 'synthetic')"
    params: tuple = (session_id,)
    if delivery is not None:
        sql += " AND delivery = ?"
        params += (delivery,)
    return tx_or_conn.execute(sql + " LIMIT 1", params).fetchone() is not None


def promote(tx: Tx, session_id: str, scope: PromotionScope) -> list[str]:
    """Promote eligible input at a Safe Step Boundary: all steers in admission order; at the idle boundary
    (`scope="input"`) with no steer pending, the oldest queued input alone."""
    rows = tx.execute(
        "SELECT id, delivery FROM session_pending WHERE session_id = ? AND type IN ('user', 'synthetic')"
        " ORDER BY admitted_seq",
        (session_id,),
    ).fetchall()
    steers = [r["id"] for r in rows if r["delivery"] == "steer"]
    chosen = steers
    if not steers and scope == "input":
        queued = [r["id"] for r in rows if r["delivery"] == "queue"]
        chosen = queued[:1]
    for input_id in chosen:
        tx.append(ev.InputPromoted(sessionID=session_id, inputID=input_id))
    return chosen
