"""A repository's `references` (opencode.json) point the model at directories beyond the Location, so they are
authority: an untrusted project's file names none, neither in the References API (`v2.reference.list`) nor in the
Model Context's reference guidance, until the user trusts that folder with that content; a later change to it (by
the model, say) ends the trust again."""

from __future__ import annotations

import json

import pytest

from opencode_session.core.location import resolve_location
from opencode_session.sdk import OpenCode
from tests.support.scripted import text
from tests.support.server import isolated_env
from tests.test_instructions_runner import _prompt, harness

pytestmark = pytest.mark.anyio

REFERENCES = {"references": {"docs": {"path": "./docs", "description": "The manual"}}}


def _repository(project) -> None:
    (project / "docs").mkdir(parents=True, exist_ok=True)
    (project / "opencode.json").write_text(json.dumps(REFERENCES))


async def test_an_untrusted_projects_references_are_not_listed_until_it_is_trusted(tmp_path):
    project = tmp_path / "work"
    (project / ".git").mkdir(parents=True)
    _repository(project)
    env = isolated_env(tmp_path, OCS_TRUST_ALL="")  # this suite trusts everything; the user here does not
    location = {"directory": str(project)}
    async with OpenCode(db=tmp_path / "db.sqlite", directory=project, env=env) as host:
        assert (await host.reference.list(location=location)).data == []
        host.runtime.trust.grant(resolve_location(project))  # what `ocs trust` does
        [docs] = (await host.reference.list(location=location)).data
        assert (docs.name, docs.path) == ("docs", str(project / "docs"))
        # a change to the project's configuration (whoever made it) ends the trust: its references are gone again
        (project / "opencode.json").write_text(json.dumps({"references": {**REFERENCES["references"],
                                                                          "etc": {"path": "/etc"}}}))
        assert (await host.reference.list(location=location)).data == []


async def test_an_untrusted_projects_references_do_not_reach_the_model_until_it_is_trusted(tmp_path):
    async with harness(tmp_path) as rt:  # its environment does not trust every Location
        _repository(rt.project)
        rt.provider.push(text("ok"), text("ok"))
        untrusted = (await rt.sessions.create()).id
        await _prompt(rt, untrusted, "first")
        assert "<available_references>" not in "\n".join(rt.provider.requests[0].system)
        rt.runtime.trust.grant(resolve_location(rt.project))
        trusted = (await rt.sessions.create()).id
        await _prompt(rt, trusted, "second")
        guidance = rt.provider.requests[1].system[-1]
        assert "<name>docs</name>" in guidance and f"<path>{rt.project / 'docs'}</path>" in guidance
