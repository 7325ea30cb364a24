"""The public shapes of a question a tool asks the user: the questions with their options, and the pending request."""

from __future__ import annotations

from pydantic import Field

from .base import Struct
from .ids import QuestionID, SessionID


class QuestionV2Option(Struct):
    label: str = Field(description="Display text (1-5 words, concise)")
    description: str = Field(description="Explanation of choice")


class QuestionV2Info(Struct):
    question: str = Field(description="Complete question")
    header: str = Field(description="Very short label (max 30 chars)")
    options: list[QuestionV2Option] = Field(description="Available choices")
    multiple: bool | None = None
    custom: bool | None = None


class QuestionV2Tool(Struct):
    """The tool call that asked."""

    messageID: str
    callID: str


class QuestionV2Request(Struct):
    id: QuestionID
    sessionID: SessionID
    questions: list[QuestionV2Info] = Field(description="Questions to ask")
    tool: QuestionV2Tool | None = None


QuestionV2Answer = list[str]


class QuestionV2Reply(Struct):
    answers: list[QuestionV2Answer] = Field(
        description="User answers in order of questions (each answer is an array of selected labels)")
