"""What the coding tools cost on a mid-sized project (noisy on a shared machine: read the medians with min..max).

(a) `grep` over 2,000 files (about 20 MB) through ripgrep and through the pure-Python fallback, ms per call;
(b) `bash` overhead: a trivial command (`true`) end to end through the registry, ms per call; (c) `edit` and
`apply_patch` of one line in a 1 MiB file, ms per call.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from _common import emit, median, spread, table, workspace

from opencode_session.core.tools import ToolContext, ToolSucceeded, default_registry

REPS = 5
FILES = 2000
LINES = 250  # ~10 KB per file


def _project(root: Path) -> None:
    for i in range(FILES):
        directory = root / f"pkg{i % 40}"
        directory.mkdir(exist_ok=True)
        lines = [f"def function_{i}_{n}(value):  # line {n} of a generated module" for n in range(LINES)]
        if i % 100 == 0:
            lines[LINES // 2] = "    raise NeedleError('found me')"
        (directory / f"mod{i}.py").write_text("\n".join(lines) + "\n")
    big = root / "big.txt"
    big.write_text("".join(f"line {n} of a one mebibyte file\n" for n in range(34_000)))


async def _ms(registry: Any, name: str, args: dict[str, Any], ctx: ToolContext, reps: int = REPS,
              reset: Any = None) -> list[float]:
    times = []
    for _ in range(reps):
        if reset is not None:
            reset()
        started = time.perf_counter()
        result = await registry.settle(name, args, ctx)
        times.append((time.perf_counter() - started) * 1000)
        assert isinstance(result, ToolSucceeded), result
    return times


async def main() -> None:
    registry = default_registry()
    rows: list[list[Any]] = []
    results: dict[str, Any] = {}
    rg_dir = str(Path(sys.executable).parent)
    with workspace("ocs-bench-tools-") as ws:
        work: Path = ws["workdir"]
        _project(work)

        def ctx(path: str) -> ToolContext:
            return ToolContext(session_id="ses_b", message_id="msg_b", call_id="c", agent="build", directory=work,
                               project_root=work, env={"PATH": path})

        engines = [("ripgrep", rg_dir)] if shutil.which("rg", path=rg_dir) else []
        engines.append(("python fallback", str(ws["root"])))
        for label, path in engines:
            times = await _ms(registry, "grep", {"pattern": r"Needle\w+"}, ctx(path))
            rows.append([f"grep, {label}", f"{median(times):,.1f}", spread(times)])
            results[f"grep_{label.split()[0]}_ms"] = round(median(times), 1)
        times = await _ms(registry, "bash", {"command": "true"}, ctx(rg_dir), reps=20)
        rows.append(["bash `true`", f"{median(times):,.1f}", spread(times)])
        results["bash_ms"] = round(median(times), 1)
        original = (work / "big.txt").read_text()

        def reset() -> None:
            (work / "big.txt").write_text(original)

        times = await _ms(registry, "edit", {"path": "big.txt", "oldString": "line 17000 of",
                                             "newString": "LINE 17000 of"}, ctx(rg_dir), reset=reset)
        rows.append(["edit 1 line of 1 MiB", f"{median(times):,.1f}", spread(times)])
        results["edit_ms"] = round(median(times), 1)
        patch = ("*** Begin Patch\n*** Update File: big.txt\n@@\n line 16999 of a one mebibyte file\n"
                 "-line 17000 of a one mebibyte file\n+LINE 17000\n*** End Patch")
        times = await _ms(registry, "apply_patch", {"patchText": patch}, ctx(rg_dir), reset=reset)
        rows.append(["apply_patch 1 line of 1 MiB", f"{median(times):,.1f}", spread(times)])
        results["apply_patch_ms"] = round(median(times), 1)
    print(f"median of {REPS} calls (bash: 20), ms; {FILES} files for grep")
    print(table(["call", "median ms", "min..max"], rows))
    if len(engines) == 2:
        ratio = results["grep_python_ms"] / results["grep_ripgrep_ms"]
        print(f"python fallback / ripgrep: {ratio:.1f}x")
        results["grep_fallback_ratio"] = round(ratio, 1)
    emit("tools", results)


if __name__ == "__main__":
    asyncio.run(main())
