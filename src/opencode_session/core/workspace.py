"""The API's own access to a Location (files read, listed and found, terminals started there, skills listed): the
rules its operations run under are the configured `permission` rules alone, since no agent is acting."""

from __future__ import annotations

from collections.abc import Mapping

from .config import Config, global_config_dir, project_config_disabled
from .location import Location
from .permission import Authority, effective_rules
from .skills import Skill, discover_skills, permitted_skills, skill_roots


def workspace_authority(location: Location, config: Config, env: Mapping[str, str]) -> Authority:
    return Authority(location.directory, effective_rules(config.permission, None, env))


def available_skills(location: Location, config: Config, env: Mapping[str, str]) -> list[Skill]:
    """The skills the `skill` tool offers at `location` under the configured rules (a denied one is left out)."""
    roots = skill_roots(global_config_dir(env), location.project_root, location.directory,
                        not project_config_disabled(env))
    return permitted_skills(effective_rules(config.permission, None, env), discover_skills(roots))
