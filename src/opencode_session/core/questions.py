"""The question service: questions a tool asks the user wait in memory per session (published live as
`question.v2.asked`, then `question.v2.replied` or `question.v2.rejected`) until the API answers or rejects them."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from ..schema import events as ev
from ..schema import session_errors
from ..schema.errors import QuestionNotFoundError
from ..schema.ids import question_id
from ..schema.question import QuestionV2Info, QuestionV2Request, QuestionV2Tool
from .store import Store
from .tools.tool import ToolFailure
from .waiting import Waiting, WaitingRequests

Questioner = Callable[[list[dict[str, Any]]], Awaitable[list[list[str]]]]
REJECTED = "The user dismissed the question without answering"


class QuestionRequests:
    def __init__(self, store: Store) -> None:
        self._store = store
        self._waiting: WaitingRequests[QuestionV2Request] = WaitingRequests()

    def questioner(self, session_id: str, message_id: str, call_id: str) -> Questioner:
        """The questioner of one tool call: returns one list of chosen labels per question; ToolFailure
        (`question.rejected`) when the user rejects. Malformed questions are the model's failure to read."""
        tool = QuestionV2Tool(messageID=message_id, callID=call_id)

        async def ask(questions: list[dict[str, Any]]) -> list[list[str]]:
            try:
                infos = [QuestionV2Info.model_validate(q) for q in questions]
            except ValueError as bad:
                raise ToolFailure(f"Invalid questions: {bad}", session_errors.TOOL_INVALID_INPUT) from None
            request = QuestionV2Request(id=question_id(), sessionID=session_id, questions=infos, tool=tool)
            self._store.publish_live(ev.QuestionAsked(**request.model_dump()), session_id)
            answers: list[list[str]] = await self._waiting.wait(request, self._publish_rejected)
            return answers

        return ask

    def _publish_rejected(self, request: QuestionV2Request) -> None:
        self._store.publish_live(ev.QuestionRejected(sessionID=request.sessionID, requestID=request.id),
                                 request.sessionID)

    def pending(self, session_id: str | None = None) -> list[QuestionV2Request]:
        return self._waiting.pending(session_id)

    def _take(self, session_id: str, request_id: str) -> Waiting[QuestionV2Request]:
        waiting = self._waiting.find(session_id, request_id)
        if waiting is None or not self._waiting.take(waiting):
            raise QuestionNotFoundError(requestID=request_id)
        return waiting

    def reply(self, session_id: str, request_id: str, answers: list[list[str]]) -> None:
        waiting = self._take(session_id, request_id)
        self._store.publish_live(ev.QuestionReplied(sessionID=session_id, requestID=request_id, answers=answers),
                                 session_id)
        waiting.answer.set_result(answers)

    def reject(self, session_id: str, request_id: str) -> None:
        waiting = self._take(session_id, request_id)
        self._publish_rejected(waiting.request)
        waiting.answer.set_exception(ToolFailure(REJECTED, session_errors.QUESTION_REJECTED))
