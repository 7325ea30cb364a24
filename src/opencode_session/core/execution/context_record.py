"""What each Step sent, kept durably: per Step one record of its Model Context (the sections it was assembled from,
by source, and the exact request body its adapter encoded), written lazily with the Step's first events. A record is
stored as the change from the session's previous one (history grows at its end, so a Step stores what is new), a
full one every CHAIN records, so that reading one back walks a bounded chain."""

from __future__ import annotations

import json
import operator
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, count
from typing import Any, cast

from ..llm import model as llm
from ..redaction import Redactor
from ..session.history import HistoryEntry
from ..store import Store, Tx
from ..store.rows import StepContextRow

CHAIN = 32  # records per chain: reading one back applies at most this many changes
VERSION = 1
# the fields of a record: `meta` the sections (JSON), `body` the request body as sent (empty: the adapter sent none)
FIELDS = ("meta", "body")


@dataclass(frozen=True)
class StepSources:
    """What the Model Context builder knows of where a Step's request came from."""

    agent: str
    agent_text: str
    baseline: str
    history: Sequence[HistoryEntry]
    additions: Sequence[llm.LLMMessage]
    original: llm.LLMRequest  # the request as built (a plugin hook may send another)


@dataclass(frozen=True)
class _LastRecord:
    message_id: str
    root_id: str
    depth: int
    fields: dict[str, bytes]


def _utf8_start(data: bytes, i: int) -> int:
    """`i`, moved back to the start of the UTF-8 character it falls in."""
    while 0 < i < len(data) and data[i] & 0xC0 == 0x80:
        i -= 1
    return i


def _common_prefix(a: bytes, b: bytes) -> int:
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # a[:lo] == b[:lo]; halve the window still unknown
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _common_suffix(a: bytes, b: bytes, most: int) -> int:
    lo, hi, la, lb = 0, most, len(a), len(b)
    while lo < hi:  # a[la-lo:] == b[lb-lo:]; halve the window still unknown
        mid = (lo + hi + 1) // 2
        if a[la - mid:la - lo] == b[lb - mid:lb - lo]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def change(old: bytes, new: bytes) -> list[Any]:
    """`new` as `[kept prefix bytes, kept suffix bytes, the text between]` over `old` (both UTF-8)."""
    prefix = _utf8_start(new, _common_prefix(old, new))
    suffix = _common_suffix(old, new, min(len(old), len(new)) - prefix)
    end = len(new) - suffix
    while end < len(new) and new[end] & 0xC0 == 0x80:  # the suffix starts on a character of `new`
        end += 1
    suffix = len(new) - end
    return [prefix, suffix, new[prefix:end].decode("utf-8")]


def apply(old: bytes, delta: list[Any]) -> bytes:
    prefix, suffix, middle = int(delta[0]), int(delta[1]), str(delta[2])
    return old[:prefix] + middle.encode("utf-8") + old[len(old) - suffix:]


def _text(message: llm.LLMMessage) -> str:
    parts = getattr(message, "parts", None)
    if parts is None:
        return str(getattr(message, "text", ""))
    return "".join(p.text for p in parts if isinstance(p, llm.TextPart))


def _controls(controls: llm.GenerationControls) -> dict[str, Any]:
    fields = ("temperature", "top_p", "top_k", "seed", "stop", "frequency_penalty", "presence_penalty",
              "max_output_tokens")
    out = {name: getattr(controls, name) for name in fields if getattr(controls, name, None) is not None}
    if "stop" in out:
        out["stop"] = list(out["stop"])
    return out


def _compact(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


# stands for the history list in a record's sections while they are encoded (no JSON text can hold a raw NUL)
_HISTORY_MARK = "\x00history"
_MARK_BYTES = _compact(_HISTORY_MARK)


def meta_of(sources: StepSources, request: llm.LLMRequest, model: Mapping[str, Any], encoded: bool,
            updates: list[list[str]]) -> dict[str, Any]:
    """A Step's sections, by source, as its record keeps them (`history` a mark the encoded list replaces)."""
    resolved = request.model
    system = [["agent", sources.agent_text]] if sources.agent_text else []
    instructions = [["baseline", sources.baseline]] if sources.baseline else []
    if request.system != sources.original.system:  # a hook's own system text: by position
        system, instructions = [[f"system.{i}", s] for i, s in enumerate(request.system)], []
    options: dict[str, Any] = {"providerID": resolved.provider_id, "modelID": resolved.model_id,
                               "variant": model.get("variant"), "protocol": resolved.protocol,
                               "wireModel": resolved.wire_model, "toolChoice": request.tool_choice,
                               "promptCacheKey": request.prompt_cache_key}
    options.update(_controls(request.controls))
    options.update({f"options.{k}": v for k, v in request.options.items()})
    return {
        "agent": sources.agent,
        "model": dict(model),
        "system": system,
        "instructions": instructions,
        "updates": updates,
        "additions": [["step-limit", _text(m)] for m in sources.additions],
        "tools": [[t.name, {"description": t.description, "parameters": t.parameters}] for t in request.tools],
        "options": [[k, v] for k, v in options.items() if v is not None],
        "encoded": encoded,
        "rewritten": request is not sources.original,
        "history": _HISTORY_MARK,
    }


@dataclass
class _History:
    """A session's history as its last record listed it: the entries, each one's encoding, its updates by index."""

    entries: list[HistoryEntry]
    parts: list[bytes]
    updates: list[tuple[int, list[str]]]


class ContextRecorder:
    """Writes each Step's record; keeps per session the last record it wrote, the base of the next one."""

    def __init__(self, redactor: Redactor | None = None, max_sessions: int = 256) -> None:
        self.redactor = redactor
        self.max_sessions = max_sessions
        self._last: OrderedDict[str, _LastRecord] = OrderedDict()
        self._history: OrderedDict[str, _History] = OrderedDict()

    def _listed(self, session_id: str, entries: Sequence[HistoryEntry]) -> _History:
        """The history list of a record: the entries the previous record of the session listed too (the same
        objects: the history cache hands out unchanged entries again) keep their encoding; only the others are
        encoded."""
        previous = self._history.pop(session_id, None) or _History([], [], [])
        seen = previous.entries
        same = next(compress(count(), map(operator.is_not, entries, seen)), min(len(entries), len(seen)))
        parts, updates = previous.parts[:same], [u for u in previous.updates if u[0] < same]
        for index in range(same, len(entries)):
            entry = entries[index]
            kind = entry.message["type"]
            parts.append(_compact([entry.id, kind, entry.rev]))
            if kind == "system":
                updates.append((index, [entry.id, cast(Any, entry.message)["text"]]))
        listed = self._history[session_id] = _History(list(entries), parts, updates)
        while len(self._history) > self.max_sessions:
            self._history.popitem(last=False)
        return listed

    def fields(self, session_id: str, sources: StepSources, request: llm.LLMRequest, model: Mapping[str, Any],
               body: bytes | None) -> dict[str, bytes]:
        """A Step's record before it is stored: its sections (JSON) and the body as sent."""
        listed = self._listed(session_id, sources.history)
        meta = _compact(meta_of(sources, request, model, body is not None, [u for _, u in listed.updates]))
        head, _mark, tail = meta.rpartition(_MARK_BYTES)
        return {"meta": b"".join((head, b"[", b",".join(listed.parts), b"]", tail)), "body": body or b""}

    def encode(self, session_id: str, message_id: str, fields: dict[str, bytes]) -> tuple[str, str | None, str]:
        """The row of a record: its root, its base (None: full) and its data."""
        redacted = False
        if self.redactor is not None and self.redactor.active:
            for name, value in fields.items():
                text = value.decode("utf-8")
                if self.redactor.found(text):
                    fields[name], redacted = self.redactor.value(text).encode("utf-8"), True
        previous = self._last.pop(session_id, None)
        data: dict[str, Any] = {"v": VERSION}
        if redacted:
            data["redacted"] = True
        if previous is None or previous.depth + 1 >= CHAIN or previous.message_id >= message_id:
            last = _LastRecord(message_id, message_id, 0, fields)
            data["full"] = {name: fields[name].decode("utf-8") for name in FIELDS}
            base = None
        else:
            last = _LastRecord(message_id, previous.root_id, previous.depth + 1, fields)
            data["change"] = {name: change(previous.fields[name], fields[name]) for name in FIELDS}
            base = previous.message_id
        self._last[session_id] = last
        while len(self._last) > self.max_sessions:
            self._last.popitem(last=False)
        return last.root_id, base, json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    def forget(self, session_id: str) -> None:
        """The next record of the session is a full one (its last write may not have committed)."""
        self._last.pop(session_id, None)

    def record(self, store: Store, session_id: str, message_id: str, sources: StepSources,
               request: llm.LLMRequest, model: Mapping[str, Any], body: bytes | None) -> Any:
        """Queue the Step's record with its other writes (lazily: it commits with the next one); the future of
        that write."""
        root, base, data = self.encode(session_id, message_id, self.fields(session_id, sources, request, model, body))

        def put(tx: Tx) -> None:
            tx.contexts.put(session_id, message_id, root, base, data)

        written = store.submit(put, lazy=True)

        def failed(done: Any) -> None:  # a record that never committed is no base for the next one
            if not done.cancelled() and done.exception() is not None:
                self.forget(session_id)

        written.add_done_callback(failed)
        return written


@dataclass(frozen=True)
class Record:
    """One Step's record, read back."""

    message_id: str
    meta: dict[str, Any]
    body: bytes | None
    redacted: bool


def rebuild(rows: Sequence[StepContextRow]) -> list[Record]:
    """The records of a chain read oldest first (`ContextReads.chain`), each rebuilt from its base; those whose
    base is missing are left out."""
    fields: dict[str, dict[str, bytes]] = {}
    out: list[Record] = []
    for row in rows:
        data = json.loads(row.data)
        if row.base_id is None:
            full = data["full"]
            mine = {name: str(full[name]).encode("utf-8") for name in FIELDS}
        elif row.base_id in fields:
            base = fields[row.base_id]
            mine = {name: apply(base[name], data["change"][name]) for name in FIELDS}
        else:
            continue
        fields[row.message_id] = mine
        meta = json.loads(mine["meta"])
        out.append(Record(row.message_id, meta, mine["body"] if meta.get("encoded") else None,
                          bool(data.get("redacted"))))
    return out


__all__ = ["CHAIN", "ContextRecorder", "Record", "StepSources", "apply", "change", "meta_of", "rebuild"]
