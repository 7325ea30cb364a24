"""Boundary sampling: what a Safe Step Boundary reads before a Step (the session, its Location, the configuration in
effect there, the selected agent, the instruction files), on the event loop where every path involved is on a local
mount and in a worker thread where one may hang or that is not known yet (a per-Location mount-type verdict)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

import anyio

from ...schema import session_errors
from ...schema.common import SessionErrorInfo
from ..agents import AgentNotFoundError, resolve_agent
from ..boundary import Boundary
from ..config import ConfigError, ConfigSource, global_config_dir
from ..localfs import RECHECK_S, all_local
from ..location import resolve_location
from ..session.service import require_session
from ..store import Store
from .coordinator import DrainFailure

LOCAL_RECHECK_S = RECHECK_S  # how long a Location's "all on local mounts" verdict stands before a thread rechecks


class InstructionFiles(Protocol):
    """Reads, blocking, what instruction preparation needs from disk at a boundary (`Boundary.instruction_files`)."""

    def read_files(self, boundary: Boundary) -> Any: ...


class BoundarySampler:
    def __init__(self, store: Store, configs: ConfigSource, env: Mapping[str, str],
                 instructions: InstructionFiles) -> None:
        self.store = store
        self.configs = configs
        self.env = env
        self.instructions = instructions
        self._local: dict[str, tuple[bool, float]] = {}  # Location directory -> (all on local mounts, when checked)

    async def sample(self, session_id: str) -> Boundary:
        """The boundary of the session's next Step; DrainFailure for a broken configuration or an unknown agent."""
        session = await self.store.read(lambda reader: require_session(reader, session_id))
        directory = session.location.directory
        env = self.env

        def _sample(inline: bool) -> Boundary:
            location = resolve_location(directory, session.location.workspaceID)
            try:
                config = self.configs.at_sync(location)
            except ConfigError as bad:
                raise DrainFailure(SessionErrorInfo(type=session_errors.CONFIG_INVALID, message=str(bad))) from None
            try:
                agent = resolve_agent(config, session.agent)
            except AgentNotFoundError as missing:
                raise DrainFailure(SessionErrorInfo(type=session_errors.AGENT_NOT_FOUND,
                                                    message=str(missing))) from None
            b = Boundary(session, agent, config, location)
            if not (inline and config.instructions):  # configured patterns may glob anywhere: not on the loop
                b.instruction_files = self.instructions.read_files(b)
            if not inline:
                extra = env.get("OPENCODE_CONFIG")
                paths = [location.directory, global_config_dir(env).resolve()]
                paths += [Path(extra).expanduser().resolve()] if extra else []
                self._local[directory] = (all_local(paths), time.monotonic())
            return b

        # Sampling is ~60 stats and a few small reads. On a local filesystem they run here: in a worker thread each
        # would wait for the interpreter lock again while the loop is busy (~20 ms a boundary under load). Where
        # any of it is on a mount that can hang, or not yet known, it runs in a thread, which also rechecks.
        local, checked = self._local.get(directory, (False, 0.0))
        if local and time.monotonic() - checked < LOCAL_RECHECK_S:
            return _sample(True)
        return await anyio.to_thread.run_sync(_sample, False)


__all__ = ["LOCAL_RECHECK_S", "BoundarySampler", "InstructionFiles"]
