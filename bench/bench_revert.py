"""What a revert costs on a real project: a git Location of 10,000 files (100 directories of 100, about 1 KiB each)
where one turn's `bash` call changes 20 of them (14 edited, 3 created, 3 deleted), through the Embedded host and the
real runner, tools and snapshots: `revert/stage` to that turn's prompt and `revert/commit`, ms per call, against the
300 ms budget each; and what the snapshot a Step starts on costs there (nothing changed, and 20 files changed).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from _common import ToolTurns, emit, median, spread, table, workspace

from opencode_session.core.location import resolve_location
from opencode_session.sdk import OpenCode

REPS = int(os.environ.get("BENCH_REVERT_REPS", "7"))
DIRS, PER_DIR = 100, 100
BUDGET_MS = 300.0
EDITED = [f"d{n:02d}/f{n:02d}.txt" for n in range(0, 70, 5)]  # 14 files in 14 directories
CREATED = [f"d{n:02d}/new.txt" for n in (1, 2, 3)]
DELETED = [f"d{n:02d}/f50.txt" for n in (7, 8, 9)]
COMMAND = "; ".join([*(f"printf 'changed\\n' >> {p}" for p in EDITED), *(f"printf 'made\\n' > {p}" for p in CREATED),
                     *(f"rm {p}" for p in DELETED)])


def _project(root: Path) -> None:
    body = "".join(f"line {n} of a generated file\n" for n in range(40))  # ~1 KiB
    for d in range(DIRS):
        folder = root / f"d{d:02d}"
        folder.mkdir()
        for f in range(PER_DIR):
            (folder / f"f{f:02d}.txt").write_text(f"{d}/{f}\n{body}")
    subprocess.run(["git", "init", "-q", str(root)], check=True)


async def main() -> None:
    stage: list[float] = []
    commit: list[float] = []
    with workspace("ocs-bench-revert-") as ws:
        work: Path = ws["workdir"]
        _project(work)
        provider = ToolTurns("bash", {"command": COMMAND, "description": "change 20 files"})
        async with OpenCode(db=ws["db"], directory=work, env=ws["env"], provider=lambda _model: provider) as oc:
            snaps = oc.runtime.snapshots.at(resolve_location(work))
            started = time.perf_counter()
            first = await snaps.capture()  # every file stored once: what the first Step in a project pays
            first_ms = (time.perf_counter() - started) * 1000
            assert first is not None
            sid = (await oc.session.create()).id
            for _ in range(REPS):
                admitted = await oc.session.prompt(sid, prompt={"text": "change 20 files"})
                await oc.session.wait(sid)
                t0 = time.perf_counter()
                state = await oc.session.revert_stage(sid, message_id=admitted.id)
                t1 = time.perf_counter()
                await oc.session.revert_commit(sid)
                t2 = time.perf_counter()
                assert len(state.files) == 20, [f.path for f in state.files]
                stage.append((t1 - t0) * 1000)
                commit.append((t2 - t1) * 1000)
            idle = []
            for _ in range(REPS):
                t0 = time.perf_counter()
                await snaps.capture()
                idle.append((time.perf_counter() - t0) * 1000)
            busy = []
            for _ in range(REPS):
                subprocess.run(["bash", "-c", COMMAND], cwd=work, check=True)
                t0 = time.perf_counter()
                await snaps.capture()
                busy.append((time.perf_counter() - t0) * 1000)
                subprocess.run(["git", "--git-dir", str(snaps.repo.git_dir), "--work-tree", str(work), "checkout",
                                first, "--", *EDITED, *DELETED], check=True, capture_output=True)
                for path in CREATED:
                    (work / path).unlink()
    rows = [["revert/stage (20 of 10,000 files)", f"{median(stage):,.1f}", spread(stage),
             f"{median(stage) / BUDGET_MS:.2f}"],
            ["revert/commit", f"{median(commit):,.1f}", spread(commit), f"{median(commit) / BUDGET_MS:.2f}"],
            ["snapshot, nothing changed", f"{median(idle):,.1f}", spread(idle), ""],
            ["snapshot, 20 files changed", f"{median(busy):,.1f}", spread(busy), ""],
            ["first snapshot of the project", f"{first_ms:,.0f}", "", ""]]
    print(table(["operation", "median ms", "min..max", "of 300 ms"], rows))
    results: dict[str, Any] = {"files": DIRS * PER_DIR, "changed": len(EDITED) + len(CREATED) + len(DELETED),
                               "stage_ms": round(median(stage), 1), "commit_ms": round(median(commit), 1),
                               "capture_idle_ms": round(median(idle), 1), "capture_20_ms": round(median(busy), 1),
                               "first_capture_ms": round(first_ms), "budget_ms": BUDGET_MS, "reps": REPS}
    emit("revert", results)


if __name__ == "__main__":
    asyncio.run(main())
