"""The built-in tools the default registry offers."""

from .glob import GlobTool
from .read import ReadTool
from .skill import SkillTool

__all__ = ["GlobTool", "ReadTool", "SkillTool"]
