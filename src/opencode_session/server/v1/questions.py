"""V1 questions: `GET /question` (the pending ones in the client's directory), `POST /question/{id}/reply` and
`/reject`, and the V1 bus events `question.asked`, `question.replied` and `question.rejected`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ...core.location import Location
from ...core.runtime import Runtime
from ...core.session.requests import in_location
from ...schema.errors import InvalidRequestError, QuestionNotFoundError
from ..body import read_json_body

Handler = Callable[[Request], Awaitable[Response]]

_EVENTS = {"question.v2.asked": "question.asked", "question.v2.replied": "question.replied",
           "question.v2.rejected": "question.rejected"}


def question_event(kind: str, data: Any) -> tuple[str, dict[str, Any]] | None:
    """The V1 event (type, properties) of one of our question events; None for any other event. V1's properties
    are our event's data as they are (the same fields under the same names)."""
    v1 = _EVENTS.get(kind)
    return (v1, dict(data)) if v1 is not None and isinstance(data, dict) else None


def _answers(raw: bytes) -> list[list[str]]:
    body = read_json_body(raw) if raw else {}
    answers = body.get("answers") if isinstance(body, dict) else None
    if not isinstance(answers, list) or not all(
            isinstance(a, list) and all(isinstance(label, str) for label in a) for a in answers):
        raise InvalidRequestError("Invalid body: answers: one list of chosen labels per question is required",
                                  kind="body", field="answers")
    return answers


def question_routes(rt: Runtime, location: Callable[[Request], Location]) -> list[tuple[str, str, Handler]]:
    async def question_list(request: Request) -> Response:
        pending = await in_location(rt.sessions, location(request), rt.questions.pending())
        return JSONResponse([q.wire() for q in pending])

    async def _answer(request: Request, answers: list[list[str]] | None) -> Response:
        request_id = request.path_params["requestID"]
        for pending in rt.questions.pending():
            if pending.id == request_id:
                await rt.reply_question(pending.sessionID, request_id, answers)
                return JSONResponse(True)
        raise QuestionNotFoundError(requestID=request_id)

    async def question_reply(request: Request) -> Response:
        return await _answer(request, _answers(await request.body()))

    async def question_reject(request: Request) -> Response:
        return await _answer(request, None)

    return [("GET", "/question", question_list),
            ("POST", "/question/{requestID}/reply", question_reply),
            ("POST", "/question/{requestID}/reject", question_reject)]
