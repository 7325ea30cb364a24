"""What the model saw: one Step's recorded Model Context (`v2.session.message.context`) as a page, its sections keyed
by source, each item marked against the session's previous Step (added, changed with a line diff, unchanged; and
what that Step had that this one has not), and the request body as sent. A value for context.html, and its route."""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ...core.execution.context_view import step_context
from ...core.runtime import Runtime
from ...schema import events as ev
from ...schema.errors import InvalidRequestError, MessageNotFoundError, StepContextNotFoundError, TaggedError
from ...schema.events import EventRecord
from ...schema.model_context import StepModelContext
from ...schema.session import SessionV2Info
from .pages import html, render
from .parts import step_page

DIFF_CONTEXT = 2  # unchanged lines around each changed run of a changed item
GIST_MAX = 100  # characters of a history message's gist
# each section's heading, in the order the API lists them
TITLES = {"system": "Agent system text", "instructions": "Instruction baseline",
          "updates": "Instruction Updates in effect", "history": "Session History selected",
          "tools": "Tool definitions offered", "additions": "Step-local additions", "options": "Request options"}
NO_RECORD = ("No record of what this Step sent. A Step records its Model Context as it sends its request, so there is"
             " none for a Step that failed before sending one, one that ran before this server recorded them, or one"
             " copied into this session by a fork or an import.")


def as_text(value: Any) -> str:
    """An item's value as lines to read and compare: a text as it is, anything else as indented JSON."""
    return value if isinstance(value, str) else json.dumps(value, indent=2, ensure_ascii=False)


def line_diff(before: str, after: str) -> list[tuple[str, str]]:
    """The changed runs of `before` -> `after` with a little context, as `(kind, line)`: `hunk`, `add`, `del` or
    `same`."""
    out: list[tuple[str, str]] = []
    lines = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=DIFF_CONTEXT)
    for n, line in enumerate(lines):
        if n < 2:  # the ---/+++ header
            continue
        kind = {"@": "hunk", "+": "add", "-": "del"}.get(line[:1], "same")
        out.append((kind, line if kind == "hunk" else line[1:]))
    return out


@dataclass
class Item:
    """One item of a section: `mark` is added, changed, same or removed (removed: the previous Step's value)."""

    source: str
    value: Any
    mark: str
    diff: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Section:
    key: str
    title: str
    items: list[Item]
    added: int = 0
    removed: int = 0
    changed: int = 0

    @property
    def moved(self) -> bool:
        return bool(self.added or self.removed or self.changed)


def sections(now: StepModelContext, before: StepModelContext | None) -> list[Section]:
    """`now`'s sections with each item marked against `before` (the Step its changes compare with; None: the first
    recorded Step, all added)."""
    changes = {c.section: c for c in now.changes}
    previous = {s.key: {i.source: i.value for i in s.items} for s in before.sections} if before else {}
    first = now.previousMessageID is None  # nothing to compare with: nothing is marked
    found = []
    for section in now.sections:
        change = changes[section.key]
        old = previous.get(section.key, {})
        added, changed = (set(), set()) if first else (set(change.added), set(change.changed))
        items = []
        for item in section.items:
            mark = "added" if item.source in added else "changed" if item.source in changed else "same"
            diff = line_diff(as_text(old[item.source]), as_text(item.value)) \
                if mark == "changed" and item.source in old else []
            items.append(Item(item.source, item.value, mark, diff))
        items += [Item(source, old.get(source), "removed") for source in change.removed]
        found.append(Section(section.key, TITLES.get(section.key, section.key), items, len(added),
                             len(change.removed), len(changed)))
    return found


def gist(message: dict[str, Any]) -> str:
    """A history message in a line: its text, what an answer said or called, the model or agent switched to."""
    kind = message.get("type")
    if kind == "assistant":
        pieces = [c.get("text") or "" if c.get("type") == "text" else f"[{c.get('name')}]"
                  for c in message.get("content") or () if c.get("type") in ("text", "tool")]
        text = " ".join(p for p in pieces if p)
    elif kind == "compaction":
        text = message.get("summary") or ""
    elif kind == "model-switched":
        text = "{providerID}/{id}".format(**message.get("model") or {"providerID": "", "id": ""})
    elif kind == "agent-switched":
        text = message.get("agent") or ""
    elif kind == "shell":
        text = f"$ {message.get('command') or ''}"
    else:
        text = message.get("text") or ""
    text = " ".join(str(text).split())
    return text if len(text) <= GIST_MAX else text[:GIST_MAX - 1] + "…"


async def gists(runtime: Runtime, session_id: str, found: list[Section]) -> dict[str, str]:
    """The gist of each message the history sections name, as the message is now (by ID)."""
    ids = {item.source for s in found if s.key == "history" for item in s.items}

    def read(reader: Any) -> dict[str, str]:
        messages = {i: reader.messages.find(session_id, i) for i in ids}
        return {i: gist(m.model_dump(mode="json")) for i, m in messages.items() if m is not None}

    out: dict[str, str] = await runtime.store.read(read)
    return out


def body_text(body: str | None) -> str | None:
    """The request body to read: indented when it is JSON (the record's size and hash are of the body as sent)."""
    if body is None:
        return None
    try:
        return json.dumps(json.loads(body), indent=2, ensure_ascii=False)
    except ValueError:
        return body


async def _build(runtime: Runtime, info: SessionV2Info, records: list[EventRecord], message_id: str,
                 signed_in: bool) -> Response:
    steps = [r.data.assistantMessageID for r in records if isinstance(r.data, ev.StepStarted)]
    values: dict[str, Any] = dict(session=info.model_dump(mode="json"), message_id=message_id, signed_in=signed_in,
                                  context=None, problem=None, steps=steps,
                                  index=steps.index(message_id) if message_id in steps else None)
    try:
        now = await step_context(runtime.store, info.id, message_id)
    except StepContextNotFoundError:
        return html(render("context.html", **{**values, "problem": NO_RECORD}))
    except (MessageNotFoundError, InvalidRequestError):
        problem = f"This session has no Step {message_id}: a Step is an answer of the assistant."
        return html(render("context.html", **{**values, "problem": problem}), status=404)
    before = None
    if now.previousMessageID is not None:
        try:
            before = await step_context(runtime.store, info.id, now.previousMessageID)
        except TaggedError:
            before = None
    found = sections(now, before)
    return html(render("context.html", **{**values, "context": now.model_dump(mode="json"), "sections": found,
                                          "gists": await gists(runtime, info.id, found),
                                          "body": body_text(now.request.body)}))


async def context_page(request: Request) -> Response:
    """`/ui/session/{id}/context/{messageID}`: what the Step of an answer sent its model."""
    return await step_page(request, _build)
