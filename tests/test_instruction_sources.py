"""Exact rendered texts and discovery behaviour of the built-in Instruction Sources."""

from __future__ import annotations

from datetime import date, datetime
from pathlib import Path

import pytest

from opencode_session.core.config import project_config_disabled
from opencode_session.core.instructions import (
    EMPTY,
    ENTRY_KEY_PATTERN,
    UNCHANGED,
    AppliedSource,
    DuplicateKeyError,
    Instructions,
    InstructionsBlocked,
    SkillInfo,
    Updated,
    combine,
    config_instructions_source,
    date_source,
    discover_instruction_paths,
    discovery_source,
    entry_sources,
    environment_source,
    initialize,
    rebaseline,
    reconcile,
    skill_guidance_source,
)

pytestmark = pytest.mark.anyio


async def texts(old: Instructions, new: Instructions) -> tuple[str, str | None]:
    """(baseline of `old`, update text when moving to `new`, or None when unchanged)."""
    base = await initialize(old)
    result = await reconcile(new, base.applied)
    return base.text, (result.text if isinstance(result, Updated) else None)


# --- core/environment ----------------------------------------------------------------------------


async def test_environment_baseline_and_update() -> None:
    old = environment_source(Path("/w/p/sub"), Path("/w/p"), True, "linux")
    new = environment_source(Path("/w/q"), Path("/w/q"), False, "darwin")
    assert old.keys == ("core/environment",)
    baseline, update = await texts(old, new)
    assert baseline == (
        "Facts about the environment you are working in:\n"
        "<env>\n"
        "  Working directory: /w/p/sub\n"
        "  Project root: /w/p\n"
        "  Git repository: yes\n"
        "  Platform: linux\n"
        "</env>"
    )
    assert update == (
        "Your working environment has changed. It is now:\n"
        "<env>\n"
        "  Working directory: /w/q\n"
        "  Project root: /w/q\n"
        "  Git repository: no\n"
        "  Platform: darwin\n"
        "</env>"
    )
    same = environment_source(Path("/w/p/sub"), Path("/w/p"), True, "linux")
    assert (await texts(old, same))[1] is None
    # No removal renderer: dropping the source is silent.
    assert await reconcile(EMPTY, (await initialize(old)).applied) is UNCHANGED


# --- core/date -----------------------------------------------------------------------------------


async def test_date_baseline_and_update_state_only_the_new_date() -> None:
    old = date_source(lambda: date(2026, 6, 9))
    new = date_source(lambda: datetime(2026, 6, 10, 23, 59))
    assert old.keys == ("core/date",)
    baseline, update = await texts(old, new)
    assert baseline == "The current date is Tuesday, 2026-06-09."
    assert update == "The date has changed. The current date is now Wednesday, 2026-06-10."
    assert "2026-06-09" not in update
    assert (await texts(old, date_source(lambda: date(2026, 6, 9))))[1] is None


async def test_date_defaults_to_host_local_today() -> None:
    base = await initialize(date_source())
    assert base.applied["core/date"].value == date.today().isoformat()


# --- core/instructions (discovery) ---------------------------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    glob_dir = tmp_path / "config" / "opencode"
    root = tmp_path / "repo"
    mid = root / "pkg"
    leaf = mid / "src"
    for d in (glob_dir, leaf):
        d.mkdir(parents=True)
    (glob_dir / "AGENTS.md").write_text("global rules\n")
    (root / "AGENTS.md").write_text("root rules\n")
    (leaf / "AGENTS.md").write_text("leaf rules")
    return {"global": glob_dir, "root": root, "mid": mid, "leaf": leaf, "tmp": tmp_path}


async def test_discovery_order_global_then_root_down_to_directory(tree) -> None:
    paths = discover_instruction_paths(tree["leaf"], tree["root"], tree["global"], False)
    assert paths == [tree["global"] / "AGENTS.md", tree["root"] / "AGENTS.md", tree["leaf"] / "AGENTS.md"]

    instr = await discovery_source(tree["leaf"], tree["root"], tree["global"], False)
    assert instr.keys == ("core/instructions",)
    base = await initialize(instr)
    g, r, lf = tree["global"], tree["root"], tree["leaf"]
    assert base.text == (
        f"Instructions found in {g}/AGENTS.md:\nglobal rules\n\n"
        f"Instructions found in {r}/AGENTS.md:\nroot rules\n\n"
        f"Instructions found in {lf}/AGENTS.md:\nleaf rules"
    )
    assert base.applied["core/instructions"].value == [
        {"path": str(g / "AGENTS.md"), "content": "global rules\n"},
        {"path": str(r / "AGENTS.md"), "content": "root rules\n"},
        {"path": str(lf / "AGENTS.md"), "content": "leaf rules"},
    ]


async def test_discovery_update_restates_complete_set_and_removal(tree) -> None:
    old = await discovery_source(tree["mid"], tree["root"], tree["global"], False)
    (tree["mid"] / "AGENTS.md").write_text("mid rules")
    new = await discovery_source(tree["mid"], tree["root"], tree["global"], False)
    base = await initialize(old)
    result = await reconcile(new, base.applied)
    g, r, m = tree["global"], tree["root"], tree["mid"]
    assert result.text == (
        "The AGENTS.md instruction files in effect have changed. "
        "The complete current set follows and replaces every set given earlier.\n\n"
        f"Instructions found in {g}/AGENTS.md:\nglobal rules\n\n"
        f"Instructions found in {r}/AGENTS.md:\nroot rules\n\n"
        f"Instructions found in {m}/AGENTS.md:\nmid rules"
    )
    assert await reconcile(new, result.applied) is UNCHANGED

    for p in (g, r, m):
        (p / "AGENTS.md").unlink()
    gone = await discovery_source(tree["mid"], tree["root"], tree["global"], False)
    assert gone is EMPTY
    removal = await reconcile(gone, result.applied)
    assert removal == Updated(
        "No AGENTS.md instruction files are in effect any more; disregard the ones given earlier.", {}
    )


async def test_discovery_disable_project_keeps_global_only(tree, monkeypatch) -> None:
    assert not project_config_disabled()
    monkeypatch.setenv("OPENCODE_DISABLE_PROJECT_CONFIG", "true")
    assert project_config_disabled()
    assert project_config_disabled({"OPENCODE_DISABLE_PROJECT_CONFIG": "1"})
    assert not project_config_disabled({"OPENCODE_DISABLE_PROJECT_CONFIG": "0"})
    instr = await discovery_source(tree["leaf"], tree["root"], tree["global"], project_config_disabled())
    base = await initialize(instr)
    assert base.text == f"Instructions found in {tree['global']}/AGENTS.md:\nglobal rules"


async def test_discovery_outside_project_root_skips_project_files(tree) -> None:
    outside = tree["tmp"] / "elsewhere"
    outside.mkdir()
    (outside / "AGENTS.md").write_text("not mine")
    assert discover_instruction_paths(outside, tree["root"], tree["global"], False) == [tree["global"] / "AGENTS.md"]


async def test_discovery_deduplicates(tree) -> None:
    # The global config dir coincides with the project root: the file is listed once, first.
    paths = discover_instruction_paths(tree["leaf"], tree["root"], tree["root"], False)
    assert paths == [tree["root"] / "AGENTS.md", tree["leaf"] / "AGENTS.md"]


async def test_discovery_nothing_found_is_empty(tmp_path: Path) -> None:
    root = tmp_path / "r"
    root.mkdir()
    assert await discovery_source(root, root, tmp_path / "no-config", False) is EMPTY
    assert await discovery_source(root, root, None, True) is EMPTY


async def test_discovery_unreadable_file_makes_source_unavailable(tree) -> None:
    (tree["leaf"] / "AGENTS.md").write_bytes(b"\xff\xfe not utf-8 \xc3")
    instr = await discovery_source(tree["leaf"], tree["root"], tree["global"], False)
    assert instr.keys == ("core/instructions",)
    with pytest.raises(InstructionsBlocked) as err:
        await initialize(instr)
    assert err.value.keys == ("core/instructions",)
    stored = {"core/instructions": AppliedSource([{"path": "/x/AGENTS.md", "content": "old"}], "r")}
    assert await reconcile(instr, stored) is UNCHANGED  # keeps the stale belief silently
    assert (await rebaseline(instr, stored)).text == "Instructions found in /x/AGENTS.md:\nold"


async def test_discovery_permission_error_makes_source_unavailable(tree, monkeypatch) -> None:
    real = Path.read_text

    def deny(self: Path, *args, **kwargs):
        if self.name == "AGENTS.md" and self.parent == tree["root"]:
            raise PermissionError(self)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "read_text", deny)
    instr = await discovery_source(tree["leaf"], tree["root"], tree["global"], False)
    with pytest.raises(InstructionsBlocked):
        await initialize(instr)


# --- core/config-instructions --------------------------------------------------------------------


async def test_config_instructions_paths_globs_home_and_dedup(tmp_path: Path, isolated_env: Path) -> None:
    base = tmp_path / "proj"
    (base / "docs").mkdir(parents=True)
    (base / "docs" / "b.md").write_text("B")
    (base / "docs" / "a.md").write_text("A\n")
    (base / "RULES.md").write_text("rules")
    (isolated_env / "mine.md").write_text("home")
    absolute = tmp_path / "abs.md"
    absolute.write_text("abs")
    patterns = ["RULES.md", "docs/*.md", "~/mine.md", str(absolute), "docs/a.md", "missing.md", "https://x/y.md", ""]
    instr = await config_instructions_source(patterns, base)
    assert instr.keys == ("core/config-instructions",)
    old = await initialize(instr)
    assert old.text == (
        f"Instructions configured in {base}/RULES.md:\nrules\n\n"
        f"Instructions configured in {base}/docs/a.md:\nA\n\n"
        f"Instructions configured in {base}/docs/b.md:\nB\n\n"
        f"Instructions configured in {isolated_env}/mine.md:\nhome\n\n"
        f"Instructions configured in {absolute}:\nabs"
    )

    update = await reconcile(await config_instructions_source(["RULES.md"], base), old.applied)
    assert update.text == (
        "The instruction files named in the configuration have changed. "
        "The complete current set follows and replaces the one given earlier.\n\n"
        f"Instructions configured in {base}/RULES.md:\nrules"
    )
    assert await config_instructions_source(["nothing/*.md"], base) is EMPTY
    removal = await reconcile(EMPTY, update.applied)
    assert removal.text == "The instruction files named in the configuration earlier no longer apply; disregard them."


async def test_config_instructions_unreadable_is_unavailable(tmp_path: Path) -> None:
    (tmp_path / "bad.md").write_bytes(b"\xff\xff")
    with pytest.raises(InstructionsBlocked):
        await initialize(await config_instructions_source(["*.md"], tmp_path))


# --- core/skill-guidance -------------------------------------------------------------------------

SKILLS_HEAD = (
    "Skills bundle specialised instructions and workflows for particular kinds of task. "
    "When a task fits a skill's description, load that skill with the skill tool before starting.\n"
)


async def test_skill_guidance_filters_sorts_and_renders() -> None:
    old = skill_guidance_source([
        SkillInfo("zeta", "Last <one> & only"),
        SkillInfo("alpha", "First"),
        SkillInfo("hidden", None),
        SkillInfo("blank", "  "),
    ])
    assert old.keys == ("core/skill-guidance",)
    new = skill_guidance_source([SkillInfo("beta", "Second")])
    baseline, update = await texts(old, new)
    assert baseline == SKILLS_HEAD + (
        "<available_skills>\n"
        "  <skill>\n"
        "    <name>alpha</name>\n"
        "    <description>First</description>\n"
        "  </skill>\n"
        "  <skill>\n"
        "    <name>zeta</name>\n"
        "    <description>Last &lt;one&gt; &amp; only</description>\n"
        "  </skill>\n"
        "</available_skills>"
    )
    assert update == (
        "The set of available skills has changed. The list below supersedes any earlier list of skills.\n"
        + SKILLS_HEAD
        + "<available_skills>\n"
        "  <skill>\n"
        "    <name>beta</name>\n"
        "    <description>Second</description>\n"
        "  </skill>\n"
        "</available_skills>"
    )
    removal = await reconcile(EMPTY, (await initialize(new)).applied)
    assert removal.text == "Skills are no longer available. Do not load any skill listed earlier."


async def test_skill_guidance_empty_when_nothing_listed() -> None:
    assert skill_guidance_source([]) is EMPTY
    assert skill_guidance_source([SkillInfo("x", None)]) is EMPTY


# --- api/<key> entries ---------------------------------------------------------------------------


async def test_entry_sources_order_and_render() -> None:
    instr = entry_sources([("zz", {"b": [1, 2], "a": "x"}), ("notes", "plain text"), ("n.1", 3)])
    assert instr.keys == ("api/n.1", "api/notes", "api/zz")
    base = await initialize(instr)
    assert base.text == (
        '<context key="n.1">\n3\n</context>\n\n'
        '<context key="notes">\nplain text\n</context>\n\n'
        '<context key="zz">\n{\n  "b": [\n    1,\n    2\n  ],\n  "a": "x"\n}\n</context>'
    )
    assert "api" not in base.text.replace('"', "")

    changed = entry_sources([("notes", "new text"), ("n.1", 3)])
    result = await reconcile(changed, base.applied)
    assert result.text == (
        'The context under "notes" has changed; this block supersedes its earlier value:\n'
        '<context key="notes">\nnew text\n</context>\n\n'
        'The context under "zz" has been withdrawn and no longer applies.'
    )
    assert set(result.applied) == {"api/n.1", "api/notes"}
    assert await reconcile(changed, result.applied) is UNCHANGED


async def test_entry_sources_validation() -> None:
    assert ENTRY_KEY_PATTERN.pattern == r"^[a-z0-9][a-z0-9._-]*$"
    assert entry_sources([]) is EMPTY
    for bad in ("a/b", "Upper", "-x", ""):
        with pytest.raises(ValueError):
            entry_sources([(bad, 1)])
    with pytest.raises(DuplicateKeyError):
        entry_sources([("a", 1), ("a", 2)])


# --- the runner's fixed order composes without clashes -------------------------------------------


async def test_builtins_compose_in_runner_order(tree) -> None:
    instr = combine(
        environment_source(tree["leaf"], tree["root"], True, "linux"),
        date_source(lambda: date(2026, 1, 1)),
        await discovery_source(tree["leaf"], tree["root"], tree["global"], False),
        await config_instructions_source([], tree["root"]),
        skill_guidance_source([SkillInfo("s", "d")]),
        entry_sources([("k", "v")]),
    )
    assert instr.keys == ("core/environment", "core/date", "core/instructions", "core/skill-guidance", "api/k")
    base = await initialize(instr)
    assert base.text.startswith("Facts about the environment")
    assert base.text.endswith('<context key="k">\nv\n</context>')
    assert await reconcile(instr, base.applied) is UNCHANGED


@pytest.mark.parametrize("corrupt", [
    lambda v: {**v, "is_git": 0},                    # a 0 is not the false it looks like
    lambda v: {**v, "written_by": "another version"},  # a field this version does not know
    lambda v: [v],
], ids=["loose-type", "extra-field", "wrong-shape"])
async def test_a_stored_value_of_another_shape_is_shown_afresh_not_misread(tmp_path, corrupt) -> None:
    env = environment_source(tmp_path, tmp_path, False, "linux")
    stored = (await initialize(env)).applied["core/environment"]
    result = await reconcile(env, {"core/environment": AppliedSource(corrupt(stored.value), stored.removed)})
    assert isinstance(result, Updated) and result.text.startswith("Facts about the environment you are working in:")
    skills = skill_guidance_source([SkillInfo("lint", "Lints code")])
    stored = (await initialize(skills)).applied["core/skill-guidance"]
    result = await reconcile(skills, {"core/skill-guidance": AppliedSource([{"name": "lint", "description": None}],
                                                                           stored.removed)})
    assert isinstance(result, Updated) and result.text.startswith("Skills bundle specialised instructions")
