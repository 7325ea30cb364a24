"""Permission, in one package: the rules and their evaluation (`rules`), the Location authority over paths and the one
refusal (`authority`), what a shell command asks for and saves (`command`), what a tool call asks the user and how
its requirements are checked (`ask`), and the service that asks, answers and remembers `always` (`requests`)."""

from .ask import Asker, PermissionAsk, PermissionWait, Waited, recorded_waits, satisfy, waits_state
from .authority import (
    AccessRefused,
    Authority,
    Correction,
    NotRegularFileError,
    Requirement,
    open_regular_file,
    read_regular_file,
)
from .command import save_pattern, simple_commands
from .requests import DECLINED, PermissionRequests
from .rules import (
    DEFAULT_RULES,
    Effect,
    Rule,
    Ruleset,
    agent_rules,
    disabled,
    effective_rules,
    evaluate,
    parse_rules,
    wildcard_match,
    with_session_rules,
)

__all__ = ["DECLINED", "DEFAULT_RULES", "AccessRefused", "Asker", "Authority", "Correction", "Effect",
           "NotRegularFileError", "PermissionAsk", "PermissionRequests", "PermissionWait", "Requirement", "Rule",
           "Ruleset", "Waited", "agent_rules", "disabled", "effective_rules", "evaluate", "open_regular_file",
           "parse_rules", "read_regular_file", "recorded_waits", "satisfy", "save_pattern", "simple_commands",
           "waits_state", "wildcard_match", "with_session_rules"]
