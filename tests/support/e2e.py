"""Driving a session over HTTP in end-to-end tests: prompt and wait for idle, then read the durable log."""

from __future__ import annotations

from typing import Any

import anyio

from opencode_session.client import OpenCodeClient


async def prompt_and_wait(client: OpenCodeClient, sid: str, text: str) -> None:
    await client.session.prompt(sid, prompt={"text": text})
    with anyio.fail_after(40):
        await client.session.wait(sid)


async def durable_log(client: OpenCodeClient, sid: str) -> list[Any]:
    """The session's durable events so far; the background title may land before or after the execution's end, so
    it is left out of the order tests check."""
    return [e async for e in client.session.log(sid, follow=False) if e.type not in ("log.synced", "session.renamed")]


def types(log: list[Any]) -> list[str]:
    return [e.type for e in log]


__all__ = ["durable_log", "prompt_and_wait", "types"]
