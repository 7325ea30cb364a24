"""The `question` tool: asks the user one or more multiple-choice questions and waits for the answers."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..arguments import Arguments, schema_of
from ..tool import ToolContext, ToolFailure, ToolOutput


class QuestionOption(Arguments):
    label: str = Field(description="The choice as shown, in a few words")
    description: str = Field(description="What choosing it means")


class Question(Arguments):
    question: str = Field(description="The full question")
    header: str = Field(description="A very short label for the question (at most 30 characters)")
    options: list[QuestionOption] = Field(description="The choices offered")
    multiple: bool = Field(False, description="Whether several choices may be picked")


class QuestionArguments(BaseModel):
    questions: list[Question] = Field(min_length=1, description="The questions to ask")


class QuestionTool:
    name = "question"
    changes_files = False
    description = (
        "Ask the user questions and wait for the answers. Use it when a decision is theirs to make: a preference, an"
        " ambiguous requirement, a choice between approaches.\n"
        "\n"
        "- Each question offers options with a short label and a description; the user may also answer in their own"
        " words.\n"
        "- Set `multiple` when more than one option may be picked.\n"
        "- Ask only what you cannot reasonably decide yourself."
    )
    arguments = QuestionArguments
    parameters = schema_of(QuestionArguments)

    async def execute(self, args: QuestionArguments, ctx: ToolContext) -> ToolOutput:
        questions = [q.model_dump(exclude_unset=True) for q in args.questions]  # as the model wrote them
        await ctx.permit("question", [q["header"] for q in questions])
        if ctx.questioner is None:
            raise ToolFailure("No one can answer questions in this session. Decide yourself, or state the open "
                              "question in your reply.")
        answers = await ctx.questioner(questions)
        pairs = [f"\"{q['question']}\" = \"{', '.join(a) if a else '(no answer)'}\""
                 for q, a in zip(questions, answers, strict=False)]
        text = "The user answered: " + "; ".join(pairs) + ". Continue with these answers in mind."
        return ToolOutput.of_text(text, {"answers": answers}, title=f"Asked {len(questions)} question"
                                  + ("s" if len(questions) != 1 else ""))
