"""What a process the runtime starts (bash, a terminal, a local MCP server) inherits of its environment: all of it
but the server's own password and the provider keys, which the model could otherwise read back with `env`."""

from __future__ import annotations

from collections.abc import Mapping

from .config import Config
from .llm.catalog import bundled, configured_secrets

# The server's own credentials (`server/auth.py`): whoever holds them may drive every session.
SERVER_SECRETS = frozenset({"OPENCODE_SERVER_PASSWORD", "OPENCODE_SERVER_USERNAME"})


def _provider_variables(config: Config | None) -> set[str]:
    names = {name for entry in bundled().values() for name in entry.get("env", ())}
    if config is not None:
        names.update(name for provider in config.provider.values() for name in provider.env)
    return names


def inherited(env: Mapping[str, str], config: Config | None = None) -> dict[str, str]:
    """`env` without the server's credentials, any `*_API_KEY`, the variables a provider (bundled or configured)
    reads its key from, and any variable whose value is a key `config` sends to a provider."""
    named = SERVER_SECRETS | _provider_variables(config)
    secrets = {s for s in configured_secrets(config, {}) if s} if config is not None else set()
    return {k: v for k, v in env.items()
            if k not in named and not k.upper().endswith("_API_KEY") and v not in secrets}


def withheld(env: Mapping[str, str], config: Config | None = None) -> set[str]:
    """The values `inherited` leaves out, less the server's user name (no secret, and often "opencode", which cutting
    would take out of every "opencode.json"): the secrets no event, answer or log line may carry either."""
    named = (SERVER_SECRETS - {"OPENCODE_SERVER_USERNAME"}) | _provider_variables(config)
    values = {v for k, v in env.items() if k in named or k.upper().endswith("_API_KEY")}
    if config is not None:
        values.update(configured_secrets(config, {}))
    return {v for v in values if v}


__all__ = ["SERVER_SECRETS", "inherited", "withheld"]
