"""`GET /api/fs/find`'s finder on a tree of 50,000 files (plus 5,000 a .gitignore excludes), ms per call.

(a) the first search of the tree, which walks it with the ignore rules and builds the index; (b) later searches (the
budget: under 100 ms), each of which first checks the index is still fresh (a stat per directory and ignore file) and
then ranks; (c) a search right after a file was added, which lists that file's directory again first. Several kinds
of query: a few letters, a path fragment, one that matches nearly everything, one that matches nothing.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from _common import emit, median, spread, table, workspace

from opencode_session.core.fs import Finder

FILES = int(os.environ.get("BENCH_FIND_FILES", "50000"))
REPS = int(os.environ.get("BENCH_REPS", "15"))
BUDGET_MS = 100.0
WORDS = ["src", "lib", "core", "utils", "components", "server", "client", "tests", "docs", "api", "models", "views",
         "handlers", "config", "build", "scripts", "assets", "styles", "pages", "hooks"]
QUERIES = {"letters": "hndlr", "path fragment": "server/config", "nearly all": "s", "none": "zzqxj"}


def _tree(root: Path) -> None:
    """FILES files in nested directories (about 50 per directory), and an ignored build/ of a tenth as many."""
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n")
    per_dir = 50
    for n in range(FILES):
        d = n // per_dir
        folder = root / WORDS[d % len(WORDS)] / f"{WORDS[(d // 20) % len(WORDS)]}{d // 400}" / f"part{d}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{WORDS[n % len(WORDS)]}_{n}.py").touch()
    for n in range(FILES // 10):
        folder = root / "build" / f"out{n // 500}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"generated_{n}.js").touch()


def _ms(work) -> tuple[float, object]:
    started = time.perf_counter()
    result = work()
    return (time.perf_counter() - started) * 1000, result


def main() -> None:
    with workspace("ocs-bench-find-") as ws:
        root, env = ws["workdir"], dict(ws["env"])
        _tree(root)
        finder = Finder()
        cold, _ = _ms(lambda: finder.find(root, "hndlr", env))
        rows, results = [["first search (walk + index)", "1", f"{cold:,.1f}", "", ""]], {"cold_ms": cold}
        for label, query in QUERIES.items():
            times = []
            for _ in range(REPS):
                elapsed, found = _ms(lambda q=query: finder.find(root, q, env))
                times.append(elapsed)
            rows.append([f"warm: {label} ({query!r})", str(REPS), f"{median(times):,.1f}", spread(times),
                         f"{median(times) / BUDGET_MS:.2f}"])
            results[f"warm_{label.replace(' ', '_')}_ms"] = median(times)
        rewalks = []
        for n in range(3):
            (root / "src" / f"added_{n}.py").touch()
            rewalks.append(_ms(lambda: finder.find(root, "added", env))[0])
        rows.append(["after a file is added (one listing again)", "3", f"{median(rewalks):,.1f}", spread(rewalks), ""])
        results["rewalk_ms"] = median(rewalks)
        print(f"fs.find over {FILES:,} files (+{FILES // 10:,} ignored), ms per call")
        print(table(["case", "reps", "median ms", "min..max", "x budget (100 ms)"], rows))
        emit("fs_find", {"files": FILES, **results})


if __name__ == "__main__":
    main()
