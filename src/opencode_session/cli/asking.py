"""Answering what a session asks its user from the command line: permission asks (allow once, allow always, reject
with optional feedback) and questions (pick an option, type an answer, Esc dismisses), by single keys on a terminal;
without one a flag decides, and by default both are declined."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from ..client.generated import OpenCodeClient
from .turn import Sink

if TYPE_CHECKING:
    from rich.text import Text  # drawn only where a prompt is shown (interactive): `ocs run` does not load rich

Policy = Literal["ask", "once", "reject"]  # ask: the user at the terminal; once: --yes; reject: --no or no terminal
WANTS = {"bash": "run", "edit": "edit", "write": "write", "read": "read",
         "external_directory": "reach outside the project:"}
KEYS = "  [o] allow once  [a] allow always  [r] reject"
ENTER, BACKSPACE, ESC = ("\r", "\n"), ("\x7f", "\x08"), "\x1b"


def describe(ask: dict[str, Any]) -> str:
    """What a permission request wants, in one line: the tool and its command, path or outside directory."""
    action = ask.get("action", "?")
    resources = ", ".join(ask.get("resources") or [])
    return f"{action} wants to {WANTS.get(action, 'use')} {resources}".rstrip()


class Answerer:
    """A sink in front of the view: answers each `permission.v2.asked` and `question.v2.asked` of the session, one
    request at a time.

    With the `ask` policy the pending request is shown through `show` (lines above the prompt) and keys go to
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
        self._pending: list[tuple[str, dict[str, Any]]] = []  # ("permission" | "question", the request)
        self._typing: str | None = None  # reject feedback, or an answer in the user's own words, being typed
        self._answers: list[list[str]] = []  # the current question request's answers so far
        self._chosen: list[str] = []  # options picked for the current question with `multiple`
        self._sending: set[asyncio.Task[None]] = set()
        self.declined = False  # a permission or question was declined by the policy (--no, or no terminal)

    def __call__(self, event: dict[str, Any]) -> None:
        self.then(event)
        kind, data = event.get("type"), event.get("data") or {}
        if kind in ("permission.v2.asked", "question.v2.asked"):
            request = ("permission" if kind == "permission.v2.asked" else "question", data)
            if self.policy == "ask":
                self._pending.append(request)
                self._draw()
            elif request[0] == "permission":
                verdict = "allowed once" if self.policy == "once" else "rejected"
                self.declined = self.declined or self.policy != "once"
                self.notice(f"permission: {describe(data)} — {verdict} ({self.flag})")
                self._reply_permission(data, "once" if self.policy == "once" else "reject")
            elif self.policy == "once":  # --yes takes each question's first option: the one the model recommends
                answers = [[q["options"][0]["label"]] if q.get("options") else [] for q in data.get("questions", [])]
                self.notice(f"question: {_headers(data)} — answered {answers} ({self.flag})")
                self._send(self.client.session.question_reply(self.session_id, data["id"], answers=answers))
            else:
                self.declined = True
                self.notice(f"question: {_headers(data)} — dismissed ({self.flag})")
                self._send(self.client.session.question_reject(self.session_id, data["id"]))
        elif kind in ("permission.v2.replied", "question.v2.replied", "question.v2.rejected"):
            self._drop(data.get("requestID"))  # answered elsewhere (another client): stop asking

    # --- keys ----------------------------------------------------------------------------------------------------

    def key(self, key: str) -> bool:
        """Take a key for the request on screen; False when none is."""
        if not self._pending:
            return False
        kind, request = self._pending[0]
        if self._typing is not None:
            if key in ENTER:
                typed, self._typing = self._typing.strip(), None
                if kind == "permission":
                    self._permission_settled(request, "reject", f"rejected{': ' + typed if typed else ''}",
                                             typed or None)
                elif typed:
                    self._answered(request, [typed])
            elif key == ESC and kind == "question":
                self._typing = None
            elif key in BACKSPACE:
                self._typing = self._typing[:-1]
            elif key.isprintable():
                self._typing += key
        elif kind == "permission":
            self._permission_key(request, key.lower())
        else:
            self._question_key(request, key)
        self._draw()
        return True

    def _permission_key(self, request: dict[str, Any], choice: str) -> None:
        if choice in ("o", "y"):
            self._permission_settled(request, "once", "allowed once")
        elif choice == "a":
            self._permission_settled(request, "always", "allowed always")
        elif choice in ("r", "n"):
            self._typing = ""

    def _question_key(self, request: dict[str, Any], key: str) -> None:
        question = request["questions"][len(self._answers)]
        labels = [option["label"] for option in question.get("options", [])]
        if key == ESC:
            self._drop(request.get("id"))
            self.notice(f"question: {_headers(request)} — dismissed")
            self._send(self.client.session.question_reject(self.session_id, request["id"]))
        elif key.isdigit() and 1 <= int(key) <= len(labels):
            label = labels[int(key) - 1]
            if not question.get("multiple"):
                self._answered(request, [label])
            elif label in self._chosen:
                self._chosen.remove(label)
            else:
                self._chosen.append(label)
        elif key in ENTER and question.get("multiple") and self._chosen:
            self._answered(request, [label for label in labels if label in self._chosen])
        elif key.lower() == "t" and question.get("custom") is not False:
            self._typing = ""

    def _answered(self, request: dict[str, Any], answer: list[str]) -> None:
        """One question answered; once all of the request's are, the reply is sent."""
        self._answers.append(answer)
        self._chosen = []
        if len(self._answers) < len(request["questions"]):
            return
        answers = self._answers
        self._drop(request.get("id"))
        self.notice(f"question: {_headers(request)} — answered {answers}")
        self._send(self.client.session.question_reply(self.session_id, request["id"], answers=answers))

    def _permission_settled(self, request: dict[str, Any], reply: Literal["once", "always", "reject"], said: str,
                            message: str | None = None) -> None:
        self._drop(request.get("id"))
        self.notice(f"permission: {describe(request)} — {said}")
        self._reply_permission(request, reply, message)

    def _drop(self, request_id: Any) -> None:
        if self._pending and self._pending[0][1].get("id") == request_id:
            self._typing, self._answers, self._chosen = None, [], []
        self._pending = [(kind, r) for kind, r in self._pending if r.get("id") != request_id]
        self._draw()

    # --- showing and sending ---------------------------------------------------------------------------------------

    def _draw(self) -> None:
        if self.show is None:
            return
        if not self._pending:
            self.show(None)
            return
        kind, request = self._pending[0]
        if kind == "permission":
            from rich.text import Text

            line = Text.assemble(("? ", "bold yellow"), (describe(request), "bold"))
            if self._typing is None:
                line.append(KEYS, style="cyan")
            else:
                line.append("\n  feedback for the model (Enter sends, empty for none): ", style="cyan")
                line.append(self._typing + "▏")
        else:
            line = self._question_lines(request["questions"][len(self._answers)])
        self.show(line)

    def _question_lines(self, question: dict[str, Any]) -> Text:
        from rich.text import Text

        line = Text.assemble(("? ", "bold yellow"), (f"{question.get('header', '')}: ", "bold"),
                             question.get("question", ""))
        for number, option in enumerate(question.get("options", []), 1):
            mark = "[x] " if option["label"] in self._chosen else "[ ] " if question.get("multiple") else ""
            line.append(f"\n  {number}. {mark}{option['label']}", style="bold")
            line.append(f" — {option.get('description', '')}", style="dim")
        if self._typing is not None:
            line.append("\n  your answer (Enter sends, Esc goes back): ", style="cyan")
            line.append(self._typing + "▏")
            return line
        keys = "  [1-9] choose" + ("  [Enter] done" if question.get("multiple") else "")
        keys += "  [t] type an answer" if question.get("custom") is not False else ""
        line.append("\n" + keys + "  [Esc] dismiss", style="cyan")
        return line

    def _reply_permission(self, request: dict[str, Any], reply: Literal["once", "always", "reject"],
                          message: str | None = None) -> None:
        self._send(self.client.session.permission_reply(self.session_id, request["id"], reply=reply,
                                                        message=message))

    def _send(self, call: Awaitable[None]) -> None:
        async def send() -> None:
            try:
                await call
            except Exception as failed:  # noqa: BLE001 - shown; the request stays pending for another client
                self.notice(f"could not answer: {failed}")

        task = asyncio.get_running_loop().create_task(send())
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)


def _headers(request: dict[str, Any]) -> str:
    return ", ".join(q.get("header", "") for q in request.get("questions", []))
