"""Taking turns back from the command line: `ocs revert` (stage, show the files, confirm, commit), `ocs fork`, and
the interactive `/undo` and `/redo`, which move a staged revert one prompt back or forward."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..client.generated import OpenCodeClient
from .hosts import open_host
from .inspect import every_message
from .run import EXIT_FAILED, EXIT_OK


async def prompts(client: OpenCodeClient, session_id: str) -> list[dict[str, Any]]:
    """The session's user messages (wire data), oldest first."""
    return [m for m in await every_message(client, session_id) if m["type"] == "user"]


def describe(state: Any) -> list[str]:
    """What a staged revert did, a line each: the files it restored, and why it left any alone."""
    lines = []
    for diff in state.files or []:
        what = {"added": "restored", "deleted": "removed", "modified": "restored"}[diff.status]
        counts = f"  +{diff.additions} -{diff.deletions}" if diff.additions or diff.deletions else ""
        lines.append(f"  {what} {diff.path}{counts}")
    if not lines:
        lines.append("  no files changed")
    if state.notice:
        lines.append(f"  {state.notice}")
    return lines


def _quote(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[:width - 1] + "…"


async def undo(client: OpenCodeClient, session_id: str) -> tuple[Any, Any] | None:
    """Stage a revert to the latest prompt, or move a staged one a prompt further back; (state, that prompt), or
    None when there is nothing earlier to undo."""
    asked = await prompts(client, session_id)
    staged = (await client.session.get(session_id)).revert
    if staged is not None:
        asked = asked[:next((i for i, m in enumerate(asked) if m["id"] == staged.messageID), len(asked))]
    if not asked:
        return None
    return await client.session.revert_stage(session_id, message_id=asked[-1]["id"]), asked[-1]


async def redo(client: OpenCodeClient, session_id: str) -> tuple[Any, Any] | None:
    """Move a staged revert a prompt forward, or clear it when it is at the latest prompt; (state, prompt) after
    a move, None after a clear. Without a staged revert, nothing happens (None)."""
    staged = (await client.session.get(session_id)).revert
    if staged is None:
        return None
    asked = await prompts(client, session_id)
    later = [m for i, m in enumerate(asked) if i > 0 and asked[i - 1]["id"] == staged.messageID]
    if not later:
        await client.session.revert_clear(session_id)
        return None
    return await client.session.revert_stage(session_id, message_id=later[0]["id"]), later[0]


async def slash(client: OpenCodeClient, session_id: str, command: str, say: Callable[[str], None]) -> None:
    """Run `/undo` or `/redo` and say what it did."""
    if command == "/undo":
        undone = await undo(client, session_id)
        if undone is None:
            say("nothing to undo")
            return
        state, prompt = undone
        say(f"undid from “{_quote(prompt['text'])}” on (your next message commits it; /redo takes it back):")
    else:
        staged = (await client.session.get(session_id)).revert
        redone = await redo(client, session_id)
        if redone is None:
            say("nothing to redo" if staged is None else "redone: everything is back as the agent left it")
            return
        state, prompt = redone
        say(f"redid up to “{_quote(prompt['text'])}”; still undone from there on:")
    for line in describe(state):
        say(line)


def _confirm(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def revert_command(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                         message_id: str | None, yes: bool) -> int:
    async with open_host(attach, db, directory, create=False) as client:
        if message_id is None:
            asked = await prompts(client, session_id)
            if not asked:
                print(f"ocs revert: session {session_id} has no prompt to revert", file=sys.stderr)
                return EXIT_FAILED
            message_id = asked[-1]["id"]
        state = await client.session.revert_stage(session_id, message_id=message_id)
        print(f"Staged a revert of {session_id} from message {message_id} on:")
        for line in describe(state):
            print(line)
        if not yes and not sys.stdin.isatty():
            print("ocs revert: not a terminal to confirm on (pass --yes); the files are put back", file=sys.stderr)
            await client.session.revert_clear(session_id)
            return EXIT_FAILED
        if yes or _confirm("Remove that message and everything after it from the session?"):
            await client.session.revert_commit(session_id)
            print("Committed: the session goes on from before that message.")
            return EXIT_OK
        await client.session.revert_clear(session_id)
        print("Nothing reverted: the files are back as the agent left them.")
        return EXIT_FAILED


async def fork_command(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                       message_id: str | None) -> int:
    async with open_host(attach, db, directory, create=False) as client:
        fork = await client.session.fork(session_id, message_id=message_id)
    print(fork.id)
    print(f"Forked as “{fork.title}”; continue it with `ocs run --session {fork.id}`.", file=sys.stderr)
    return EXIT_OK
