"""The `---` header of a markdown file (skills, commands): simple `key: value` lines, then the body."""

from __future__ import annotations

import re

_FRONTMATTER = re.compile(r"\A---\s*\n(.*?)\n---\s*\n?(.*)\Z", re.S)


def split_frontmatter(text: str) -> tuple[dict[str, str], str]:
    """(the header's values, quotes stripped; the body). A file without a header is all body."""
    match = _FRONTMATTER.match(text)
    if not match:
        return {}, text
    meta: dict[str, str] = {}
    for line in match.group(1).splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip().strip("\"'")
    return meta, match.group(2)
