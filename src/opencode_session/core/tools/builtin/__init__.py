"""The built-in tools the default registry offers."""

from .glob import GlobTool
from .read import ReadTool

__all__ = ["GlobTool", "ReadTool"]
