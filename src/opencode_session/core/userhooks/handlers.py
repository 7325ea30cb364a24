"""Running one hook handler: a shell command in its own process group (the event as JSON on stdin, killed with its
group at the timeout) or an HTTP POST; what it answered, or why it could not answer."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import anyio
import httpx2 as httpx

from ..tools.builtin.bash import shell_for
from .config import HookHandler

# What is kept of a handler's stdout and stderr (the rest is dropped: a hook is not a data channel).
MAX_OUTPUT_BYTES: Final = 64 * 1024


@dataclass(frozen=True)
class HandlerAnswer:
    """What one handler said: an exit code with its output (HTTP: 0 and the body), or `failure` when it could not
    run to an answer (not found, timed out, a refused connection, an HTTP error status)."""

    exit_code: int
    stdout: str = ""
    stderr: str = ""
    failure: str | None = None


async def run_handler(handler: HookHandler, event: Mapping[str, Any], cwd: Path,
                      env: Mapping[str, str]) -> HandlerAnswer:
    payload = json.dumps(event, ensure_ascii=False).encode()
    if handler.type == "http":
        return await _post(handler, payload)
    return await _command(handler, payload, cwd, env)


async def _command(handler: HookHandler, payload: bytes, cwd: Path, env: Mapping[str, str]) -> HandlerAnswer:
    try:
        process = await anyio.open_process([shell_for(env), "-c", handler.target], cwd=cwd, env=dict(env),
                                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                           start_new_session=True)
    except OSError as exc:
        return HandlerAnswer(-1, failure=f"could not start: {exc.strerror or exc}")
    out: list[bytes] = []
    err: list[bytes] = []
    try:
        with anyio.fail_after(handler.timeout_s):
            async with process, anyio.create_task_group() as group:
                assert process.stdin is not None and process.stdout is not None and process.stderr is not None
                group.start_soon(_read, process.stdout, out)
                group.start_soon(_read, process.stderr, err)
                try:
                    await process.stdin.send(payload)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                    pass  # the hook did not read its input: it may still answer
                await process.stdin.aclose()
                await process.wait()
    except TimeoutError:
        _kill_group(process.pid)
        return HandlerAnswer(-1, failure=f"timed out after {handler.timeout_s:g} s")
    except BaseException:
        _kill_group(process.pid)  # an interrupt: the hook's whole group goes with the call it ran for
        raise
    code = process.returncode if process.returncode is not None else -1
    return HandlerAnswer(code, _text(out), _text(err))


async def _read(stream: Any, into: list[bytes]) -> None:
    kept = 0
    async for chunk in stream:
        if kept < MAX_OUTPUT_BYTES:
            into.append(chunk[: MAX_OUTPUT_BYTES - kept])
            kept += len(into[-1])


def _text(chunks: list[bytes]) -> str:
    return b"".join(chunks).decode("utf-8", errors="replace").strip()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def _post(handler: HookHandler, payload: bytes) -> HandlerAnswer:
    headers = {"content-type": "application/json", **handler.headers}
    try:
        async with httpx.AsyncClient(timeout=handler.timeout_s, follow_redirects=False) as client:
            response = await client.post(handler.target, content=payload, headers=headers)
    except httpx.TimeoutException:
        return HandlerAnswer(-1, failure=f"timed out after {handler.timeout_s:g} s")
    except httpx.HTTPError as exc:
        return HandlerAnswer(-1, failure=f"request failed: {type(exc).__name__}: {exc}")
    body = response.content[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace").strip()
    if not response.is_success:
        return HandlerAnswer(-1, stderr=body, failure=f"answered HTTP {response.status_code}")
    return HandlerAnswer(0, body)
