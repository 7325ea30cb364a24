"""Skills: `SKILL.md` folders discovered globally and in the project, filtered by the selected agent's `skill`
permission, listed to the model by name and description, and loaded in full only through the `skill` tool."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .config import project_dirs
from .frontmatter import split_frontmatter
from .permission import Effect, Ruleset, evaluate

SKILL_FILE = "SKILL.md"


@dataclass(frozen=True)
class Skill:
    name: str
    description: str | None
    path: Path
    body: str


def _parse(path: Path) -> Skill | None:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    meta, body = split_frontmatter(text)
    name = meta.get("name") or path.parent.name
    return Skill(name=name, description=meta.get("description") or None, path=path, body=body.strip())


def skill_roots(global_config_dir: Path, project_root: Path, directory: Path, include_project: bool) -> list[Path]:
    """Where skills are found: the global config directory, then `.opencode/` from the project root down to
    `directory` (later roots override earlier skills of the same name)."""
    roots = [global_config_dir / "skill", global_config_dir / "skills"]
    if include_project:
        for folder in project_dirs(directory, project_root):
            roots += [folder / ".opencode" / "skill", folder / ".opencode" / "skills"]
    return roots


def discover_skills(roots: list[Path]) -> list[Skill]:
    """Every `<root>/<name>/SKILL.md`; a later root overrides an earlier skill of the same name."""
    found: dict[str, Skill] = {}
    for root in roots:
        if not root.is_dir():
            continue
        for path in sorted(root.glob(f"*/{SKILL_FILE}")):
            skill = _parse(path)
            if skill is not None:
                found[skill.name] = skill
    return sorted(found.values(), key=lambda s: s.name)


def skill_action(rules: Ruleset, name: str) -> Effect:
    """"allow", "deny" or "ask" for one skill under a Step's rules (its agent's `permission.skill` among them)."""
    return evaluate(rules, "skill", name)


def permitted_skills(rules: Ruleset, skills: list[Skill]) -> list[Skill]:
    return [s for s in skills if skill_action(rules, s.name) != "deny"]
