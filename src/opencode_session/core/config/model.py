"""The typed, lenient shape of OpenCode's configuration (every model keeps unknown keys), and ConfigError, which
names the file (and, for syntax, line and column) that cannot be used."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr

# Typed model. Every model keeps unknown keys: a user's config written for OpenCode must load even
# where this runtime does not (yet) use a setting.


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="allow", populate_by_name=True)


class ModelLimit(_Lenient):
    context: int | None = None
    output: int | None = None
    input: int | None = None


class ModelCostConfig(_Lenient):
    """USD per million tokens."""

    input: float | None = None
    output: float | None = None
    cache_read: float | None = None
    cache_write: float | None = None


class ModelModalities(_Lenient):
    input: list[str] | None = None
    output: list[str] | None = None


class ModelConfig(_Lenient):
    """One model entry, in models.dev's shape (the bundled catalog uses the same one)."""

    id: str | None = None  # the server's name for the model when the map key is an alias
    name: str | None = None
    family: str | None = None
    release_date: str | None = None
    status: str | None = None
    limit: ModelLimit | None = None
    cost: ModelCostConfig | None = None
    attachment: bool | None = None
    reasoning: bool | None = None
    tool_call: bool | None = None
    temperature: bool | None = None  # whether the model accepts a sampling temperature
    modalities: ModelModalities | None = None
    options: dict[str, Any] | None = None
    # variant name -> option object (Model Request Options, Generation Controls or body fields); `disabled: true`
    # removes a variant the catalog defines
    variants: dict[str, dict[str, Any]] | None = None


class ProviderOptions(_Lenient):
    base_url: str | None = Field(default=None, alias="baseURL")
    api_key: str | None = Field(default=None, alias="apiKey")
    headers: dict[str, str] | None = None
    # OpenCode's unit: milliseconds; `false` disables the timeout.
    timeout: int | float | bool | None = None


class ProviderConfig(_Lenient):
    npm: str | None = None
    name: str | None = None
    api: str | None = None  # models.dev's spelling of the base URL
    env: list[str] = Field(default_factory=list)  # variables that may hold the key, first set one wins
    options: ProviderOptions = Field(default_factory=ProviderOptions)
    models: dict[str, ModelConfig] = Field(default_factory=dict)


class AgentConfig(_Lenient):
    prompt: str | None = None
    model: str | None = None
    steps: int | None = None
    description: str | None = None
    mode: Literal["primary", "subagent", "all"] | None = None
    disable: bool | None = None
    permission: Any = None
    temperature: float | None = None
    top_p: float | None = None
    tools: dict[str, bool] | None = None  # OpenCode's older switch: `false` denies the tool, `true` allows it
    hidden: bool | None = None
    color: str | None = None


class ToolOutputConfig(_Lenient):
    max_lines: int | None = None
    max_bytes: int | None = None


class WebSearchConfig(_Lenient):
    """The search backend `websearch` uses; without a `url` the tool is not offered. See WebSearchTool."""

    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)


class McpLocalConfig(_Lenient):
    """An MCP server run as a subprocess over stdio (`command` is the program and its arguments)."""

    type: Literal["local"]
    command: list[str] = Field(min_length=1)
    environment: dict[str, str] = Field(default_factory=dict)
    enabled: bool | None = None
    timeout: int | None = Field(default=None, gt=0)  # ms, for every request to the server


class McpRemoteConfig(_Lenient):
    """An MCP server reached over streamable HTTP (SSE for older servers) at `url`."""

    type: Literal["remote"]
    url: str
    headers: dict[str, str] = Field(default_factory=dict)
    enabled: bool | None = None
    timeout: int | None = Field(default=None, gt=0)


class Config(_Lenient):
    model: str | None = None
    small_model: str | None = None
    provider: dict[str, ProviderConfig] = Field(default_factory=dict)
    agent: dict[str, AgentConfig] = Field(default_factory=dict)
    instructions: list[str] = Field(default_factory=list)
    plugin: list[Any] = Field(default_factory=list)  # `python:module` entries are loaded; OpenCode's JS ones are not
    permission: Any = None
    compaction: Any = None
    tool_output: ToolOutputConfig | None = None
    websearch: WebSearchConfig | None = None
    default_agent: str | None = None
    snapshot: bool | None = None  # false: no file snapshots, so a revert restores no files
    # MCP servers by name, each checked on its own (`core/mcp/config.py`): one bad entry fails only that server
    mcp: dict[str, Any] = Field(default_factory=dict)
    # the user's hooks by event (`core/userhooks/config.py`): commands and URLs run around Steps and tool calls
    hooks: dict[str, Any] = Field(default_factory=dict)
    # an untrusted project's `deny` rules of each agent (action, pattern), applied after that agent's own rules
    # (`core/config/source.py`): never in a file, never shown
    _agent_denies: dict[str, tuple[tuple[str, str], ...]] = PrivateAttr(default_factory=dict)
    # each file's `references` with that file (a relative path is taken from its directory), as the loader left
    # them: with authority only (`core/references.py` reads them from here, never from the files)
    _references: tuple[tuple[Path, Any], ...] = PrivateAttr(default=())
    # whether the project's own files (AGENTS.md) are read only where they resolve inside the project root: a
    # Location the user has not trusted (`core/config/source.py`), whose repository may link them to ~/.ssh/...
    _confined: bool = PrivateAttr(default=False)

    def agent_denies(self, name: str) -> tuple[tuple[str, str], ...]:
        """The (action, pattern) deny rules an untrusted project gave agent `name`, applied after its own."""
        return self._agent_denies.get(name, ())

    def references_by_file(self) -> tuple[tuple[Path, Any], ...]:
        """Each config file's `references` value that has authority, with that file, in merge order."""
        return self._references

    def confined(self) -> bool:
        """Whether a project file that resolves outside the project root (a symlink out) is left unread."""
        return self._confined

    def with_confined(self, confined: bool) -> Config:
        """This config, just built, saying whether its Location's project files are confined (the loader's call)."""
        self._confined = confined
        return self

    def with_references(self, named: tuple[tuple[Path, Any], ...]) -> Config:
        """This config, just built, holding each file's `references` (the loader's call)."""
        self._references = named
        return self

    def with_agent_denies(self, denies: dict[str, tuple[tuple[str, str], ...]]) -> Config:
        copy = self.model_copy()
        copy._agent_denies = {**self._agent_denies, **denies}
        return copy


class ConfigError(Exception):
    """A config file that cannot be used; the message names the file and, for syntax, line and column."""

    def __init__(self, path: Path | str, message: str, *, line: int | None = None, column: int | None = None) -> None:
        self.path = Path(path)
        self.line = line
        self.column = column
        self.detail = message
        where = ":".join(str(part) for part in (self.path, line, column) if part is not None)
        super().__init__(f"Invalid config {where}: {message}")


__all__ = ["AgentConfig", "Config", "ConfigError", "McpLocalConfig", "McpRemoteConfig", "ModelConfig",
           "ModelCostConfig", "ModelLimit", "ModelModalities", "ProviderConfig", "ProviderOptions", "ToolOutputConfig",
           "WebSearchConfig"]
