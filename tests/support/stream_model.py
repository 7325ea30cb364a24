"""A loopback model (OpenAI Chat Completions, streamed) whose first answer streams many small pieces: `reasoning`
reasoning deltas, `deltas` text deltas ("w0 w1 ..."), then a `todowrite` call whose arguments arrive in `pieces`
parts; the tool's result is answered with "done". A gap of `gap` seconds between pieces paces the stream as a model
would (each piece is then its own live event); `emitted` keeps when each streamed text delta left (perf_counter), by its
text. Used where live events are measured across hosts."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import StreamingResponse

from opencode_session.core.execution.title import TITLE_SYSTEM
from tests.support.fake_openai import chunk
from tests.support.tool_model import ToolModel, _user_text

TODOS = [{"content": f"step {n}", "status": "pending", "priority": "low"} for n in range(20)]


def expected_text(deltas: int, prefix: str = "") -> str:
    return "".join(f"{prefix}w{n} " for n in range(deltas))


class StreamModel(ToolModel):
    def __init__(self, *, deltas: int = 200, reasoning: int = 20, pieces: int = 30, gap: float = 0.002) -> None:
        super().__init__()
        self.deltas, self.reasoning, self.pieces, self.gap = deltas, reasoning, pieces, gap
        self.emitted: dict[str, float] = {}

    def _frames(self, prefix: str) -> list[dict[str, Any]]:
        frames = [chunk({"role": "assistant", "content": ""})]
        frames += [chunk({"reasoning_content": f"r{n} "}) for n in range(self.reasoning)]
        frames += [chunk({"content": f"{prefix}w{n} "}) for n in range(self.deltas)]
        arguments = json.dumps({"todos": TODOS})
        size = -(-len(arguments) // self.pieces)
        parts = [arguments[i:i + size] for i in range(0, len(arguments), size)]
        frames.append(chunk({"tool_calls": [{"index": 0, "id": "call_todo", "type": "function",
                                             "function": {"name": "todowrite", "arguments": parts[0]}}]}))
        frames += [chunk({"tool_calls": [{"index": 0, "function": {"arguments": part}}]}) for part in parts[1:]]
        frames.append(chunk({}, finish_reason="tool_calls"))
        return frames

    async def _answer(self, request: Request) -> StreamingResponse:
        payload = json.loads(await request.body())
        messages = payload.get("messages", [])
        with self._lock:
            self.requests += 1
        last = messages[-1] if messages else {}
        if messages and messages[0].get("content") == TITLE_SYSTEM:
            frames, gap = [chunk({"role": "assistant", "content": "A title"}), chunk({}, finish_reason="stop")], 0.0
        elif last.get("role") == "tool":
            frames, gap = [chunk({"role": "assistant", "content": "done"}), chunk({}, finish_reason="stop")], 0.0
        else:
            # "stream as NAME" makes the text deltas "NAME:w0 ", so several sessions' deltas stay apart
            words = _user_text(last).split()
            prefix = words[2] + ":" if words[:2] == ["stream", "as"] and len(words) > 2 else ""
            frames, gap = self._frames(prefix), self.gap

        async def body() -> AsyncIterator[bytes]:
            for frame in frames:
                yield f"data: {json.dumps(frame)}\n\n".encode()
                content = frame["choices"][0]["delta"].get("content") if gap and frame.get("choices") else None
                if content:  # a text delta of the streamed answer
                    self.emitted[content] = time.perf_counter()
                if gap:
                    await asyncio.sleep(gap)  # the model's own pace between pieces
            yield b"data: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")
