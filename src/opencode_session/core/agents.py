"""Agent definitions: the built-in `build` and `plan` agents, overridden or extended by the config's
`agent` map, and selection of the default agent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from opencode_session.schema.agent import AgentV2Info, ProviderRequest
from opencode_session.schema.common import ModelRef
from opencode_session.schema.permission import PermissionV2Rule

from .config import AgentConfig, Config, ConfigError, parse_model_string
from .permission.rules import Ruleset, agent_rules, parse_rules

AgentMode = Literal["primary", "subagent", "all"]

BUILD_PROMPT = """\
You are a capable software engineering agent working inside the user's project on their machine.
Help with whatever they ask: writing and changing code, fixing bugs, explaining code, running commands.

- Work with the tools you have: read files before you change them, search instead of guessing, and
  run the project's own commands (tests, linters, builds) to check your work when that is possible.
- Make the smallest change that fully solves the task, and follow the conventions already in the code.
- Do not invent file contents, APIs or command output; look them up.
- Be concise. Say what you did and anything the user must know; skip preamble and long summaries.
- When a request is ambiguous or risky (deleting data, rewriting history), ask before acting.\
"""

PLAN_PROMPT = """\
You are a planning agent working inside the user's project. Investigate the code with read-only tools
and produce a clear, step-by-step plan for the requested change: which files to touch, what to change,
how to verify it, and what is uncertain. Do not edit files or run commands that change anything.
Be concise and concrete.\
"""


class AgentNotFoundError(LookupError):
    def __init__(self, name: str) -> None:
        super().__init__(f"Agent not found: {name}")
        self.name = name


@dataclass(frozen=True)
class Agent:
    name: str
    prompt: str | None = None  # None: the runner uses its provider default prompt
    model: ModelRef | None = None  # None: the session's / config's model
    steps: int | None = None  # None: no step limit
    description: str | None = None
    mode: AgentMode = "all"
    temperature: float | None = None
    top_p: float | None = None
    permission: Any = None  # OpenCode config-shaped permission rules, applied over the global ones
    tools: Mapping[str, bool] | None = None  # `{"bash": false}`: the tool is denied (applied after `permission`)
    # (action, pattern) an untrusted project denies this agent: after everything else, so they only narrow
    denied: tuple[tuple[str, str], ...] = ()
    hidden: bool = False
    color: str | None = None
    builtin: bool = False

    def rules(self, global_permission: Any, env: Mapping[str, str]) -> Ruleset:
        """The Ruleset this agent's Steps run under: the defaults, the global config, then the agent's own rules
        (its `tools` switches last)."""
        rules = agent_rules(global_permission, self.permission, self.tools, env)
        if not self.denied:
            return rules
        denies: dict[str, dict[str, str]] = {}
        for action, pattern in self.denied:
            denies.setdefault(action, {})[pattern] = "deny"
        return rules + parse_rules(denies, env)


BUILTIN_AGENTS: tuple[Agent, ...] = (
    Agent(
        name="build",
        prompt=BUILD_PROMPT,
        description="The default agent: reads, edits and runs code in the project.",
        mode="primary",
        builtin=True,
    ),
    Agent(
        name="plan",
        prompt=PLAN_PROMPT,
        description="Investigates and plans without changing files.",
        mode="primary",
        # OpenCode's edit permission covers every file-changing tool; each is named too, so none slips through
        permission={"edit": "deny", "write": "deny", "apply_patch": "deny", "bash": "ask"},
        builtin=True,
    ),
)

DEFAULT_AGENT = "build"


def _model_ref(value: str, agent: str) -> ModelRef:
    parsed = parse_model_string(value)
    if parsed is None:
        raise ConfigError(
            "<config>", f"agent.{agent}.model must be \"provider/model\", got {value!r}"
        )
    return ModelRef(providerID=parsed[0], id=parsed[1])


def _steps(entry: AgentConfig) -> int | None:
    if entry.steps is not None:
        return entry.steps
    legacy = (entry.model_extra or {}).get("maxSteps")  # OpenCode's older spelling
    return legacy if isinstance(legacy, int) and not isinstance(legacy, bool) else None


def _apply(base: Agent, entry: AgentConfig) -> Agent:
    changes: dict[str, Any] = {}
    if entry.prompt is not None:
        changes["prompt"] = entry.prompt
    if entry.model:
        changes["model"] = _model_ref(entry.model, base.name)
    steps = _steps(entry)
    if steps is not None:
        changes["steps"] = steps if steps > 0 else None
    if entry.description is not None:
        changes["description"] = entry.description
    if entry.mode is not None:
        changes["mode"] = entry.mode
    if entry.temperature is not None:
        changes["temperature"] = entry.temperature
    if entry.top_p is not None:
        changes["top_p"] = entry.top_p
    if entry.permission is not None:
        changes["permission"] = entry.permission
    if entry.tools is not None:
        changes["tools"] = dict(entry.tools)
    if entry.hidden is not None:
        changes["hidden"] = entry.hidden
    if entry.color is not None:
        changes["color"] = entry.color
    return replace(base, **changes)


def _agents(config: Config) -> dict[str, Agent]:
    agents = {a.name: a for a in BUILTIN_AGENTS}
    for name, entry in config.agent.items():
        if entry.disable:
            agents.pop(name, None)
            continue
        agents[name] = _apply(agents.get(name) or Agent(name=name), entry)
    for name, agent in agents.items():
        if denied := config.agent_denies(name):
            agents[name] = replace(agent, denied=denied)
    return agents


def list_agents(config: Config) -> list[Agent]:
    """Every enabled agent: built-ins first, then config-defined ones in config order."""
    return list(_agents(config).values())


def default_agent_name(config: Config) -> str:
    """The configured `default_agent` if it is an enabled non-subagent, else `build`, else the first
    enabled primary agent."""
    agents = _agents(config)
    for candidate in (config.default_agent, DEFAULT_AGENT):
        if candidate and candidate in agents and agents[candidate].mode != "subagent":
            return candidate
    for agent in agents.values():
        if agent.mode != "subagent":
            return agent.name
    raise AgentNotFoundError(config.default_agent or DEFAULT_AGENT)


def resolve_agent(config: Config, name: str | None = None) -> Agent:
    """The named agent (or the default one when `name` is None); an unknown name raises AgentNotFoundError."""
    agents = _agents(config)
    if name is None:
        name = default_agent_name(config)
    agent = agents.get(name)
    if agent is None:
        raise AgentNotFoundError(name)
    return agent


def agent_info(config: Config, env: Mapping[str, str]) -> list[AgentV2Info]:
    """Every enabled agent as the API lists it, with the rules its Steps run under."""
    return [AgentV2Info(id=a.name, model=a.model, request=ProviderRequest(headers={}, body={}), system=a.prompt,
                        description=a.description, mode=a.mode, hidden=a.hidden, color=a.color, steps=a.steps,
                        permissions=[PermissionV2Rule(action=r.action, resource=r.resource, effect=r.effect)
                                     for r in a.rules(config.permission, env)])
            for a in list_agents(config)]


__all__ = [
    "Agent",
    "AgentNotFoundError",
    "BUILD_PROMPT",
    "BUILTIN_AGENTS",
    "DEFAULT_AGENT",
    "PLAN_PROMPT",
    "agent_info",
    "default_agent_name",
    "list_agents",
    "resolve_agent",
]
