"""The `mcp` section of `opencode.json`, entry by entry: each server's typed configuration, or why it cannot be used
(one bad entry fails that server only, never the configuration or the other servers)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Final

from pydantic import Field, TypeAdapter, ValidationError

from ..config import Config, McpLocalConfig, McpRemoteConfig

# OpenCode's default for `timeout`: listing tools and every other request to the server (ms).
DEFAULT_TIMEOUT_MS: Final = 5000
# Starting a server and its initialize handshake (a package runner may first download the server), at the most (ms).
CONNECT_TIMEOUT_MS: Final = 30_000
# A tool call without a configured `timeout` may take as long as the MCP SDKs' default request timeout (ms).
DEFAULT_CALL_TIMEOUT_MS: Final = 60_000

ServerConfig = McpLocalConfig | McpRemoteConfig
_ENTRY: TypeAdapter[ServerConfig] = TypeAdapter(Annotated[ServerConfig, Field(discriminator="type")])


@dataclass(frozen=True)
class ServerEntry:
    """One configured server: its config, or the `problem` that makes it unusable; `enabled` false: switched off."""

    name: str
    config: ServerConfig | None
    problem: str | None = None

    @property
    def enabled(self) -> bool:
        return self.config is not None and self.config.enabled is not False

    def request_timeout_s(self) -> float:
        """Listing tools (and any request but a tool call)."""
        timeout = self.config.timeout if self.config is not None else None
        return (timeout or DEFAULT_TIMEOUT_MS) / 1000

    def startup_timeout_s(self) -> float:
        """The longest a first connect may take: the handshake, then the tool list."""
        return CONNECT_TIMEOUT_MS / 1000 + self.request_timeout_s()

    def call_timeout_s(self) -> float:
        timeout = self.config.timeout if self.config is not None else None
        return (timeout or DEFAULT_CALL_TIMEOUT_MS) / 1000


def _entry(name: str, raw: Any) -> ServerEntry:
    if isinstance(raw, dict) and "type" not in raw and raw.get("enabled") is False:
        return ServerEntry(name, None, None)  # `{"enabled": false}` alone switches off an entry set elsewhere
    try:
        return ServerEntry(name, _ENTRY.validate_python(raw))
    except ValidationError as bad:
        problems = []
        for err in bad.errors()[:3]:
            where = ".".join(str(p) for p in err.get("loc", ()) if not str(p).startswith(("local", "remote")))
            problems.append(f"{where or 'entry'}: {err.get('msg')}")
        return ServerEntry(name, None, "invalid configuration: " + "; ".join(problems))


_PARSED: dict[int, tuple[Config, dict[str, ServerEntry]]] = {}


def configured_servers(config: Config) -> dict[str, ServerEntry]:
    """The servers `config` names, by name, each parsed on its own. Cached per config object (the runtime's config
    source hands out the same object while its files are unchanged), so a Step pays nothing for it."""
    cached = _PARSED.get(id(config))
    if cached is not None and cached[0] is config:
        return cached[1]
    entries = {name: _entry(name, raw) for name, raw in (config.mcp or {}).items()}
    if len(_PARSED) > 64:
        _PARSED.clear()
    _PARSED[id(config)] = (config, entries)
    return entries


__all__ = ["CONNECT_TIMEOUT_MS", "DEFAULT_CALL_TIMEOUT_MS", "DEFAULT_TIMEOUT_MS", "ServerConfig", "ServerEntry",
           "configured_servers"]
