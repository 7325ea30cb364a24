"""Whether paths live on local filesystems, read from Linux's mount table: there a stat or a small read cannot hang
the way it can on a network or FUSE mount, so it may run on the event loop."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

MOUNTS = Path("/proc/self/mounts")

# Disk and memory filesystems. Anything else (nfs, cifs, 9p, fuse.*, ...) counts as one that can hang.
LOCAL_TYPES = frozenset({"ext2", "ext3", "ext4", "xfs", "btrfs", "f2fs", "zfs", "bcachefs", "tmpfs", "ramfs",
                         "overlay"})

# How long a verdict that a Location's paths are all local stands before a worker thread checks it again
RECHECK_S = 10.0

_ESCAPE = re.compile(r"\\([0-7]{3})")


def parse_mounts(text: str) -> list[tuple[str, str]]:
    """(mount point, filesystem type) per line of a mounts table; spaces in a mount point come escaped as \\040."""
    table = []
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 3:
            table.append((_ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), fields[1]), fields[2]))
    return table


def all_local(paths: Iterable[Path], table: list[tuple[str, str]] | None = None) -> bool:
    """True when every mount on the way to each (absolute, resolved) path is a local filesystem; False when the
    mount table cannot be read (not Linux)."""
    if table is None:
        try:
            table = parse_mounts(MOUNTS.read_text())
        except OSError:
            return False
    if not table:
        return False
    for path in paths:
        text = str(path)
        for point, fstype in table:
            if (text == point or text.startswith(point.rstrip("/") + "/")) and fstype not in LOCAL_TYPES:
                return False
    return True
