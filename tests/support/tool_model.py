"""A loopback model (OpenAI Chat Completions, streamed) that needs no script: asked with a user prompt last, it
calls `bash` to append the prompt's marker to `runs.log` in the Location; asked with a tool result last, it answers
"done", unless that result says its host was lost while the call ran: then it makes the call again. So every Step
it runs is either one tool call or one answer, and `runs.log` counts how often each session's tool really ran. A
prompt that starts with "say" is answered at once, without a tool (one Step per prompt). `hold` pauses every first
answer until released (a busy session to kill its host under); `tool_hold` makes each call note its start in
`started.log`, then wait until that file exists in the Location before it counts its run (a host paused mid-tool).
Every request's messages are kept in `received`, in arrival order (to find a request sent twice). A prompt
`loop MARKER` runs a loop of calls (`MARKER.N` appended to `runs.log`, each taking `loop_s`) until `finish` is set:
then the next request of the loop is answered "done"."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import StreamingResponse
from starlette.routing import Route

from opencode_session.core.execution.title import TITLE_SYSTEM
from tests.support.fake_openai import chunk


def config(base_url: str, bash: str = "allow") -> dict[str, Any]:
    """The opencode.json of a host using this model (bash allowed without asking, unless `bash` says otherwise)."""
    return {"model": "loop/tool-model", "permission": {"bash": bash},
            "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                                  "options": {"baseURL": base_url, "apiKey": "k"},
                                  "models": {"tool-model": {}}}}}


def _user_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(p.get("text", "") for p in content if isinstance(p, dict))
    return str(content or "")


class ToolModel:
    def __init__(self) -> None:
        self.requests = 0
        self.received: list[str] = []  # each request's system text and messages, as canonical JSON
        self.tool_hold: str | None = None  # a file name: tool calls wait for it before counting their run
        self.holding = threading.Event()  # set: first answers wait for `release`
        self.release = threading.Event()
        self.finish = threading.Event()  # set: every loop answers "done" at its next request
        self.loop_s = 0.2  # how long each call of a loop runs
        self.held = threading.Semaphore(0)  # one release per held answer reached
        self._lock = threading.Lock()
        self.base_url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    async def _answer(self, request: Request) -> StreamingResponse:
        payload = json.loads(await request.body())
        messages = payload.get("messages", [])
        with self._lock:
            self.requests += 1
            self.received.append(json.dumps(messages, sort_keys=True))
        last = messages[-1] if messages else {}
        users = [m for m in messages if m.get("role") == "user"]
        marker = (_user_text(users[-1]).split() or ["none"])[-1] if users else "none"
        stale = last.get("role") == "tool" and "may or may not have taken effect" in str(last.get("content"))
        looping = bool(users) and _user_text(users[-1]).startswith("loop")
        if looping and not (messages and messages[0].get("content") == TITLE_SYSTEM):
            after = messages[len(messages) - 1 - messages[::-1].index(users[-1]):]
            done = sum(m.get("role") == "tool" for m in after)  # calls of this loop settled so far (stale ones too)
            if self.finish.is_set():
                frames = [chunk({"role": "assistant", "content": "done"}), chunk({}, finish_reason="stop")]
            else:
                arguments = json.dumps({"command": f"echo {marker}.{done} >> runs.log; sleep {self.loop_s}",
                                        "description": "one more round"})
                frames = [chunk({"role": "assistant", "content": ""}),
                          chunk({"tool_calls": [{"index": 0, "id": f"call_{marker}_{done}", "type": "function",
                                                 "function": {"name": "bash", "arguments": arguments}}]}),
                          chunk({}, finish_reason="tool_calls")]
            hold = False
        elif messages and messages[0].get("content") == TITLE_SYSTEM:
            frames = [chunk({"role": "assistant", "content": "A title"}), chunk({}, finish_reason="stop")]
            hold = False
        elif (last.get("role") == "tool" and not stale) or _user_text(last).startswith("say"):
            frames = [chunk({"role": "assistant", "content": "done"}), chunk({}, finish_reason="stop")]
            hold = False
        else:  # a prompt, or a call whose host was lost mid-run: (checked and) made again
            command = f"echo {marker} >> runs.log"
            if self.tool_hold:
                command = (f"echo {marker} >> started.log; while [ ! -e {self.tool_hold} ]; do sleep 0.02; done; "
                           + command)
            arguments = json.dumps({"command": command, "description": "count a run"})
            frames = [chunk({"role": "assistant", "content": ""}),
                      chunk({"tool_calls": [{"index": 0, "id": f"call_{marker}{'_again' if stale else ''}",
                                             "type": "function",
                                             "function": {"name": "bash", "arguments": arguments}}]}),
                      chunk({}, finish_reason="tool_calls")]
            hold = self.holding.is_set() and not stale

        async def body() -> AsyncIterator[bytes]:
            yield f"data: {json.dumps(frames[0])}\n\n".encode()
            if hold:
                self.held.release()
                while not self.release.is_set():
                    await asyncio.to_thread(self.release.wait, 0.5)
            for frame in frames[1:]:
                yield f"data: {json.dumps(frame)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        app = Starlette(routes=[Route("/v1/chat/completions", self._answer, methods=["POST"])])
        self._server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_level="warning", access_log=False,
                                                     http="h11", timeout_graceful_shutdown=1))
        started = threading.Event()

        def run() -> None:
            assert self._server is not None
            original = self._server.startup

            async def startup(sockets: Any = None) -> None:
                await original(sockets=sockets)
                started.set()

            self._server.startup = startup  # type: ignore[method-assign]
            asyncio.run(self._server.serve(sockets=[sock]))

        self._thread = threading.Thread(target=run, name="tool-model", daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the tool model did not start")

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(10)
