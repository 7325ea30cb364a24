"""The API's view of a Location's files: reading one, listing a directory (access.py) and fuzzy finding across the
tree (finder.py), with the tools' path resolution and ignore rules."""

from .access import MAX_READ_BYTES, is_binary, list_directory, read_file
from .finder import DEFAULT_LIMIT, Finder, max_indexed

__all__ = ["DEFAULT_LIMIT", "MAX_READ_BYTES", "Finder", "is_binary", "max_indexed", "list_directory", "read_file"]
