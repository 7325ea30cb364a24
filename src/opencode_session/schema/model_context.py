"""The public shape of one Step's Model Context as recorded when it was sent: its sections keyed by source, what
changed in each since the session's previous Step, and the exact request body the provider received."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .base import Struct
from .common import ModelRef
from .ids import MessageID, SessionID

ContextSectionKey = Literal["system", "instructions", "updates", "history", "tools", "additions", "options"]


class ContextItem(Struct):
    source: str = Field(description=(
        "What the item came from, unique in its section: `agent` (the agent's system text), `baseline` (the"
        " Instruction Baseline), a message ID (an Instruction Update, a message of Session History), a tool's name,"
        " `step-limit` (the last-step notice), or an option's name."))
    value: Any = Field(description=(
        "The item as the Step used it: a text, a history message's `{type, rev}`, a tool's `{description,"
        " parameters}`, or an option's value."))


class ContextSection(Struct):
    key: ContextSectionKey = Field(description=(
        "`system`: the agent's text; `instructions`: the Instruction Baseline; `updates`: the Instruction Updates in"
        " the history sent; `history`: the Session History selected (after compaction and checkpoint cutoffs);"
        " `tools`: the tool definitions offered; `additions`: step-local additions; `options`: the model, provider"
        " protocol and request parameters."))
    items: list[ContextItem]


class ContextSectionChange(Struct):
    section: ContextSectionKey
    added: list[str] = Field(description="Sources in this Step's section and not in the previous Step's.")
    removed: list[str] = Field(description="Sources in the previous Step's section and not in this Step's.")
    changed: list[str] = Field(description="Sources in both whose value differs.")


class ContextRequestBody(Struct):
    protocol: str = Field(description="The provider protocol: `chat`, `responses` or `messages`.")
    body: str | None = Field(None, description=(
        "The request body exactly as sent (UTF-8 JSON text); absent when the model's adapter sends no JSON body."))
    size: int = Field(ge=0, description="The body's length in bytes.")
    sha256: str | None = Field(None, description="The SHA-256 of the body as sent, hex.")


class StepModelContext(Struct):
    """What one Step sent to its model, recorded when it was sent."""

    sessionID: SessionID
    messageID: MessageID = Field(description="The Step's assistant message.")
    previousMessageID: MessageID | None = Field(None, description=(
        "The session's previous Step that `changes` compares with; absent for the first recorded Step."))
    agent: str
    model: ModelRef
    sections: list[ContextSection]
    changes: list[ContextSectionChange] = Field(description=(
        "Per section, what differs from the previous Step (every section listed; all `added` for a first Step)."))
    request: ContextRequestBody
    rewritten: bool = Field(False, description=(
        "A plugin's before-request hook replaced the request: `request.body` is what was sent, the sections what"
        " the runtime assembled."))
    redacted: bool = Field(False, description=(
        "A known secret was cut from the record before it was stored: the body is no longer byte-exact."))


__all__ = ["ContextItem", "ContextRequestBody", "ContextSection", "ContextSectionChange", "ContextSectionKey",
           "StepModelContext"]
