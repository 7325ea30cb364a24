#!/usr/bin/env python3
"""Project bootstrap: creates .venv from requirements.lock, then runs the demo, the server, the tests or a benchmark.

Usage: python3 run.py demo | serve [ocs serve options] | test [--fast] [pytest args] | bench [name] | lock | ocs [args]

`demo`, `serve` and `ocs` install what the program needs (its declared dependencies at requirements.lock's pins);
`test` and `bench` add the rest of the lock (the test tools) to the same .venv.

`test` first runs the linter (ruff), the type checker (mypy) and the dependency checker (deptry), all configured in
pyproject.toml; any failure stops it. Then the whole suite runs on several processes at once (pytest-xdist; `-n 1`
runs it in one, `-n N` in N), and ends with its wall and CPU time and the 20 slowest tests. `test --fast` skips the
tests marked `slow` (the inner loop while working). The browser tests drive Debian's chromium: when it is absent,
`test` installs it with apt-get if it runs as root (saying so), and otherwise those tests skip and say why.
"""

from __future__ import annotations

import hashlib
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PY = BIN / "python"
STAMP = VENV / ".lock-stamp"  # the lock's digest and what was installed from it: "program" or "all"
# pytest-xdist workers for `test` and for `test --fast`, measured on a 2-core machine (docs/testing.md): the whole
# suite waits on processes a third of its time, which a third worker fills; the fast part mostly computes. An `-n`
# given to `test` wins.
TEST_WORKERS, FAST_WORKERS = "3", "2"


def _lock_digest() -> str:
    data = (ROOT / "requirements.lock").read_bytes() + (ROOT / "pyproject.toml").read_bytes()
    return hashlib.sha256(data).hexdigest()


def ensure_venv(everything: bool = False) -> None:
    """.venv with the program's own dependencies at the lock's pins, or (`everything`: tests, benchmarks) all that
    requirements.lock pins; a venv made for the program gains the rest in place."""
    digest = _lock_digest()
    stamp = STAMP.read_text().split() if PY.exists() and STAMP.exists() else []
    if stamp[:1] == [digest] and (not everything or stamp[1:] in ([], ["all"])):  # a bare digest: before "program"
        return
    # the first run (or one after requirements.lock changed) installs the pinned packages: say so, show pip's progress
    if stamp[:1] == [digest]:
        print(f"Adding the test tools to {VENV.name}/ from requirements.lock (about a minute)...", file=sys.stderr,
              flush=True)
    else:
        print(f"Preparing {VENV.name}/ from requirements.lock (the first run takes about "
              f"{'a minute' if everything else 'half a minute'}; later runs start at once)...", file=sys.stderr,
              flush=True)
    if not PY.exists():
        subprocess.check_call([sys.executable, "-m", "venv", str(VENV)])
    pip = [str(PY), "-m", "pip", "install", "--disable-pip-version-check"]
    lock = str(ROOT / "requirements.lock")
    if everything:
        subprocess.check_call([*pip, "-r", lock])
        subprocess.check_call([*pip, "--no-deps", "-e", str(ROOT)])
    else:  # pyproject.toml's dependencies, each held to the version the lock pins (which pins every one of them)
        subprocess.check_call([*pip, "-c", lock, "-e", str(ROOT)])
    STAMP.write_text(f"{digest} {'all' if everything else 'program'}\n")
    print(f"{VENV.name}/ is ready.", file=sys.stderr, flush=True)


def ensure_chromium() -> None:
    """Debian's chromium for the browser tests (Playwright downloads no browser): installed with apt-get when it is
    absent and this runs as root; otherwise the browser tests skip, printing why."""
    if shutil.which("chromium") or shutil.which("chromium-browser"):
        return
    apt = shutil.which("apt-get")
    if apt is None or os.name != "posix" or os.geteuid() != 0:
        print("chromium is not installed and cannot be here (that needs apt-get as root): the browser tests will skip",
              file=sys.stderr, flush=True)
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = [apt, "install", "-y", "--no-install-recommends", "chromium"]
    print(f"Installing chromium for the browser tests: {' '.join(install)}", file=sys.stderr, flush=True)
    if subprocess.call(install, env=env) != 0:  # a fresh machine may have no package lists yet
        print(f"{apt} update, then again", file=sys.stderr, flush=True)
        if subprocess.call([apt, "update"], env=env) != 0 or subprocess.call(install, env=env) != 0:
            print("chromium could not be installed: the browser tests will skip", file=sys.stderr, flush=True)


def become(argv: list[str]) -> int:
    """Replace this process with `argv` (on POSIX): signals, Ctrl-C and the exit code then reach the command itself,
    and a process manager sees it rather than a wrapper."""
    sys.stdout.flush()
    sys.stderr.flush()
    if os.name != "posix":
        return subprocess.call(argv)
    os.execv(argv[0], argv)
    return 127  # not reached


def run_tests(args: list[str]) -> int:
    """The checks, then pytest on TEST_WORKERS processes; prints the wall and CPU time it all took."""
    fast = "--fast" in args
    args = [a for a in args if a != "--fast"]
    started = time.monotonic()
    checks = ([str(BIN / "ruff"), "check", "src", "tests", "bench", "run.py"], [str(BIN / "mypy")],
              [str(BIN / "deptry"), "src"])  # every import in src is a declared dependency (pyproject.toml)
    for check in checks:
        code = subprocess.call(check, cwd=ROOT)
        if code != 0:
            return code
    if not fast:
        ensure_chromium()
    pytest = [str(PY), "-m", "pytest"]
    if not any(a.startswith(("-n", "--numprocesses")) or a == "no:xdist" for a in args):
        pytest += ["-n", FAST_WORKERS if fast else TEST_WORKERS, "--dist", "loadscope"]
    if not any(a.startswith("--durations") for a in args):
        pytest.append("--durations=20")
    if fast:
        pytest += ["-m", "not slow"]
    # compiled modules are kept in __pycache__ between runs, whatever the shell says: without them every worker and
    # every server a test starts compiles the sources (and pytest rewrites the tests' asserts) again, ~10 s of CPU
    env = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    code = subprocess.call([*pytest, *args], cwd=ROOT, env=env)
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"run.py test{' --fast' if fast else ''}: {time.monotonic() - started:.0f} s of wall time, "
          f"{used.ru_utime + used.ru_stime:.0f} s of CPU (checks and tests, every process they waited for)",
          file=sys.stderr, flush=True)
    return code


def main(argv: list[str]) -> int:
    if not argv or argv[0] in ("-h", "--help", "help"):  # usage needs no venv
        print(__doc__, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    cmd, rest = argv[0], argv[1:]
    if cmd not in ("lock", "demo", "serve", "ocs", "test", "bench"):
        print(f"run.py: unknown command {cmd!r}\n\n{__doc__}", file=sys.stderr)
        return 2
    if cmd == "lock":
        subprocess.check_call([sys.executable, "-m", "venv", "--clear", str(VENV)])
        subprocess.check_call([str(PY), "-m", "pip", "install", "-q", "-r", str(ROOT / "requirements.in")])
        frozen = subprocess.check_output([str(PY), "-m", "pip", "freeze", "--exclude-editable"], text=True)
        header = "# Generated by `python3 run.py lock` from requirements.in; every transitive dependency pinned.\n"
        (ROOT / "requirements.lock").write_text(header + frozen)
        STAMP.unlink(missing_ok=True)
        ensure_venv(everything=True)
        return 0
    ensure_venv(everything=cmd in ("test", "bench"))
    if cmd in ("demo", "serve", "ocs"):  # what `ocs` prints as a next step is then spelled as the user typed it
        python = "python3" if os.name == "posix" else "python"
        os.environ["OCS_LAUNCHER"] = f"{python} {sys.argv[0]} ocs"
    if cmd in ("demo", "serve"):
        return become([str(BIN / "ocs"), cmd, *rest])
    if cmd == "ocs":
        return become([str(BIN / "ocs"), *rest])
    if cmd == "test":
        return run_tests(rest)
    if cmd == "bench":
        benches = sorted((ROOT / "bench").glob("bench_*.py"))
        wanted = [b for b in benches if not rest or any(r in b.stem for r in rest)]
        code = 0
        for bench in wanted:
            print(f"== {bench.stem}", flush=True)
            code |= subprocess.call([str(PY), str(bench)], cwd=ROOT)
        return code
    raise AssertionError(cmd)  # every command was handled above


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
