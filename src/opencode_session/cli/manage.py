"""Managing sessions from the command line: `ocs sessions --children ID`, `ocs sessions rm ID…` (asks unless
`--yes`), `ocs sessions rename ID TITLE`, `ocs sessions export ID [--sanitize]` and `ocs sessions import FILE`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..schema.lifecycle import SessionTranscript
from .hosts import open_host
from .run import EXIT_FAILED, EXIT_OK


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
        location = {"directory": str(directory)} if here else None
        info = await client.experimental.session_import(info=transcript.info, messages=transcript.messages,
                                                        location=location)
    print(info.id)
    print(f"Imported “{info.title}” at {info.location.directory}; continue it with `ocs run --session {info.id}`.",
          file=sys.stderr)
    return EXIT_OK
