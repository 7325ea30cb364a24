"""Starting a real `ocs serve` process on loopback for tests, and stopping it with a signal."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

OCS = str(Path(sys.executable).parent / "ocs")


@dataclass
class ServerProcess:
    proc: subprocess.Popen
    url: str
    db: Path | str
    stderr_lines: list[str]
    pumps: list[threading.Thread]
    stderr_changed: threading.Condition

    def wait_for_stderr(self, text: str, timeout: float) -> bool:
        """Wait until a line of the server's stderr contains `text`; False if none did within `timeout`."""
        with self.stderr_changed:
            return self.stderr_changed.wait_for(lambda: any(text in line for line in self.stderr_lines), timeout)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 20) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        code = self.proc.wait(timeout=timeout)
        for pump in self.pumps:
            pump.join(timeout)  # they end at EOF once the process is gone
        for pipe in (self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()
        return code


def isolated_env(root: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENCODE_", "OPENAI_", "ANTHROPIC_", "OTEL_"))
           and k not in ("OCS_RESUME_BUDGET", "OCS_LEASE_TTL_MS")}
    for name in ("home", "config", "data"):
        (root / name).mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(root / "home"), XDG_CONFIG_HOME=str(root / "config"), XDG_DATA_HOME=str(root / "data"))
    env.update(extra)
    return env


def configured_home(root: Path, provider: Any, **env_extra: str) -> dict[str, str]:
    """An isolated environment under `root` whose global opencode.json selects `loop/fake-model` served by `provider`
    (a FakeOpenAI); returns the environment."""
    env = isolated_env(root, **env_extra)
    (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
    (root / "config" / "opencode" / "opencode.json").write_text(json.dumps({
        "model": "loop/fake-model",
        "provider": {"loop": {"npm": "@ai-sdk/openai-compatible",
                              "options": {"baseURL": provider.base_url, "apiKey": "k"},
                              "models": {"fake-model": {}}}},
    }))
    return env


def start_configured(root: Path, config: dict[str, Any], **env_extra: str) -> tuple[ServerProcess, Path]:
    """`ocs serve` with `config` as its global opencode.json in an isolated environment; returns it and its
    working directory (root/work, created empty)."""
    env = isolated_env(root, **env_extra)
    (root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
    (root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config))
    work = root / "work"
    work.mkdir(parents=True, exist_ok=True)
    return start_server(root, env=env, workdir=work), work


def start_server(root: Path, *, env: dict[str, str] | None = None, db: Path | str | None = None,
                 workdir: Path | None = None, timeout: float = 30, default_paths: bool = False,
                 args: Sequence[str] = (), preexec_fn: Callable[[], None] | None = None,
                 program: Sequence[str] = (OCS, "serve")) -> ServerProcess:
    """Run `ocs serve --port 0 [args]` (or another `program` that takes the same options and prints the same line)
    and wait (on its output, not a timer) for the printed URL. With `default_paths` the server picks its own database
    and uses its working directory as the default Location; `preexec_fn` runs in the child before it starts
    (resource limits)."""
    env = env or isolated_env(root)
    db = db or root / "db.sqlite"
    workdir = workdir or root / "work"
    workdir.mkdir(parents=True, exist_ok=True)
    paths = [] if default_paths else ["--db", str(db), "--directory", str(workdir)]
    proc = subprocess.Popen([*program, "--port", "0", *paths, *args], cwd=workdir, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=preexec_fn)
    lines: queue.Queue[str | None] = queue.Queue()
    stderr_lines: list[str] = []
    stderr_changed = threading.Condition()

    def pump_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)

    def pump_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            with stderr_changed:
                stderr_lines.append(line)
                stderr_changed.notify_all()

    pumps = [threading.Thread(target=pump_out, daemon=True), threading.Thread(target=pump_err, daemon=True)]
    for pump in pumps:
        pump.start()
    while True:
        try:
            line = lines.get(timeout=timeout)
        except queue.Empty:
            proc.kill()
            raise RuntimeError("ocs serve printed no URL in time:\n" + "".join(stderr_lines)) from None
        if line is None:
            raise RuntimeError("ocs serve exited:\n" + "".join(stderr_lines))
        if "listening on " in line:
            return ServerProcess(proc, line.rsplit(" ", 1)[-1].strip(), db, stderr_lines, pumps, stderr_changed)
