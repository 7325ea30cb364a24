"""Custom commands on the command line: `ocs run --command NAME args` and `/NAME args` in interactive mode expand
the Location's command (listed by the API, so `--attach` sees the server's) into the prompt sent."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..client.generated import OpenCodeClient
from ..core.commands import expand as expand_template
from .startup import StartupError


@dataclass(frozen=True)
class Expanded:
    text: str
    agent: str | None
    model: str | None  # provider/model


async def expand(client: OpenCodeClient, directory: Path, name: str, arguments: str) -> Expanded:
    """The prompt command `name` makes of `arguments`; StartupError naming the commands there are when none is
    called `name`."""
    listed = (await client.command.list(location={"directory": str(directory)})).data
    for info in listed:
        if info.name == name:
            model = f"{info.model.providerID}/{info.model.id}" if info.model is not None else None
            return Expanded(expand_template(info.template, arguments), info.agent, model)
    known = ", ".join(f"/{info.name}" for info in listed) or "none are defined"
    raise StartupError(f"no command named {name!r} (commands: {known})")


def slash(text: str) -> tuple[str, str] | None:
    """(name, arguments) of a `/NAME args` line; None for anything else (a path such as `/etc` is a name too: the
    lookup tells)."""
    if not text.startswith("/") or text.startswith("//"):
        return None
    name, _, arguments = text[1:].partition(" ")
    return (name, arguments.strip()) if name else None
