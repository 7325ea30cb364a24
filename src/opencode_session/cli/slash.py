"""Interactive mode's built-in `/` commands as OpenCode's TUI has them (`/help`, `/models`, `/sessions`, `/new`,
`/compact`, `/agent`, with `/undo` and `/redo` from undo.py) and Tab's agent cycling, each run between turns."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..client import ClientError, TaggedError
from ..client.generated import OpenCodeClient
from .run import model_ref
from .startup import StartupError
from .undo import slash as undo

BUILTINS: dict[str, str] = {
    "/help": "this list",
    "/models": "the models that can be called here; /models PROVIDER/MODEL switches the session to one",
    "/agent": "the agents; /agent NAME switches to one (Tab cycles the primary agents)",
    "/sessions": "this directory's recent sessions; /sessions ID (or its number) continues one",
    "/new": "start a new session here",
    "/compact": "summarise the session's history now (the recent turns stay word for word)",
    "/undo": "take the latest prompt back, files and history (again: one prompt further back)",
    "/redo": "put back what /undo took, a prompt at a time",
}
KEYS = ("keys: Enter sends (while a turn runs: steers it) · Ctrl-C interrupts the turn · Ctrl-D quits\n"
        "      Tab queues while a turn runs, cycles agents between turns")
LISTED = 10  # sessions `/sessions` lists


@dataclass
class Shell:
    """What the commands act on: the client, the current session (which `/new` and `/sessions ID` change), where
    the user works, and how to tell them."""

    client: OpenCodeClient
    session_id: str
    directory: Path
    info: Callable[[str], None]
    notice: Callable[[str], None]
    agent: str | None = None  # the session's agent, as the prompt shows it
    busy: Callable[[bool], None] = field(default=lambda on: None)
    _listed: list[str] = field(default_factory=list)  # the IDs `/sessions` showed, by number

    async def refresh(self) -> None:
        self.agent = (await self.client.session.get(self.session_id)).agent


def builtin(text: str) -> tuple[str, str] | None:
    """(command, argument) when `text` calls a built-in command, else None (it may be a custom `/NAME`)."""
    name, _, argument = text.strip().partition(" ")
    return (name, argument.strip()) if name in BUILTINS else None


async def run(shell: Shell, name: str, argument: str) -> None:
    """Run the built-in `name` (a key of BUILTINS) with its argument."""
    commands: dict[str, Callable[[Shell, str], Awaitable[None]]] = {
        "/help": _help, "/models": _models, "/agent": _agent, "/sessions": _sessions, "/new": _new,
        "/compact": _compact,
    }
    if name in ("/undo", "/redo"):
        await undo(shell.client, shell.session_id, name, shell.info)
        return
    try:
        await commands[name](shell, argument)
    except (StartupError, ClientError) as refused:
        shell.notice(str(refused))
    except TaggedError as refused:  # an unknown session or model, said as the server says it
        shell.notice(refused.message)


async def _help(shell: Shell, _argument: str) -> None:
    width = max(len(name) for name in BUILTINS)
    lines = [f"  {name.ljust(width)}  {what}" for name, what in BUILTINS.items()]
    listed = (await shell.client.command.list(location={"directory": str(shell.directory)})).data
    if listed:
        lines.append("custom commands (from command/*.md and opencode.json):")
        lines += [f"  /{c.name}" + (f"  {c.description}" if c.description else "") for c in listed]
    lines.append(KEYS)
    shell.info("\n".join(lines))


async def _models(shell: Shell, argument: str) -> None:
    if argument:
        await shell.client.session.switch_model(shell.session_id, model=model_ref(argument))
        shell.info(f"model: {argument}")
        return
    current = (await shell.client.session.get(shell.session_id)).model
    listed = (await shell.client.model.list(location={"directory": str(shell.directory)})).data
    usable = [m for m in listed if m.enabled]
    if not usable:
        shell.notice("no model can be called here: `ocs models` says which key each provider needs")
        return
    lines = []
    for m in usable:
        here = current is not None and (current.providerID, current.id) == (m.providerID, m.id)
        lines.append(f"{'●' if here else ' '} {m.providerID}/{m.id}  {m.name}")
    if current is None:
        lines.append("no model chosen: the session uses the configured default")
    lines.append("/models PROVIDER/MODEL switches to one")
    shell.info("\n".join(lines))


async def _primary_agents(shell: Shell) -> list[str]:
    listed = (await shell.client.agent.list(location={"directory": str(shell.directory)})).data
    return [a.id for a in listed if a.mode != "subagent" and not a.hidden]


async def _agent(shell: Shell, argument: str) -> None:
    listed = (await shell.client.agent.list(location={"directory": str(shell.directory)})).data
    if argument:
        if argument not in {a.id for a in listed}:
            raise StartupError(f"no agent named {argument!r} (agents: {', '.join(a.id for a in listed)})")
        await shell.client.session.switch_agent(shell.session_id, agent=argument)
        shell.agent = argument
        shell.info(f"agent: {argument}")
        return
    await shell.refresh()
    lines = [f"{'●' if a.id == shell.agent else ' '} {a.id}" + (" (subagent)" if a.mode == "subagent" else "")
             + (f"  {a.description}" if a.description else "") for a in listed if not a.hidden]
    lines.append("/agent NAME switches to one; Tab cycles the primary agents")
    shell.info("\n".join(lines))


async def cycle_agent(shell: Shell) -> None:
    """Tab between turns: the session's next primary agent."""
    agents = await _primary_agents(shell)
    if not agents:
        return
    await shell.refresh()
    # no agent recorded yet means the default, listed first; a subagent or an unknown one goes to the first
    at = agents.index(shell.agent) if shell.agent in agents else 0 if shell.agent is None else -1
    following = agents[(at + 1) % len(agents)]
    await shell.client.session.switch_agent(shell.session_id, agent=following)
    shell.agent = following
    shell.info(f"agent: {following}")


async def _sessions(shell: Shell, argument: str) -> None:
    if argument:
        chosen = shell._listed[int(argument) - 1] if argument.isdigit() and 0 < int(argument) <= len(shell._listed) \
            else argument
        session = await shell.client.session.get(chosen)  # an unknown ID raises SessionNotFoundError
        shell.session_id = session.id
        await shell.refresh()
        shell.info(f"continuing “{session.title}” ({session.id})")
        return
    page = await shell.client.session.list(limit=LISTED, order="desc", directory=str(shell.directory))
    shell._listed = [s.id for s in page.items]
    if not page.items:
        shell.info("no sessions here yet")
        return
    lines = [f"{'●' if s.id == shell.session_id else ' '} {n}. {s.title}  ({s.id})"
             for n, s in enumerate(page.items, 1)]
    lines.append("/sessions NUMBER (or ID) continues one")
    shell.info("\n".join(lines))


async def _new(shell: Shell, _argument: str) -> None:
    model = (await shell.client.session.get(shell.session_id)).model  # the new session keeps the agent and model
    session = await shell.client.session.create(location={"directory": str(shell.directory)}, agent=shell.agent,
                                                model=model)
    shell.session_id = session.id
    await shell.refresh()
    shell.info(f"new session {session.id}")


async def _compact(shell: Shell, _argument: str) -> None:
    shell.info("compacting the session's history…")

    async def summaries() -> int:
        context = await shell.client.session.context(shell.session_id)
        return sum(1 for m in context if m.type == "compaction" and m.status == "completed")

    shell.busy(True)
    try:
        before = await summaries()
        await shell.client.session.compact(shell.session_id)
        await shell.client.session.wait(shell.session_id)
        after = await summaries()
    finally:
        shell.busy(False)
    if after > before:
        shell.info("compacted: the session goes on from the summary and the recent turns")
    else:
        shell.notice(f"not compacted: nothing older than the recent turns to summarise yet, or it failed (`ocs log "
                     f"{shell.session_id}` says why)")
