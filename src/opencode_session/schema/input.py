"""The public Admission record returned by prompt: an admitted input, pending or already promoted."""

from __future__ import annotations

from pydantic import Field

from .base import Struct
from .common import Millis
from .events import Delivery
from .ids import MessageID, SessionID
from .prompt import Prompt


class SessionInputAdmitted(Struct):
    admittedSeq: int = Field(ge=0)
    id: MessageID
    sessionID: SessionID
    prompt: Prompt
    delivery: Delivery
    timeCreated: Millis
    promotedSeq: int | None = Field(default=None, ge=0)


Admission = SessionInputAdmitted
