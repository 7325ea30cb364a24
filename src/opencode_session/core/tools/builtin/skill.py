"""The `skill` tool: loads one permitted skill's full instructions by name (bodies are never in the baseline)."""

from __future__ import annotations

import os
from typing import Any

import anyio

from ...config import global_config_dir, project_config_disabled
from ...skills import discover_skills, skill_action, skill_roots
from ..tool import ToolContext, ToolFailure, ToolOutput


class SkillTool:
    name = "skill"
    changes_files = False
    description = (
        "Load a skill's full instructions by name. Use it when a task matches one of the available skills listed "
        "in your instructions."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"name": {"type": "string", "minLength": 1, "description": "The skill's name."}},
        "required": ["name"],
        "additionalProperties": False,
    }

    async def execute(self, input: dict[str, Any], ctx: ToolContext) -> ToolOutput:
        env = ctx.env if ctx.env is not None else os.environ
        name = input["name"]
        roots = skill_roots(global_config_dir(env), ctx.project_root, ctx.directory, not project_config_disabled(env))
        skills = {s.name: s for s in await anyio.to_thread.run_sync(discover_skills, roots)}
        skill = skills.get(name)
        if skill is None or skill_action(ctx.rules, name) == "deny":
            available = ", ".join(n for n in sorted(skills) if skill_action(ctx.rules, n) != "deny") or "none"
            raise ToolFailure(f"No skill named {name!r} is available. Available skills: {available}")
        await ctx.permit("skill", [name])  # a skill the rules `ask` for waits for the user
        return ToolOutput.of_text(f"<skill name=\"{skill.name}\">\n{skill.body}\n</skill>",
                                  structured={"name": skill.name, "path": str(skill.path)}, title=skill.name)
