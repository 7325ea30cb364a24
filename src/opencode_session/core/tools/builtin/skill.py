"""The `skill` tool: loads one permitted skill's full instructions by name (bodies are never in the baseline)."""

from __future__ import annotations

import os

import anyio
from pydantic import Field

from ...config import global_config_dir, project_config_disabled
from ...skills import discover_skills, skill_action, skill_roots
from ..arguments import Arguments, schema_of
from ..tool import ToolContext, ToolFailure, ToolOutput


class SkillArguments(Arguments):
    name: str = Field(min_length=1, description="The skill's name.")


class SkillTool:
    name = "skill"
    changes_files = False
    description = (
        "Load a skill's full instructions by name. Use it when a task matches one of the available skills listed "
        "in your instructions."
    )
    arguments = SkillArguments
    parameters = schema_of(SkillArguments)

    async def execute(self, args: SkillArguments, ctx: ToolContext) -> ToolOutput:
        env = ctx.env if ctx.env is not None else os.environ
        name = args.name
        roots = skill_roots(global_config_dir(env), ctx.project_root, ctx.directory, not project_config_disabled(env))
        skills = {s.name: s for s in await anyio.to_thread.run_sync(discover_skills, roots)}
        skill = skills.get(name)
        if skill is None or skill_action(ctx.rules, name) == "deny":
            available = ", ".join(n for n in sorted(skills) if skill_action(ctx.rules, n) != "deny") or "none"
            raise ToolFailure(f"No skill named {name!r} is available. Available skills: {available}")
        await ctx.permit("skill", [name])  # a skill the rules `ask` for waits for the user
        return ToolOutput.of_text(f"<skill name=\"{skill.name}\">\n{skill.body}\n</skill>",
                                  structured={"name": skill.name, "path": str(skill.path)}, title=skill.name)
