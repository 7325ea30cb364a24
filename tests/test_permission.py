"""Permission rules and the Location authority as plain functions: config parsing, wildcard matching (never
backtracking), last-match-wins evaluation, and how a path is resolved before it is judged."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from opencode_session.core.permission import (
    DEFAULT_RULES,
    AccessRefused,
    Authority,
    NotRegularFileError,
    Rule,
    effective_rules,
    evaluate,
    open_regular_file,
    parse_rules,
    wildcard_match,
)


@pytest.mark.parametrize(("text", "pattern", "expected"), [
    ("src/a.env", "*.env", True), ("/abs/x/.env", "*.env", True), (".env.example", "*.env.*", True),
    ("a.txt", "?.txt", True), ("ab.txt", "?.txt", False), ("git push", "git push *", True),
    ("git push origin", "git push *", True), ("git pushx", "git push *", False), ("", "*", True), ("a", "", False),
    ("/etc/*", "/etc/*", True), ("/home/u/p/a/b/*", "/home/u/p/*", True), ("bash", "bash", True),
    ("bash", "bas", False), ("bas", "bash", False),
])
def test_wildcards(text, pattern, expected):
    assert wildcard_match(text, pattern) is expected


def test_wildcards_do_not_backtrack_catastrophically():
    started = time.monotonic()
    assert not wildcard_match("a" * 4000, "*a" * 30 + "b")
    assert time.monotonic() - started < 2  # a backtracking matcher would take longer than the universe


def test_config_shapes_parse_in_file_order_with_home_expanded():
    env = {"HOME": "/home/u"}
    assert parse_rules("deny", env) == (Rule("*", "*", "deny"),)
    assert parse_rules({"read": "ask", "bash": {"git *": "allow", "~/x/*": "deny", "$HOME/y": "deny"}}, env) == (
        Rule("read", "*", "ask"), Rule("bash", "git *", "allow"), Rule("bash", "/home/u/x/*", "deny"),
        Rule("bash", "/home/u/y", "deny"))
    # what a newer OpenCode might write is skipped, not fatal
    assert parse_rules({"read": "maybe", "edit": {"*": 3}, "glob": ["x"]}, env) == ()
    assert parse_rules(None, env) == () and parse_rules(42, env) == ()


def test_last_matching_rule_wins_and_agents_come_after_global_rules():
    rules = effective_rules({"read": "deny"}, {"read": {"*.md": "allow"}}, {"HOME": "/h"})
    assert evaluate(rules, "read", "README.md") == "allow"
    assert evaluate(rules, "read", "main.py") == "deny"
    assert evaluate(DEFAULT_RULES, "read", "config/.env") == "deny"
    assert evaluate(DEFAULT_RULES, "read", ".env.example") == "allow"
    assert evaluate(DEFAULT_RULES, "external_directory", "/etc/*") == "ask"
    assert evaluate((), "read", "x") == "ask"  # nothing matches: ask


def test_absolute_rule_patterns_see_the_absolute_path_of_a_relative_resource():
    rules = DEFAULT_RULES + (Rule("read", "/proj/secret/*", "deny"), Rule("read", "docs/*", "deny"))
    assert evaluate(rules, "read", "secret/key", absolute="/proj/secret/key") == "deny"
    assert evaluate(rules, "read", "docs/a.md", absolute="/proj/docs/a.md") == "deny"
    assert evaluate(rules, "read", "src/a.py", absolute="/proj/src/a.py") == "allow"


@pytest.fixture
def location(tmp_path: Path) -> Path:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_text("s")
    work = tmp_path / "work"
    (work / "sub").mkdir(parents=True)
    (work / "sub" / "a.txt").write_text("a")
    (work / "link").symlink_to(tmp_path / "outside" / "secret")
    return work


def test_paths_are_resolved_before_they_are_judged(location: Path):
    authority = Authority(location)
    assert authority.check("read", "sub/../sub/a.txt") == location / "sub" / "a.txt"
    assert authority.check("read", str(location / "sub")) == location / "sub"
    for raw in ("../outside/secret", "link", "sub/../../outside/secret", str(location.parent / "outside")):
        with pytest.raises(AccessRefused) as refused:
            authority.check("read", raw)
        assert refused.value.type == "permission.required" and "external_directory" in refused.value.message
    with pytest.raises(AccessRefused) as refused:
        authority.check("read", "bad\x00name")
    assert refused.value.type == "tool.execution"


def test_outside_access_asks_for_the_outside_directory(location: Path):
    outside = location.parent / "outside"
    allowed = DEFAULT_RULES + (Rule("external_directory", f"{outside}/*", "allow"),)
    assert Authority(location, allowed).check("read", "link") == outside / "secret"
    denied = allowed + (Rule("read", f"{outside}/*", "deny"),)
    with pytest.raises(AccessRefused) as refused:
        Authority(location, denied).check("read", "link")
    assert refused.value.type == "permission.rejected"


def test_managed_roots_need_no_external_directory_permission(location: Path):
    outside = location.parent / "outside"
    assert Authority(location, managed_roots=(outside,)).check("read", str(outside / "secret")) == outside / "secret"


def test_only_regular_files_are_opened(location: Path):
    fifo = location / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotRegularFileError):
        open_regular_file(fifo)  # would block forever without O_NONBLOCK
    with pytest.raises(NotRegularFileError):
        open_regular_file(location / "sub")
    with open_regular_file(location / "sub" / "a.txt") as handle:
        assert handle.read() == b"a"
