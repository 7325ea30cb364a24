"""The API's view of a Location's files: reading one, listing a directory (access.py) and fuzzy finding across the
tree (finder.py), with the tools' path resolution and ignore rules."""

from .access import MAX_READ_BYTES, is_binary, list_directory, read_file

# finder.py is imported by the first find (Runtime.finder), not with the package
__all__ = ["MAX_READ_BYTES", "is_binary", "list_directory", "read_file"]
