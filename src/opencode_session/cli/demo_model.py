"""The demo's scripted model: a Chat Completions server on loopback that plays DEMO_SCRIPT, one step per request,
streaming like a real provider; its last answer is written from the tool results it was sent."""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, StreamingResponse
from starlette.routing import Route

from ..compat import ready_server
from ..core.execution.title import TITLE_SYSTEM

MODEL_ID = "scripted"
DEMO_PROMPT = "What is this project, and what is left to do in it?"
DEMO_TITLE = "Tour of the greeter project"


@dataclass(frozen=True)
class DemoStep:
    """One model turn: some text, then tool calls (name, arguments); a step without calls is the answer."""

    text: str | Callable[[list[str]], str]
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()


def _answer(results: list[str]) -> str:
    """The closing answer, from what the tools returned (so it shows they really ran)."""
    def result(marker: str) -> str:
        return next((r for r in results if marker in r), "")

    files = sorted({line.rsplit("/", 1)[-1] for line in result("README.md").splitlines() if line.startswith("/")})
    todo = [line.split("- [ ]", 1)[1].strip() for line in result("# greeter").splitlines() if "- [ ]" in line]
    functions = re.findall(r"def (\w+)\(", result("def "))
    ran = [line.strip() for line in result("Bonjour").splitlines() if line.strip().startswith(("Hello", "Bonjour"))]
    return "\n".join([
        "**greeter** is a tiny Python library that greets people by name.",
        "",
        f"- Files: {', '.join(f'`{f}`' for f in files) or 'none found'}.",
        f"- `greet.py` defines {', '.join(f'`{f}()`' for f in functions) or 'no functions'}.",
        "",
        "Left to do, according to the README:",
        "",
        *[f"{n}. {item}" for n, item in enumerate(todo, 1)],
        "",
        "I did the first: `greet(name, lang=\"fr\")` now greets in French, and `python3 greet.py` prints:",
        "",
        "```",
        *(ran or ["(nothing: the command did not run)"]),
        "```",
    ])


GREET_BEFORE = 'def greet(name: str) -> str:\n    return f"Hello, {name}!"\n'
GREET_AFTER = ('def greet(name: str, lang: str = "en") -> str:\n    if lang == "fr":\n'
               '        return f"Bonjour, {name} !"\n    return f"Hello, {name}!"\n')
MAIN = '\n\nif __name__ == "__main__":\n    print(greet("world"))\n'

# The session the demo shows: look around, do the first item of the README's to-do list, check it, answer.
DEMO_SCRIPT: tuple[DemoStep, ...] = (
    DemoStep("I'll start by listing the files in the project.", (("glob", {"pattern": "**/*"}),)),
    DemoStep("Now the README and the code it talks about.",
             (("read", {"path": "README.md"}), ("read", {"path": "greet.py"}))),
    DemoStep("The first to-do item is greeting in French: I'll add a `lang` argument, and a French line to the "
             "example.",
             (("edit", {"path": "greet.py", "oldString": GREET_BEFORE + MAIN,
                        "newString": GREET_AFTER + MAIN + '    print(greet("monde", lang="fr"))\n'}),)),
    DemoStep("Let me run it to check.", (("bash", {"command": "python3 greet.py"}),)),
    DemoStep(_answer),
)


def _chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
    body: dict[str, Any] = {"id": "chatcmpl-demo", "object": "chat.completion.chunk", "created": 0, "model": MODEL_ID,
                            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if usage is None
                            else []}
    if usage is not None:
        body["usage"] = usage
    return f"data: {json.dumps(body)}\n\n".encode()


def _words(text: str) -> list[str]:
    return re.findall(r"\S+\s*|\s+", text)


@dataclass
class DemoModel:
    """`async with DemoModel(pace) as model:` then point a provider at `model.base_url`."""

    pace: float = 0.0  # seconds between streamed pieces, so a person can watch the text arrive
    script: tuple[DemoStep, ...] = DEMO_SCRIPT
    base_url: str = ""
    _server: uvicorn.Server | None = field(default=None, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)

    async def __aenter__(self) -> DemoModel:
        app = Starlette(routes=[Route("/v1/chat/completions", self._complete, methods=["POST"])])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        ready = asyncio.Event()
        self._server = ready_server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False), ready)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        await ready.wait()
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task

    async def _complete(self, request: Request) -> Any:
        body = await request.json()
        messages = body.get("messages") or []
        if messages and messages[0].get("content") == TITLE_SYSTEM:
            return StreamingResponse(self._stream(DemoStep(DEMO_TITLE), prompt_chars=0),
                                     media_type="text/event-stream")
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        done = sum(1 for m in messages[last_user:] if m.get("role") == "assistant" and m.get("tool_calls"))
        if done >= len(self.script):
            return JSONResponse({"error": {"message": "the demo script is over", "type": "demo"}}, status_code=400)
        step = self.script[done]
        if callable(step.text):
            step = DemoStep(step.text([m.get("content") or "" for m in messages if m.get("role") == "tool"]))
        return StreamingResponse(self._stream(step, prompt_chars=len(json.dumps(messages))),
                                 media_type="text/event-stream")

    async def _stream(self, step: DemoStep, prompt_chars: int) -> AsyncIterator[bytes]:
        assert isinstance(step.text, str)
        yield _chunk({"role": "assistant", "content": ""})
        for piece in _words(step.text):
            await asyncio.sleep(self.pace)
            yield _chunk({"content": piece})
        for index, (name, arguments) in enumerate(step.calls):
            await asyncio.sleep(self.pace)
            call_id = f"call_demo_{index}"
            yield _chunk({"tool_calls": [{"index": index, "id": call_id, "type": "function",
                                          "function": {"name": name, "arguments": ""}}]})
            yield _chunk({"tool_calls": [{"index": index, "function": {"arguments": json.dumps(arguments)}}]})
        yield _chunk({}, finish="tool_calls" if step.calls else "stop")
        completion = len(step.text) // 4 + 10 * len(step.calls)
        yield _chunk({}, usage={"prompt_tokens": prompt_chars // 4, "completion_tokens": completion,
                                "total_tokens": prompt_chars // 4 + completion})
        yield b"data: [DONE]\n\n"
