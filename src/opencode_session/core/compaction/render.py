"""The texts of compaction (pure): history serialized as plain transcript lines, the summary prompts and template,
the validation of a summary, and the checkpoint block a completed compaction lowers to."""

from __future__ import annotations

import json

from ...schema import message_data as md
from ..llm import model as llm
from ..tools.output import settled_text

TOOL_OUTPUT_MAX_CHARS = 2_000
TRUNCATED = "\n[truncated]"

HEADINGS = ("## Objective", "## Requirements", "## Decisions", "## Work State", "## Next Move",
            "## Relevant Files", "## Additional Context")

TEMPLATE = """\
## Objective
- What the user is trying to achieve, in one or two bullets.

## Requirements
- Constraints, preferences and acceptance criteria the user stated that still apply.

## Decisions
- Choices already made, with the reason when it matters later.

## Work State
### Completed
- Work that is done and verified.
### Active
- Work in progress, and exactly where it stands.
### Blocked
- What cannot proceed, and what it waits for.

## Next Move
- The single next action to take.

## Relevant Files
- path: why it matters.

## Additional Context
- Anything else needed to continue (commands, error messages, identifiers)."""

SUMMARY_SYSTEM = """\
You condense a coding-agent conversation into a checkpoint that another agent will resume from without seeing \
the original. You only write the checkpoint: you never continue the work, never answer the user, and never call \
tools."""

_RULES = """\
Rules:
- Cover only the conversation given. Newer messages may follow your checkpoint verbatim, so do not guess beyond it.
- Use short bullets. Keep file paths, symbols, commands, error texts and identifiers exactly as written.
- Keep only user requests that are still open; drop ones already satisfied.
- Keep the state of version control and of any workflow in progress.
- Leave out details of the surrounding environment that the agent can look up again.
- Do not mention that this is a summary or a checkpoint.
- Reply with the filled-in template only, starting with "## Objective"."""

FRESH_REQUEST = "Write the checkpoint for the conversation above, using exactly this template:"
UPDATE_REQUEST = ("The conversation above starts from an earlier checkpoint. Write one new checkpoint that merges "
                  "the earlier one with everything that happened after it: carry forward what still holds, update "
                  "what changed, and drop what was finished or abandoned. Use exactly this template:")
REMINDER = ("Your reply did not use the checkpoint template. Without calling tools, reply again with the checkpoint "
            "as text, using the template's section headings exactly.")


def summary_prompt(updating: bool) -> str:
    """The closing instruction of a summary request."""
    return f"{UPDATE_REQUEST if updating else FRESH_REQUEST}\n\n{TEMPLATE}\n\n{_RULES}"


def follows_template(text: str) -> bool:
    """Whether a summary has at least one of the template's section headings as a line of its own."""
    return any(line.strip() in HEADINGS for line in text.splitlines())


def _clip(text: str, limit: int = TOOL_OUTPUT_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit] + TRUNCATED


def _tool_lines(part: md.SessionMessageAssistantToolData) -> list[str]:
    state = part["state"]
    lines = [f"[Assistant tool call]: {part['name']}({json.dumps(state.get('input') or {}, ensure_ascii=False)})"]
    if state["status"] == "completed":
        lines.append(f"[Tool result]: {_clip(settled_text(state))}")
    elif state["status"] == "error":
        lines.append(f"[Tool error]: {_clip(state['error']['message'])}")
    return lines


def serialize(message: md.SessionMessageData) -> str:
    """One message as transcript lines for a summary request or a recent tail ("" when it shows nothing to a
    model: switches, Instruction Updates, compactions, unsettled calls)."""
    lines: list[str] = []
    if message["type"] == "user":
        if message.get("text"):
            lines.append(f"[User]: {message['text']}")
        for f in message.get("files") or ():
            lines.append(f"[Attached {f['mime']}: {f.get('name') or f['uri']}]")
    elif message["type"] == "synthetic":
        lines.append(f"[Synthetic context]: {message['text']}")
    elif message["type"] == "shell":
        lines.append(f"[Shell]: {message['command']}\n{_clip(message['output'])}")
    elif message["type"] == "assistant":
        for part in message["content"]:
            if part["type"] == "text" and part["text"]:
                lines.append(f"[Assistant]: {part['text']}")
            elif part["type"] == "reasoning" and part["text"]:
                lines.append(f"[Assistant reasoning]: {part['text']}")
            elif part["type"] == "tool" and part["state"]["status"] in ("completed", "error"):
                lines.extend(_tool_lines(part))
    return "\n\n".join(lines)


def checkpoint_text(summary: str, recent: str) -> str:
    """The block a completed compaction shows the model in place of the history it replaced."""
    recent_block = f"\n\n<recent-context>\n{recent}\n</recent-context>" if recent else ""
    return ("<conversation-checkpoint>\n"
            "What follows records the earlier part of this conversation: a summary, then the latest exchanges as "
            "they happened. It is background to continue from, not a new request.\n\n"
            f"<summary>\n{summary}\n</summary>{recent_block}\n</conversation-checkpoint>")


def lower_compaction(message: md.SessionMessageCompactionData) -> list[llm.LLMMessage]:
    """A completed compaction as one user message holding its checkpoint block; a running or failed one shows
    nothing. No provider-native state crosses it."""
    if message.get("status", "completed") != "completed":
        return []
    return [llm.UserMessage([llm.TextPart(checkpoint_text(message["summary"], message["recent"]))])]
