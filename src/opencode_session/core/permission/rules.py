"""Permission rules: OpenCode's `permission` config (global, then the agent's) as one ordered Ruleset, and
evaluating an action on a resource to allow, ask or deny (the last matching rule wins)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

Effect = Literal["allow", "ask", "deny"]


@dataclass(frozen=True)
class Rule:
    action: str  # a tool or guard name such as "read" or "external_directory"; wildcards allowed
    resource: str  # a wildcard pattern over the resource (a path, a command, a name)
    effect: Effect


Ruleset = tuple[Rule, ...]

# `webfetch` of this server's own API (`core/own_address.py`): its own permission, denied unless configured.
OWN_SERVER = "opencode_server"

# What OpenCode starts from before any config: everything allowed except leaving the Location (ask) and reading
# environment files (deny); and this runtime's own: fetching this server's own API is denied (`"opencode_server":
# "ask"` asks instead). Changing a configuration file asks unless a rule names it (`evaluate_explicit`): the tools
# know which files those are (`core/tools/tool.py`), by their resolved paths.
DEFAULT_RULES: Ruleset = (
    Rule("*", "*", "allow"),
    Rule("external_directory", "*", "ask"),
    Rule("doom_loop", "*", "ask"),
    Rule("read", "*.env", "deny"),
    Rule("read", "*.env.*", "deny"),
    Rule("read", "*.env.example", "allow"),
    Rule(OWN_SERVER, "*", "deny"),
)


def wildcard_match(text: str, pattern: str) -> bool:
    """`*` matches any run of characters (`/` included), `?` one character, the rest literally; a trailing ` *` is
    optional, so `git push *` also matches `git push`. Linear-time: never backtracks over earlier stars."""
    if pattern == "*":
        return True
    if "*" not in pattern and "?" not in pattern:  # most rules name one tool or one file: no scan needed
        return text == pattern
    if _match(text, pattern):
        return True
    return pattern.endswith(" *") and _match(text, pattern[:-2])


def _match(text: str, pattern: str) -> bool:
    t = p = 0
    star_p, star_t = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] == "*":
            star_p, star_t = p, t
            p += 1
        elif p < len(pattern) and (pattern[p] == "?" or pattern[p] == text[t]):
            p += 1
            t += 1
        elif star_p >= 0:
            # Let the last star absorb one more character; earlier stars never need to move.
            star_t += 1
            p, t = star_p + 1, star_t
        else:
            return False
    return all(c == "*" for c in pattern[p:])


def _expand_home(pattern: str, home: str) -> str:
    for prefix in ("~", "$HOME"):
        if pattern == prefix:
            return home
        if pattern.startswith(prefix + "/"):
            return home + pattern[len(prefix):]
    return pattern


def parse_rules(value: Any, env: Mapping[str, str] = os.environ) -> Ruleset:
    """Rules from one config `permission` value: `"allow"` (everything), `{"read": "deny"}` (one action), or
    `{"read": {"*.md": "allow", "~/secret/*": "deny"}}` (per pattern, `~`/`$HOME` expanded), in file order.
    Entries with an unknown effect are skipped: a config written for a newer OpenCode still loads."""
    home = env.get("HOME") or os.path.expanduser("~")
    if isinstance(value, str):
        effect = _effect(value)
        return (Rule("*", "*", effect),) if effect is not None else ()
    if not isinstance(value, Mapping):
        return ()
    rules: list[Rule] = []
    for action, entry in value.items():
        if isinstance(entry, Mapping):
            for pattern, raw in entry.items():
                if (effect := _effect(raw)) is not None:
                    rules.append(Rule(str(action), _expand_home(str(pattern), home), effect))
        elif (effect := _effect(entry)) is not None:
            rules.append(Rule(str(action), "*", effect))
    return tuple(rules)


def _effect(value: object) -> Effect | None:
    """The effect a config value names; None for anything else (a newer OpenCode's value, a typo)."""
    if value == "allow" or value == "ask" or value == "deny":
        return value
    return None


def effective_rules(global_permission: Any, agent_permission: Any, env: Mapping[str, str] = os.environ) -> Ruleset:
    """The Ruleset a Step's tools run under: the defaults, then the global config, then the agent's own rules."""
    return DEFAULT_RULES + parse_rules(global_permission, env) + parse_rules(agent_permission, env)


def agent_rules(global_permission: Any, agent_permission: Any, tools: Mapping[str, bool] | None,
                env: Mapping[str, str] = os.environ) -> Ruleset:
    """The Ruleset an agent's Steps run under: the defaults, the global config, the agent's own rules, then its
    `tools` switches (OpenCode's older `{"bash": false}`, a deny of the whole tool)."""
    switches = {name: "allow" if on else "deny" for name, on in (tools or {}).items()}
    return effective_rules(global_permission, agent_permission, env) + parse_rules(switches, env)


def evaluate(rules: Ruleset, action: str, resource: str, absolute: str | None = None) -> Effect:
    """The effect of the last rule matching `action` and `resource`; `ask` when none matches. With `absolute` (the
    absolute form of a relative path), rules written as absolute paths are matched against it instead. A session's
    own rule that allows or asks does not lift a `deny` of the rules before the session's."""
    found = _last_match(rules, action, resource, absolute)
    if found is None:
        return "ask"
    if isinstance(found, SessionRule) and found.effect != "deny":
        configured = _last_match(_configured(rules), action, resource, absolute)
        if configured is not None and configured.effect == "deny":
            return "deny"
    return found.effect


def evaluate_explicit(rules: Ruleset, action: str, resource: str, absolute: str | None = None) -> Effect:
    """Like `evaluate`, for a resource only a rule naming it may allow (a configuration file): an `allow` stands
    when the last rule that names `resource` (or `absolute`) literally, without wildcards, allows it; a blanket
    allow (`"edit": "allow"`, `"*"`) asks instead."""
    effect = evaluate(rules, action, resource, absolute)
    if effect != "allow":
        return effect
    named = tuple(rule for rule in rules if literal(rule.resource))
    found = _last_match(named, action, resource, absolute)
    return "allow" if found is not None and found.effect == "allow" else "ask"


def literal(pattern: str) -> bool:
    """Whether a rule's pattern names one resource (no wildcard)."""
    return not any(c in pattern for c in "*?")


def _last_match(rules: Ruleset, action: str, resource: str, absolute: str | None) -> Rule | None:
    for rule in reversed(rules):
        if not wildcard_match(action, rule.action):
            continue
        target = absolute if absolute is not None and rule.resource.startswith("/") else resource
        if wildcard_match(target, rule.resource):
            return rule
    return None


def _configured(rules: Ruleset) -> Ruleset:
    return tuple(rule for rule in rules if not isinstance(rule, SessionRule))


def disabled(rules: Ruleset, tool: str) -> bool:
    """Whether `tool` is wholly denied, so the model is not offered it: the last rule whose action matches the tool
    denies every resource (`"bash": "deny"`, or an agent's `tools: {"bash": false}`). A session's own rule cannot
    offer a tool the configuration disables."""
    for rule in reversed(rules):
        if wildcard_match(tool, rule.action):
            if rule.resource == "*" and rule.effect == "deny":
                return True
            return isinstance(rule, SessionRule) and disabled(_configured(rules), tool)
    return False


# --- a session's own rules --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SessionRule(Rule):
    """A rule of the session's own `permissions`: evaluated after the agent's (the last match wins), except that it
    never lifts a `deny` the configuration gives."""


def with_session_rules(rules: Ruleset, session: Iterable[Any] | None) -> Ruleset:
    """`rules` followed by a session's own rules (records with `action`, `resource` and `effect`)."""
    return rules + tuple(SessionRule(r.action, r.resource, r.effect) for r in session or ())
