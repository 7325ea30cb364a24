"""What a user installs is what the tests test: the wheel built from the repo, installed into a fresh venv with its
declared dependencies only (at the lock's pins), runs `ocs run` with a stdio MCP server against a loopback provider;
without the `postgres` extra a PostgreSQL address is refused in one line naming the install command (by `ocs serve`
and by the SDK, as a typed error); with it `ocs serve` runs on the machine's PostgreSQL. The dependency checker
(deptry, part of `python3 run.py test`) fails on an import that no declared dependency provides. And from a fresh
checkout `python3 run.py demo` installs the program's dependencies alone, each at the lock's pin, where `python3 run.py
test` then brings the same .venv to exactly what the lock pins."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from tests.support import fake_openai as fake
from tests.support.cli import make_home
from tests.support.mcp_harness import local
from tests.support.postgres import fresh_schema, require_postgres
from tests.support.server import isolated_env, start_server

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
PG_URL = "postgresql://postgres@127.0.0.1:5432/test"
INSTALL_LINE = "pip install 'opencode-session[postgres]'"


def pip(*args: str, timeout: float = 400) -> None:
    done = subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args],
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, done.stdout + done.stderr


@dataclass
class Venv:
    root: Path
    wheel: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    @property
    def ocs(self) -> str:
        return str(self.root / "bin" / "ocs")

    def install(self, requirement: str) -> None:
        """`requirement` and what it declares, held to the lock's pins (from the registry or pip's cache)."""
        pip("--python", self.python, "install", "--prefer-binary", "-c", str(ROOT / "requirements.lock"), requirement)

    def has(self, module: str) -> bool:
        code = f"import importlib.util, sys; sys.exit(importlib.util.find_spec({module!r}) is None)"
        return subprocess.run([self.python, "-c", code], timeout=60).returncode == 0


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Venv]:
    """One fresh venv for the module (its build is the cost): the wheel and its declared dependencies only."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"  # the files a wheel is built from, so the build leaves nothing in the checkout
    shutil.copytree(ROOT / "src", source / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    pip("wheel", "--no-deps", "-w", str(base / "dist"), str(source))
    [wheel] = (base / "dist").glob("opencode_session-*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(base / "venv")], check=True, timeout=120)
    env = Venv(base / "venv", wheel)
    env.install(str(wheel))
    yield env


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_wheel_alone_runs_an_mcp_tool_and_refuses_postgres_in_one_line(venv, tmp_path, loop_provider):
    assert venv.has("mcp") and venv.has("opencode_session")
    assert not venv.has("psycopg") and not venv.has("pytest")  # declared dependencies only

    home = make_home(tmp_path)
    home.configure(loop_provider, mcp={"docs": local("docs")})
    seen = len(loop_provider.requests)
    loop_provider.enqueue(
        fake.completion(fake.tool_call_deltas(0, "call_1", "docs_echo", '{"text": "from the wheel"}'),
                        finish_reason="tool_calls"),
        fake.completion(fake.text_deltas("The docs answered.")))
    done = subprocess.run([venv.ocs, "run", "ask the docs"], cwd=home.work, env=home.env, input="",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.endswith("The docs answered.\n")
    [result] = [m for m in loop_provider.requests[-1].json["messages"] if m["role"] == "tool"]
    assert "echo: from the wheel" in json.dumps(result["content"])
    assert len(loop_provider.requests) == seen + 2

    refused = subprocess.run([venv.ocs, "serve", "--port", "0", "--db", PG_URL], cwd=home.work, env=home.env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        f"ocs serve: PostgreSQL support is not installed (needed for postgresql://postgres@127.0.0.1:5432/test): "
        f"{INSTALL_LINE}"]
    ran = subprocess.run([venv.ocs, "run", "--db", PG_URL, "hello"], cwd=home.work, env=home.env, input="",
                         capture_output=True, text=True, timeout=60)
    assert ran.returncode != 0 and ran.stderr.splitlines() == [
        f"ocs: PostgreSQL support is not installed (needed for postgresql://postgres@127.0.0.1:5432/test): "
        f"{INSTALL_LINE}"], ran.stderr
    sdk = ("from opencode_session.sdk import BackendNotInstalledError, OpenCode\n"
           "try:\n"
           "    OpenCode(db='postgresql://u:secret@127.0.0.1:5432/test')\n"
           "except BackendNotInstalledError as missing:\n"
           "    print(missing.install, '|', missing)\n")
    said = subprocess.run([venv.python, "-c", sdk], capture_output=True, text=True, timeout=60)
    assert said.stderr == "" and "secret" not in said.stdout
    assert said.stdout.strip() == (f"{INSTALL_LINE} | PostgreSQL support is not installed (needed for "
                                   f"postgresql://u@127.0.0.1:5432/test): {INSTALL_LINE}")


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_with_the_postgres_extra_the_wheel_serves_on_postgresql(venv, tmp_path):
    require_postgres()
    venv.install(f"{venv.wheel}[postgres]")
    assert venv.has("psycopg") and venv.has("psycopg_pool")
    with fresh_schema() as url:
        srv = start_server(tmp_path, db=url, program=(venv.ocs, "serve"), timeout=60)
        try:
            with httpx2.Client(base_url=srv.url, timeout=30) as client:
                assert client.get("/api/health").json()["healthy"] is True
                created = client.post("/api/session", json={})
                assert created.status_code == 200, created.text
                listed = client.get("/api/session").json()
                assert [s["id"] for s in listed["data"]] == [created.json()["data"]["id"]], listed
        finally:
            srv.proc.terminate()
            srv.proc.wait(timeout=30)
        assert any("postgresql://" in line for line in srv.stderr_lines)


def test_the_dependency_checker_fails_on_an_import_no_declared_dependency_provides(tmp_path):
    ok = subprocess.run([str(BIN / "deptry"), "src"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    project = tmp_path / "project"
    (project / "src" / "opencode_session").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", project / "pyproject.toml")
    # yaml is installed (a test tool brings PyYAML) but no dependency of opencode-session declares it
    (project / "src" / "opencode_session" / "uses.py").write_text("import mcp\nimport yaml\n")
    bad = subprocess.run([str(BIN / "deptry"), "src"], cwd=project, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "'yaml' imported but" in bad.stdout + bad.stderr


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pins(text: str) -> dict[str, str]:
    """name -> version of `name==version` lines (a lock, or what pip freeze prints)."""
    pairs = (line.split("==", 1) for line in text.splitlines() if "==" in line and not line.startswith("#"))
    return {_canonical(name): version.strip() for name, version in pairs}


def _frozen(python: Path) -> dict[str, str]:
    done = subprocess.run([str(python), "-m", "pip", "freeze", "--exclude-editable"], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    return _pins(done.stdout)


def _checkout(into: Path) -> Path:
    """The repository's files as a fresh clone has them (this working tree's, changes included), without .venv;
    mypy's cache comes along, so the checks `run.py test` starts with do not recompute it."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, timeout=60, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (into / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, into / name)
    if (ROOT / ".mypy_cache").is_dir():
        shutil.copytree(ROOT / ".mypy_cache", into / ".mypy_cache")
    return into


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_run_py_demo_installs_the_program_alone_and_test_adds_the_tools_to_the_same_venv(tmp_path):
    clone = _checkout(tmp_path / "clone")
    env = isolated_env(tmp_path)
    lock = _pins((ROOT / "requirements.lock").read_text())
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]

    demo = subprocess.run([sys.executable, "run.py", "demo"], cwd=clone, env=env, capture_output=True, text=True,
                          timeout=600)
    assert demo.returncode == 0, demo.stderr[-4000:]
    assert "Preparing .venv/ from requirements.lock" in demo.stderr
    assert "I'll start by listing the files in the project." in demo.stdout  # the demo's first answer
    python = clone / ".venv" / "bin" / "python"
    program = _frozen(python)
    assert {name: lock.get(name) for name in program} == program  # each package at the lock's pin
    assert {_canonical(re.split(r"[<>=!~\[; ]", d, maxsplit=1)[0]) for d in declared} <= program.keys()
    assert not {"pytest", "mypy", "ruff", "playwright", "hypothesis", "schemathesis", "opentelemetry-sdk",
                "psycopg"} & program.keys()  # no test tool, no optional extra
    made = clone / ".venv" / "made-by-demo"
    made.write_text("")

    tested = subprocess.run([sys.executable, "run.py", "test", "-n", "0", "-q", "tests/test_jsontext.py"], cwd=clone,
                            env=env, capture_output=True, text=True, timeout=900)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-4000:]
    assert "Adding the test tools to .venv/ from requirements.lock" in tested.stderr
    assert made.exists()  # the same venv, upgraded in place
    assert _frozen(python) == lock  # now exactly what the lock pins
    print(f"run.py demo installed {len(program)} packages, run.py test {len(lock)} (besides pip and the project)")
