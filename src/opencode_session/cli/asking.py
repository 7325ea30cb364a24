"""Answering a session's permission asks from the command line: on a terminal the user picks with single keys
(allow once, allow always, reject with optional feedback); without one a flag decides, and by default it rejects."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Literal

from rich.text import Text

from ..client.generated import OpenCodeClient
from .turn import Sink

Policy = Literal["ask", "once", "reject"]  # ask: the user at the terminal; once: --yes; reject: --no or no terminal
WANTS = {"bash": "run", "edit": "edit", "write": "write", "read": "read",
         "external_directory": "reach outside the project:"}
KEYS = "  [o] allow once  [a] allow always  [r] reject"


def describe(ask: dict[str, Any]) -> str:
    """What a permission request wants, in one line: the tool and its command, path or outside directory."""
    action = ask.get("action", "?")
    resources = ", ".join(ask.get("resources") or [])
    return f"{action} wants to {WANTS.get(action, 'use')} {resources}".rstrip()


class Answerer:
    """A sink in front of the view: answers each `permission.v2.asked` of the session, one at a time.

    With the `ask` policy the pending request is shown through `show` (a line above the prompt) and keys go to
    `key`, which says whether it took the key; `flag` names what the other policies came from, for the notice."""

    def __init__(self, client: OpenCodeClient, session_id: str, then: Sink, notice: Callable[[str], None],
                 policy: Policy, show: Callable[[Text | None], None] | None = None, flag: str = "") -> None:
        self.client = client
        self.session_id = session_id
        self.then = then
        self.notice = notice
        self.policy = policy
        self.show = show
        self.flag = flag
        self._pending: list[dict[str, Any]] = []
        self._feedback: str | None = None  # being typed after choosing reject
        self._replies: set[asyncio.Task[None]] = set()

    def __call__(self, event: dict[str, Any]) -> None:
        self.then(event)
        data = event.get("data") or {}
        if event.get("type") == "permission.v2.asked":
            if self.policy == "ask":
                self._pending.append(data)
                self._draw()
            else:
                verdict = "allowed once" if self.policy == "once" else "rejected"
                self.notice(f"permission: {describe(data)} — {verdict} ({self.flag})")
                self._reply(data, "once" if self.policy == "once" else "reject")
        elif event.get("type") == "permission.v2.replied":  # answered elsewhere (another client): stop asking
            self._drop(data.get("requestID"))

    def key(self, key: str) -> bool:
        """Take a key for the request on screen; False when none is."""
        if not self._pending:
            return False
        ask = self._pending[0]
        if self._feedback is not None:
            if key in ("\r", "\n"):
                message = self._feedback.strip() or None
                self._settle(ask, "reject", f"rejected{': ' + message if message else ''}", message)
            elif key in ("\x7f", "\x08"):
                self._feedback = self._feedback[:-1]
            elif key.isprintable():
                self._feedback += key
            self._draw()
            return True
        choice = key.lower()
        if choice in ("o", "y"):
            self._settle(ask, "once", "allowed once")
        elif choice == "a":
            self._settle(ask, "always", "allowed always")
        elif choice in ("r", "n"):
            self._feedback = ""
        self._draw()
        return True

    def _settle(self, ask: dict[str, Any], reply: Literal["once", "always", "reject"], said: str,
                message: str | None = None) -> None:
        self._drop(ask.get("id"))
        self.notice(f"permission: {describe(ask)} — {said}")
        self._reply(ask, reply, message)

    def _drop(self, request_id: Any) -> None:
        if self._pending and self._pending[0].get("id") == request_id:
            self._feedback = None
        self._pending = [a for a in self._pending if a.get("id") != request_id]
        self._draw()

    def _draw(self) -> None:
        if self.show is None:
            return
        if not self._pending:
            self.show(None)
            return
        line = Text.assemble(("? ", "bold yellow"), (describe(self._pending[0]), "bold"))
        if self._feedback is None:
            line.append(KEYS, style="cyan")
        else:
            line.append("\n  feedback for the model (Enter sends, empty for none): ", style="cyan")
            line.append(self._feedback + "▏")
        self.show(line)

    def _reply(self, ask: dict[str, Any], reply: Literal["once", "always", "reject"],
               message: str | None = None) -> None:
        async def send() -> None:
            try:
                await self.client.session.permission_reply(self.session_id, ask["id"], reply=reply, message=message)
            except Exception as failed:  # noqa: BLE001 - shown; the request stays pending for another client
                self.notice(f"could not answer the permission request: {failed}")

        task = asyncio.get_running_loop().create_task(send())
        self._replies.add(task)
        task.add_done_callback(self._replies.discard)
