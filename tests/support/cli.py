"""Driving `ocs` as a user does: a subprocess with its output piped, or a pseudo-terminal (pexpect), in an isolated
home whose opencode.json points at the loopback provider; and reading the database it leaves behind."""

from __future__ import annotations

import io
import json
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pexpect

from opencode_session.sdk import OpenCode
from tests.support import fake_openai as fake
from tests.support.server import OCS, isolated_env

TIMEOUT = 60  # seconds for one command; the machine may be busy


@dataclass
class Home:
    """A user's world: an isolated environment, a project directory to work in, and the default database."""

    root: Path
    env: dict[str, str]
    work: Path

    @property
    def db(self) -> Path:
        return self.root / "data" / "opencode-session" / "sessions.db"

    def configure(self, loop: fake.FakeOpenAI | None, **extra: Any) -> None:
        """The global opencode.json: the `loop` provider as the default model (if given), plus `extra` keys."""
        config: dict[str, Any] = dict(extra)
        if loop is not None:
            config = {"model": "loop/fake-model",
                      "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                                            "options": {"baseURL": loop.base_url, "apiKey": "test-key"},
                                            "models": {"fake-model": {}, "other-model": {}}}},
                      **extra}
        folder = self.root / "config" / "opencode"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "opencode.json").write_text(json.dumps(config))

    def run(self, *args: str, stdin: str | None = None, timeout: float = TIMEOUT,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """`ocs ARGS` with stdout and stderr piped (so not a terminal)."""
        return subprocess.run([OCS, *args], cwd=cwd or self.work, env=self.env, input=stdin if stdin is not None
                              else "", capture_output=True, text=True, timeout=timeout)

    def spawn(self, *args: str, cwd: Path | None = None, timeout: float = TIMEOUT) -> pexpect.spawn:
        """`ocs ARGS` on a pseudo-terminal of 100x40; `child.logfile_read.getvalue()` is everything it showed."""
        child = pexpect.spawn(OCS, list(args), cwd=str(cwd or self.work), env=self.env, encoding="utf-8",
                              timeout=timeout, dimensions=(40, 100))
        child.logfile_read = io.StringIO()
        return child


def make_home(root: Path, **extra_env: str) -> Home:
    env = isolated_env(root, **extra_env)
    env.pop("NO_COLOR", None)
    env["TERM"] = "xterm-256color"
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    (work / "notes.txt").write_text("alpha\nbeta\n")
    return Home(root, env, work)


def configure_ignored_keys(home: Home, loop_provider: fake.FakeOpenAI) -> tuple[Path, Path]:
    """A global and a project opencode.json that set OpenCode keys this runtime does not act on (some in both)."""
    home.configure(loop_provider, watcher={"ignore": ["dist"]}, plugin=["a-plugin"], lsp=False)
    project = home.work / "opencode.json"
    project.write_text(json.dumps({"watcher": {"ignore": ["build"]},
                                   "formatter": {"x": {"command": ["fmt"]}}, "theme": "dark", "$schema": "x",
                                   "websearch": {"url": "http://127.0.0.1:9/search"}}))
    return home.root / "config" / "opencode" / "opencode.json", project


def assert_ignored_keys_named_once(stderr: str, global_file: Path, project: Path) -> None:
    """`ocs serve` and `ocs run` name each key `configure_ignored_keys` set that this runtime ignores, once, with
    the file that set it first."""
    notes = [line for line in stderr.splitlines() if line.startswith("note: ")]
    named = sorted(line.split("'")[1] for line in notes)
    assert named == ["formatter", "lsp", "theme", "watcher"], stderr
    assert any(line.startswith(f"note: {global_file}:1: key 'watcher'") and "not acted on" in line for line in notes)
    assert any(line.startswith(f"note: {project}:1: key 'formatter'") for line in notes), notes
    assert "websearch" not in stderr and "$schema" not in stderr  # acted on, or nothing to act on


async def session_state(db: Path, session_id: str | None = None) -> tuple[list[Any], list[Any], list[Any]]:
    """(sessions newest first, durable events, messages) of one session (default: the newest) in a database a
    finished `ocs` left behind."""
    async with OpenCode(db=db, env={}) as oc:
        sessions = (await oc.session.list()).items
        sid = session_id or sessions[0].id
        events = [e async for e in oc.session.log(sid, follow=False) if e.type != "log.synced"]
        messages = (await oc.session.messages(sid, order="asc")).items
    return sessions, events, messages


def types(events: Sequence[Any]) -> list[str]:
    return [e.type for e in events]
