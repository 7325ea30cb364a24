"""Custom commands, skills and project references as the API lists them per Location, over `ocs serve` and the
Embedded host; and a command's template expanded with its arguments."""

from __future__ import annotations

import json

import pytest

from opencode_session.client import InvalidRequestError
from opencode_session.core.commands import expand

pytestmark = pytest.mark.anyio


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    (root / ".opencode" / "command" / "git").mkdir(parents=True)
    (root / ".opencode" / "command" / "review.md").write_text(
        "---\ndescription: Review a file\nagent: plan\nmodel: p/m\nsubtask: true\n---\nReview $1 for $2.\n")
    (root / ".opencode" / "command" / "git" / "commit.md").write_text("Commit with message: $ARGUMENTS\n")
    (root / ".opencode" / "skill" / "deploy").mkdir(parents=True)
    (root / ".opencode" / "skill" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Ship the service\n---\nRun the deploy script.\n")
    (root / ".opencode" / "skill" / "secret").mkdir(parents=True)
    (root / ".opencode" / "skill" / "secret" / "SKILL.md").write_text("---\nname: secret\n---\nHidden.\n")
    (root / "docs").mkdir()
    (root / "opencode.json").write_text(json.dumps({
        "command": {"hello": {"template": "Say hello to $ARGUMENTS", "description": "Greet"},
                    "review": {"template": "Config wins: $ARGUMENTS"}},
        "permission": {"skill": {"secret": "deny"}},
        "references": {"docs": {"path": "./docs", "description": "The manual"},
                       "sdk": {"repository": "https://example.com/acme/sdk.git", "branch": "main"},
                       "bad/name": "./docs", "plain": "../elsewhere"},
    }))
    return root, {"directory": str(root)}


async def test_commands_come_from_files_and_opencode_json(api, project):
    root, location = project
    commands = {c.name: c for c in (await api.command.list(location=location)).data}
    assert set(commands) >= {"hello", "review", "git/commit"}
    assert commands["hello"].template == "Say hello to $ARGUMENTS" and commands["hello"].description == "Greet"
    assert commands["review"].template == "Config wins: $ARGUMENTS"  # opencode.json after the markdown files
    assert commands["git/commit"].template == "Commit with message: $ARGUMENTS"
    (root / "opencode.json").write_text(json.dumps({}))
    review = {c.name: c for c in (await api.command.list(location=location)).data}["review"]
    assert (review.agent, review.model.providerID, review.model.id, review.subtask) == ("plan", "p", "m", True)
    with pytest.raises(InvalidRequestError):
        await api.command.list(location={"directory": str(root / "missing")})


async def test_skills_are_those_the_skill_tool_offers(api, project):
    root, location = project
    skills = {s.name: s for s in (await api.skill.list(location=location)).data}
    assert "secret" not in skills  # the configured rules deny it
    deploy = skills["deploy"]
    assert deploy.description == "Ship the service" and deploy.content == "Run the deploy script."
    assert deploy.location == str(root / ".opencode" / "skill" / "deploy" / "SKILL.md")


async def test_references_resolve_from_the_file_that_names_them(api, project):
    root, location = project
    references = {r.name: r for r in (await api.reference.list(location=location)).data}
    assert set(references) == {"docs", "sdk", "plain"}  # a name with a slash is no alias
    docs = references["docs"]
    assert docs.path == str(root / "docs") and docs.description == "The manual" and docs.source.type == "local"
    assert references["plain"].path == str(root.parent / "elsewhere")
    sdk = references["sdk"]
    assert sdk.source.type == "git" and sdk.source.branch == "main" and "acme/sdk" in sdk.path
    (root / "opencode.json").write_text("{ broken")
    with pytest.raises(InvalidRequestError):
        await api.reference.list(location=location)


def test_templates_take_their_arguments_as_opencode_does():
    review = "Review $1 for $2."
    assert expand(review, 'src/app.py "memory leaks and races"') == "Review src/app.py for memory leaks and races."
    assert expand(review, "a b c d") == "Review a for b c d."  # the last placeholder takes the rest
    assert expand(review, "") == "Review  for ."
    assert expand("Fix: $ARGUMENTS", "  the build  ") == "Fix: the build"
    assert expand("Run the tests.", "quickly") == "Run the tests.\n\nquickly"
    assert expand("$1", '"unclosed') == '"unclosed'
