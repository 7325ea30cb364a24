"""Reference guidance: the configured project references reach the model as their own Instruction Source, in the
baseline first and then as chronological updates when the configuration changes."""

from __future__ import annotations

import json

import pytest

from opencode_session.core.instructions.algebra import EMPTY, UNAVAILABLE, UNCHANGED, initialize, reconcile
from opencode_session.core.instructions.references import REFERENCE_GUIDANCE_KEY, reference_guidance_source
from opencode_session.schema.reference import ReferenceGitSource, ReferenceInfo, ReferenceLocalSource
from tests.support.scripted import text
from tests.test_instructions_runner import _prompt, _updates, harness

pytestmark = pytest.mark.anyio


def local(name: str, path: str, description: str | None = "about it") -> ReferenceInfo:
    return ReferenceInfo(name=name, path=path, description=description,
                         source=ReferenceLocalSource(type="local", path=path, description=description))


async def test_baseline_additions_removals_and_restatements():
    first = reference_guidance_source([local("zeta", "/z"), local("alpha", "/a"), local("bare", "/b", None)])
    assert first.keys == (REFERENCE_GUIDANCE_KEY,)
    base = await initialize(first)
    assert base.text.index("<name>alpha</name>") < base.text.index("<name>zeta</name>")
    assert "bare" not in base.text and "<path>/a</path>" in base.text  # no description: not offered

    grown = reference_guidance_source([local("alpha", "/a"), local("zeta", "/z"), local("new", "/n")])
    added = await reconcile(grown, base.applied)
    assert "<name>new</name>" in added.text and "alpha" not in added.text and "zeta" not in added.text

    shrunk = reference_guidance_source([local("alpha", "/a")])
    removed = await reconcile(shrunk, base.applied)
    assert "zeta" in removed.text and "must not be used" in removed.text and "<reference>" not in removed.text

    moved = reference_guidance_source([local("alpha", "/elsewhere"), local("zeta", "/z")])
    restated = await reconcile(moved, base.applied)
    assert "replaces the earlier one" in restated.text and "<path>/elsewhere</path>" in restated.text

    gone = await reconcile(EMPTY, base.applied)
    assert "no longer available" in gone.text
    assert await reconcile(reference_guidance_source(UNAVAILABLE), base.applied) is UNCHANGED


async def test_a_git_reference_is_offered_once_its_checkout_exists(tmp_path):
    checkout = tmp_path / "checkout"
    git = ReferenceInfo(name="sdk", path=str(checkout), description="The SDK",
                        source=ReferenceGitSource(type="git", repository="https://example.com/sdk.git"))
    assert reference_guidance_source([git]) is EMPTY
    checkout.mkdir()
    assert "<name>sdk</name>" in (await initialize(reference_guidance_source([git]))).text


async def test_references_reach_the_model_and_their_changes_come_as_updates(tmp_path):
    async with harness(tmp_path) as rt:
        (rt.project / "docs").mkdir()
        # the user's own file: it applies at once (a project's changed file would wait for a restart)
        config = tmp_path / "config" / "opencode" / "opencode.json"
        user = json.loads(config.read_text())
        docs = {"path": str(rt.project / "docs"), "description": "The manual"}
        config.write_text(json.dumps({**user, "references": {"docs": docs}}))
        sid = (await rt.sessions.create()).id
        rt.provider.push(text("ok"), text("ok"), text("ok"))
        await _prompt(rt, sid, "first")
        baseline = rt.provider.requests[0].system[-1]
        assert "<name>docs</name>" in baseline and f"<path>{rt.project / 'docs'}</path>" in baseline
        config.write_text(json.dumps({**user, "references": {"docs": docs, "api": {"path": "/srv/api",
                                                                                   "description": "API code"}}}))
        await _prompt(rt, sid, "second")
        [added] = _updates(rt.provider.requests[1])
        assert "<name>api</name>" in added and "<name>docs</name>" not in added
        assert rt.provider.requests[1].system == rt.provider.requests[0].system  # the prefix stays
        config.write_text(json.dumps(user))
        await _prompt(rt, sid, "third")
        assert "no longer available" in _updates(rt.provider.requests[2])[-1]


def test_the_references_at_a_location_are_read_again_once_what_they_came_from_changes(tmp_path):
    """Each boundary asks: the answer is kept while the configuration is the one it came from, which is read anew
    once a config file (present or not), a `{file:...}` target or an environment variable read on the way changes;
    a broken file is never kept. A project file's references are those it had when first read."""
    import os

    from opencode_session.core.config import ConfigSource
    from opencode_session.core.config.model import ConfigError
    from opencode_session.core.location import resolve_location
    from opencode_session.core.references import discover_references

    project = tmp_path / "project"
    project.mkdir()
    (project / ".git").mkdir()
    (tmp_path / "home").mkdir(exist_ok=True)
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"), "DOCS_NOTE": "first",
           "OCS_TRUST_ALL": "1"}
    global_dir = tmp_path / "config" / "opencode"
    global_dir.mkdir(parents=True)
    (project / "opencode.json").write_text(json.dumps({"references": {"docs": {"path": "./docs",
                                                                                 "description": "Docs"}}}))
    loc = resolve_location(project)
    source = ConfigSource(env)

    def names() -> dict[str, str | None]:
        config = source.at_sync(loc)
        first = discover_references(loc, config, env)
        assert discover_references(loc, config, env) == first  # kept while the configuration stands
        return {r.name: r.description for r in first}

    assert names() == {"docs": "Docs"}
    assert discover_references(loc, source.at_sync(loc), env)[0].path == str(project / "docs")
    config = global_dir / "opencode.json"
    config.write_text(json.dumps({"references": {"lib": {"path": "/opt/lib", "description": "{env:DOCS_NOTE}"}}}))
    assert names() == {"docs": "Docs", "lib": "first"}  # a file that appeared where none was
    env["DOCS_NOTE"] = "second"
    assert names() == {"docs": "Docs", "lib": "second"}  # a variable it read changed
    note = global_dir / "note.txt"
    note.write_text("from a file")
    config.write_text(json.dumps({"references": {"lib": {"path": "/opt/lib", "description": "{file:note.txt}"}}}))
    assert names() == {"docs": "Docs", "lib": "from a file"}
    note.write_text("edited, longer")
    assert names() == {"docs": "Docs", "lib": "edited, longer"}  # a {file:...} target changed
    config.write_text("{ broken")
    with pytest.raises(ConfigError):
        source.at_sync(loc)
    with pytest.raises(ConfigError):  # not kept: read again, and still broken
        source.at_sync(loc)
    config.unlink()
    assert names() == {"docs": "Docs"}
    # the project's file, changed while the runtime runs (by the model, say): its references wait for a restart
    (project / "opencode.json").write_text(json.dumps({"references": {"docs": "./docs", "evil": "/etc"}}))
    assert names() == {"docs": "Docs"}
    assert list(names()) == ["docs"] and os.path.isabs(discover_references(loc, source.at_sync(loc), env)[0].path)
