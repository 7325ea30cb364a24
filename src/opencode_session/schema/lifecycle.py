"""The public shapes of managing sessions: an inbox item (admitted input not yet delivered) and an exported
transcript."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from .base import Struct
from .common import Millis
from .ids import MessageID, SessionID
from .message import SessionMessage
from .prompt import Prompt
from .session import SessionV2Info

InboxDelivery = Literal["steer", "queue"]


class _InboxItem(Struct):
    id: MessageID
    sessionID: SessionID
    admittedSeq: int = Field(ge=0, description="The sequence of the event that admitted it: the enqueue order.")
    timeCreated: Millis


class InboxUserItem(_InboxItem):
    """A prompt waiting for its delivery: `steer` at the next Safe Step Boundary, `queue` once the session is idle."""

    type: Literal["user"] = "user"
    prompt: Prompt
    delivery: InboxDelivery


class InboxSyntheticItem(_InboxItem):
    """Input the model reads as the user's side, marked synthetic, waiting for its delivery."""

    type: Literal["synthetic"] = "synthetic"
    text: str
    description: str | None = None
    metadata: dict[str, Any] | None = None
    delivery: InboxDelivery


class InboxCompactionItem(_InboxItem):
    """A manual compaction barrier: later input waits until the conversation is summarised."""

    type: Literal["compaction"] = "compaction"


InboxItem = Annotated[InboxUserItem | InboxSyntheticItem | InboxCompactionItem, Field(discriminator="type")]


class SessionTranscript(Struct):
    """A session as it can leave the machine: its record and its projected messages, oldest first."""

    info: SessionV2Info
    messages: list[SessionMessage]
