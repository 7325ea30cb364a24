"""A session's own permission rules: evaluated after the agent's (the last match wins), except that none lifts a
deny of the configuration, and none offers a tool the configuration disables."""

from __future__ import annotations

from opencode_session.core.permission import DEFAULT_RULES, Rule, disabled, evaluate, with_session_rules
from opencode_session.schema.permission import PermissionV2Rule


def _session(*rules: tuple[str, str, str]) -> list[PermissionV2Rule]:
    return [PermissionV2Rule(action=a, resource=r, effect=e) for a, r, e in rules]  # type: ignore[arg-type]


def test_session_rules_come_after_the_agents():
    configured = DEFAULT_RULES + (Rule("bash", "git *", "ask"),)
    rules = with_session_rules(configured, _session(("bash", "git status", "allow"), ("edit", "*", "ask")))
    assert evaluate(rules, "bash", "git status") == "allow"  # the session's allow over the agent's ask
    assert evaluate(rules, "bash", "git push") == "ask"  # no session rule matches: the agent's
    assert evaluate(rules, "edit", "notes.txt") == "ask"  # over the default allow
    assert evaluate(with_session_rules(configured, None), "bash", "git status") == "ask"


def test_a_configured_deny_wins_over_a_session_allow():
    configured = DEFAULT_RULES + (Rule("bash", "rm *", "deny"), Rule("webfetch", "*", "deny"))
    rules = with_session_rules(configured, _session(("bash", "*", "allow"), ("*", "*", "allow")))
    assert evaluate(rules, "bash", "rm -rf x") == "deny"
    assert evaluate(rules, "bash", "ls") == "allow"
    assert evaluate(rules, "read", "secrets.env") == "deny"  # the defaults' deny is the configuration's too
    assert disabled(rules, "webfetch")  # the configuration disables it: the session cannot offer it
    assert not disabled(rules, "bash")


def test_a_session_deny_takes_a_tool_away():
    rules = with_session_rules(DEFAULT_RULES, _session(("bash", "*", "deny")))
    assert disabled(rules, "bash") and evaluate(rules, "bash", "ls") == "deny"
    assert not disabled(rules, "read")
