"""Failures in a row, over many seeds: runs `tests/cluster/test_failures_in_a_row.py` (three `ocs serve` hosts on one
PostgreSQL schema; an owner killed and another host started, then another owner paused beyond its lease and resumed;
10-14 sessions in the middle of loops of `bash` calls) for seeds FIRST..LAST, and reports how many held and how long
each took. The test itself runs five seeds; this is the longer loop.

Run: .venv/bin/python bench/bench_failures_in_a_row.py [FIRST [LAST]]   (default 1 20; needs PostgreSQL:
OCS_TEST_POSTGRES names the server, default the local one's `test` database)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

from _common import ROOT


def main() -> int:
    first = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    last = int(sys.argv[2]) if len(sys.argv) > 2 else max(first, 20)
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:xdist", "-p", "no:cacheprovider", "--durations=0",
         "tests/cluster/test_failures_in_a_row.py"],
        cwd=ROOT, env={**os.environ, "OCS_SEQUENCE_SEEDS": f"{first}-{last}"}, capture_output=True, text=True)
    out = run.stdout + run.stderr
    took = {int(m[1]): float(m[0]) for m in re.findall(r"([\d.]+)s call .*\[(\d+)\]", out)}
    failed = sorted(int(m) for m in re.findall(r"FAILED .*\[(\d+)\]", out))
    for seed in range(first, last + 1):
        print(f"seed {seed:4d}  {'FAILED' if seed in failed else 'held  '}  {took.get(seed, float('nan')):6.2f} s")
    print(f"{last - first + 1 - len(failed)} of {last - first + 1} seeds held in {time.monotonic() - started:.0f} s")
    if failed:
        print(out[-6000:])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
