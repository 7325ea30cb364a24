"""What a Safe Step Boundary samples before a Step: the session, its selected agent, the configuration and the
Location it runs in. The runner samples it; instruction preparation and tool authority read it, so it sits below
both."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..schema.session import SessionV2Info
from .agents import Agent
from .config import Config
from .location import Location
from .permission import Ruleset, with_session_rules


@dataclass
class Boundary:
    session: SessionV2Info
    agent: Agent
    config: Config
    location: Location
    instruction_files: Any = None  # what the instruction preparer read from disk with the rest (None: not read)

    def rules(self, env: Mapping[str, str]) -> Ruleset:
        """The permission rules this boundary's tools and attachments run under: global config, then the agent,
        then the session's own (which never lift a deny of the configuration)."""
        return with_session_rules(self.agent.rules(self.config.permission, env), self.session.permissions)
