"""The built-in tools the default registry offers."""

from .apply_patch import ApplyPatchTool
from .bash import BashTool
from .edit import EditTool
from .glob import GlobTool
from .grep import GrepTool
from .question import QuestionTool
from .read import ReadTool
from .skill import SkillTool
from .todo import TodoWriteTool
from .webfetch import WebFetchTool
from .websearch import WebSearchTool
from .write import WriteTool

__all__ = ["ApplyPatchTool", "BashTool", "EditTool", "GlobTool", "GrepTool", "QuestionTool", "ReadTool", "SkillTool",
           "TodoWriteTool", "WebFetchTool", "WebSearchTool", "WriteTool"]
