"""MCP servers as `GET /api/mcp` reports them: OpenCode's MCP status of each configured server, by name."""

from __future__ import annotations

from typing import Literal

from .base import Struct


class McpServerStatus(Struct):
    """`connected`, `disabled` (`enabled: false`), or `failed` with the `error` (it is being restarted with backoff,
    unless its configuration is the problem); `starting`, or `stopped`: not running (a status read starts nothing;
    the next Step at the Location, or `POST /api/mcp/connect`, starts it)."""

    status: Literal["connected", "disabled", "failed", "starting", "stopped"]
    error: str | None = None
