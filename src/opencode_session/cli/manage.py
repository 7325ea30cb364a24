"""Managing sessions from the command line: `ocs sessions --children ID`, `ocs sessions rm ID…` (asks unless
`--yes`), `ocs sessions rename ID TITLE`, `ocs sessions export ID [--sanitize]`, `ocs sessions import FILE`,
`ocs sessions diff ID [--turn MSG]` and `ocs sessions stats` (also `ocs stats`)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..schema.lifecycle import SessionTranscript
from .hosts import open_host
from .run import EXIT_FAILED, EXIT_OK
from .usage import print_stats, since_ms, stats_zone


def _confirm(question: str) -> bool:
    sys.stderr.write(f"{question} [y/N] ")
    sys.stderr.flush()
    return sys.stdin.readline().strip().lower() in ("y", "yes")


async def remove_command(attach: str | None, db: str | Path | None, directory: Path, session_ids: list[str],
                         yes: bool) -> int:
    async with open_host(attach, db, directory) as client:
        sessions = [await client.session.get(sid) for sid in session_ids]  # an unknown ID fails before any removal
        if not yes:
            if not sys.stdin.isatty():
                print("ocs sessions rm: not a terminal to confirm on (pass --yes); nothing removed", file=sys.stderr)
                return EXIT_FAILED
            for session in sessions:
                print(f"{session.id}  {session.title}  ({session.location.directory})", file=sys.stderr)
            if not _confirm(f"Remove {'these sessions' if len(sessions) > 1 else 'this session'} and their child"
                            " sessions, with their history?"):
                print("Nothing removed.", file=sys.stderr)
                return EXIT_FAILED
        for session in sessions:
            await client.session.remove(session.id)
            print(f"removed {session.id}")
    return EXIT_OK


async def rename_command(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                         title: str) -> int:
    async with open_host(attach, db, directory) as client:
        await client.session.update(session_id, title=title)
    return EXIT_OK


async def export_command(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                         sanitize: bool) -> int:
    async with open_host(attach, db, directory) as client:
        transcript = await client.experimental.session_export(session_id, sanitize=sanitize)
    sys.stdout.write(json.dumps(transcript.wire(), ensure_ascii=False, indent=2) + "\n")
    return EXIT_OK


async def import_command(attach: str | None, db: str | Path | None, directory: Path, file: str,
                         here: bool) -> int:
    try:
        text = sys.stdin.read() if file == "-" else Path(file).read_text(encoding="utf-8")
        raw: Any = json.loads(text)
        transcript = SessionTranscript.model_validate(raw)
    except OSError as failed:
        print(f"ocs sessions import: cannot read {file}: {failed.strerror or failed}", file=sys.stderr)
        return EXIT_FAILED
    except ValueError as bad:  # not JSON, or not an exported transcript
        what = bad.errors()[0] if isinstance(bad, ValidationError) else None
        where = ".".join(str(p) for p in what["loc"]) + ": " + what["msg"] if what else str(bad)
        print(f"ocs sessions import: {file} is not an exported session ({where})", file=sys.stderr)
        return EXIT_FAILED
    async with open_host(attach, db, directory) as client:
        # without --attach, here: also when the database's own server does the import (cli/hosts.py)
        location = {"directory": str(directory)} if here or not attach else None
        info = await client.experimental.session_import(info=transcript.info, messages=transcript.messages,
                                                        location=location)
    print(info.id)
    print(f"Imported “{info.title}” at {info.location.directory}; continue it with `ocs run --session {info.id}`.",
          file=sys.stderr)
    return EXIT_OK


# --- what a turn changed, and usage ---------------------------------------------------------------------------

_COLOURS = {"+": "\033[32m", "-": "\033[31m", "@": "\033[36m"}
_BOLD, _RESET = "\033[1m", "\033[0m"


def _colour() -> bool:
    """Colour only on a terminal (and never when NO_COLOR is set)."""
    return sys.stdout.isatty() and "NO_COLOR" not in os.environ and os.environ.get("TERM") != "dumb"


def _diff_lines(patch: str, colour: bool) -> list[str]:
    lines = patch.splitlines()
    if not colour:
        return lines
    out = []
    for n, line in enumerate(lines):
        if n < 2 and line.startswith(("--- ", "+++ ")) or line.startswith(("old mode", "new mode")):
            out.append(f"{_BOLD}{line}{_RESET}")
        elif line[:1] in _COLOURS:
            out.append(f"{_COLOURS[line[:1]]}{line}{_RESET}")
        else:
            out.append(line)
    return out


async def diff_command(attach: str | None, db: str | Path | None, directory: Path, session_id: str,
                       turn: str | None) -> int:
    async with open_host(attach, db, directory) as client:
        diffs = await client.session.diff(session_id, from_=turn)
    colour = _colour()
    if not diffs:
        print("No files changed in that turn.", file=sys.stderr)
        return EXIT_OK
    for d in diffs:
        if d.patch:
            sys.stdout.write("\n".join(_diff_lines(d.patch, colour)) + "\n")
        else:
            print(f"{d.status} {d.path} (binary, or too large to show)")
    added, removed = sum(d.additions for d in diffs), sum(d.deletions for d in diffs)
    print(f"{len(diffs)} file{'s' if len(diffs) != 1 else ''} changed, +{added} -{removed}", file=sys.stderr)
    return EXIT_OK


async def stats_command(attach: str | None, db: str | Path | None, directory: Path, since: str | None, by: str,
                        timezone: str | None) -> int:
    now = int(time.time() * 1000)
    try:
        start = None if since is None else since_ms(since, now)
    except ValueError as bad:
        print(f"ocs stats: {bad}", file=sys.stderr)
        return EXIT_FAILED
    async with open_host(attach, db, directory) as client:
        stats = await client.experimental.session_stats(from_=start, timezone=stats_zone(timezone))
    print_stats(stats, since, by)
    return EXIT_OK
