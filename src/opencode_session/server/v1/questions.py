"""V1 questions: `GET /question` (the pending ones in the client's directory), `POST /question/{id}/reply` and
`/reject`, and the V1 bus events `question.asked`, `question.replied` and `question.rejected`."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from ...core.session.requests import in_location
from ...schema.errors import QuestionNotFoundError
from ..state import runtime_of
from . import wire
from .endpoint import V1Route, location

_EVENTS = {"question.v2.asked": "question.asked", "question.v2.replied": "question.replied",
           "question.v2.rejected": "question.rejected"}


def question_event(kind: str, data: Any) -> tuple[str, dict[str, Any]] | None:
    """The V1 event (type, properties) of one of our question events; None for any other event. V1's properties
    are our event's data as they are (the same fields under the same names)."""
    v1 = _EVENTS.get(kind)
    return (v1, dict(data)) if v1 is not None and isinstance(data, dict) else None


async def question_list(request: Request) -> Any:
    rt = runtime_of(request)
    pending = await in_location(rt.sessions, location(request), rt.questions.pending())
    return [q.wire() for q in pending]


async def _answer(request: Request, answers: list[list[str]] | None) -> Any:
    rt, request_id = runtime_of(request), request.path_params["requestID"]
    for pending in rt.questions.pending():
        if pending.id == request_id:
            await rt.reply_question(pending.sessionID, request_id, answers)
            return True
    raise QuestionNotFoundError(requestID=request_id)


async def question_reply(request: Request, body: wire.QuestionReplyBody) -> Any:
    return await _answer(request, body.answers)


async def question_reject(request: Request) -> Any:
    return await _answer(request, None)


QUESTION_ROUTES = [
    V1Route("GET", "/question", question_list, list[wire.Question]),
    V1Route("POST", "/question/{requestID}/reply", question_reply, bool, wire.QuestionReplyBody),
    V1Route("POST", "/question/{requestID}/reject", question_reject, bool),
]
