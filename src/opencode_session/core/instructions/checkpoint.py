"""InstructionCheckpoint: the durable baseline, its sequence and Applied Instructions per Session, prepared at
every Safe Step Boundary before input promotion."""

from __future__ import annotations

import asyncio
import json
import platform as _platform
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import date
from typing import Any

import anyio

from ...schema import events as ev
from ...schema.reference import ReferenceInfo
from ..boundary import Boundary
from ..config import global_config_dir, project_config_disabled
from ..skills import Skill, discover_skills, permitted_skills, skill_roots
from ..store import Checkpoint, Store, Tx
from . import algebra
from .composition import InstructionSources
from .discovery import discovery_instructions, scan_discovery
from .references import reference_guidance_source, scan_references
from .sources import (
    InstructionFile,
    SkillInfo,
    config_instructions,
    date_source,
    entry_sources,
    environment_source,
    scan_config,
    skill_guidance_source,
)

Files = tuple[InstructionFile, ...] | algebra.Unavailable  # what a file-reading source read


@dataclass(frozen=True)
class SourceFiles:
    """What the file-reading sources read at one boundary."""

    discovered: Files
    configured: Files | None  # None: the config names no instruction files
    skills: list[Skill]
    references: list[ReferenceInfo] | algebra.Unavailable


def read_files(boundary: Boundary, env: Mapping[str, str]) -> SourceFiles:
    """Every file the sources read: ambient AGENTS.md, configured instruction files, skills; and the references the
    boundary's configuration names (blocking)."""
    loc = boundary.location
    patterns = list(boundary.config.instructions)
    roots = skill_roots(global_config_dir(env), loc.project_root, loc.directory, not project_config_disabled(env))
    return SourceFiles(
        scan_discovery(loc.directory, loc.project_root, global_config_dir(env), project_config_disabled(env),
                       boundary.config.confined()),
        scan_config(patterns, loc.project_root) if patterns else None,
        discover_skills(roots),
        scan_references(loc, boundary.config, env))


async def compose(boundary: Boundary, store: Store, env: Mapping[str, str], today: Callable[[], date],
                  platform: str, sources: InstructionSources | None = None) -> algebra.Instructions:
    """The built-in sources and any added ones, in the runner's declared order (composition.POSITIONS). The files
    come from the boundary when it read them, else from one worker-thread call (each hop to a thread costs more than
    these few small reads); added sources load while the entries are read."""
    files = boundary.instruction_files
    if not isinstance(files, SourceFiles):
        files = await anyio.to_thread.run_sync(read_files, boundary, env)
    loc = boundary.location
    entries_read = store.read(lambda reader: reader.instructions.entries(boundary.session.id))
    if sources is None:
        entries, added = await entries_read, {}
    else:
        entries, added = await asyncio.gather(entries_read, sources.produce(boundary))
    permitted = permitted_skills(boundary.rules(env), files.skills)
    return InstructionSources.combine({
        "environment": environment_source(loc.directory, loc.project_root, loc.is_git, platform),
        "date": date_source(today),
        "discovery": discovery_instructions(files.discovered),
        "configured": algebra.EMPTY if files.configured is None else config_instructions(files.configured),
        "skills": skill_guidance_source([SkillInfo(s.name, s.description) for s in permitted]),
        "references": reference_guidance_source(files.references),
        "entries": entry_sources(entries),
    }, added)


class CheckpointPreparer:
    """Initializes the baseline on the first Step, then reconciles into chronological updates."""

    def __init__(self, store: Store, env: Mapping[str, str], today: Callable[[], date] = date.today,
                 platform: str | None = None, sources: InstructionSources | None = None) -> None:
        self.store = store
        self.env = env
        self.today = today
        self.platform = platform or _platform.system().lower()
        self.sources = sources  # sources added at declared positions; None: the built-ins only

    def read_files(self, boundary: Boundary) -> SourceFiles:
        return read_files(boundary, self.env)

    async def prepare(self, boundary: Boundary) -> str:
        session_id = boundary.session.id
        instr = await compose(boundary, self.store, self.env, self.today, self.platform, self.sources)
        # one read for both: every Step passes here, and each read is a hop to the reader thread
        checkpoint, compaction_seq = await self.store.read(lambda reader: (
            reader.instructions.checkpoint(session_id), reader.messages.latest_completed_compaction(session_id)))
        if checkpoint is None:
            base = await algebra.initialize(instr)  # raises InstructionsBlocked while a source is unavailable
            applied = json.dumps(algebra.applied_to_json(base.applied))
            return await self.store.write(lambda tx: tx.instructions.initialize(
                session_id, Checkpoint(base.text, applied, tx.latest_seq(session_id))))
        previous = algebra.applied_from_json(checkpoint.applied)
        if compaction_seq is not None and compaction_seq > checkpoint.baseline_seq:
            fresh = await algebra.rebaseline(instr, previous)
            rebased = Checkpoint(fresh.text, json.dumps(algebra.applied_to_json(fresh.applied)), compaction_seq)
            await self.store.write(lambda tx: tx.instructions.rebaseline(session_id, rebased))
            return fresh.text
        result = await algebra.reconcile(instr, previous)
        if isinstance(result, algebra.Updated):
            snapshot_json = json.dumps(algebra.applied_to_json(result.applied))

            def _advance(tx: Tx, _record: Any) -> None:
                tx.instructions.advance(session_id, snapshot_json)

            await self.store.write(lambda tx: tx.append(
                ev.InstructionsUpdated(sessionID=session_id, text=result.text), commit_hook=_advance))
        return checkpoint.baseline
