"""Several real `ocs serve` hosts on one PostgreSQL schema, with the loopback tool model (`tool_model.py`): what the
cluster tests start, read and stop. A host may reach the database through a `TcpProxy` (to cut it off)."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import psycopg

from opencode_session.client import OpenCodeClient
from tests.support.server import ServerProcess, isolated_env, start_server
from tests.support.tcp_proxy import TcpProxy
from tests.support.tool_model import ToolModel, config


def through(url: str, proxy: TcpProxy) -> str:
    """The database URL with the proxy's loopback port in place of the server's."""
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    return urlunsplit(parts._replace(netloc=f"{user}127.0.0.1:{proxy.port}"))


def target(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


class Cluster:
    def __init__(self, root: Path, url: str, model: ToolModel, ttl_ms: int, **env: str) -> None:
        self.root, self.url, self.model, self.ttl_ms = root, url, model, ttl_ms
        self.env = isolated_env(root, OCS_LEASE_TTL_MS=str(ttl_ms), OCS_RETRY_BASE_DELAY_MS="50", **env)
        self.configure()
        self.work = root / "work"
        self.work.mkdir(exist_ok=True)
        self.hosts: list[ServerProcess] = []
        self.proxies: list[TcpProxy] = []

    def configure(self, bash: str = "allow") -> None:
        """The hosts' global config: the tool model, with `bash` allowed (or asked: "ask")."""
        (self.root / "config" / "opencode").mkdir(parents=True, exist_ok=True)
        (self.root / "config" / "opencode" / "opencode.json").write_text(json.dumps(config(self.model.base_url, bash)))

    def start(self, proxy: TcpProxy | None = None, args: tuple[str, ...] = ()) -> ServerProcess:
        """One more host (reaching the database through `proxy`, when given; `args` to its `ocs serve`)."""
        host = start_server(self.root, env=self.env, db=through(self.url, proxy) if proxy else self.url,
                            workdir=self.work, args=args)
        self.hosts.append(host)
        return host

    def proxy(self) -> TcpProxy:
        made = TcpProxy(*target(self.url)).start()
        self.proxies.append(made)
        return made

    def runs(self) -> collections.Counter[str]:
        """How often each marker's tool really ran to its end."""
        log = self.work / "runs.log"
        return collections.Counter(log.read_text().split()) if log.exists() else collections.Counter()

    def started(self) -> int:
        """How many tool calls have started (with the model's `tool_hold`)."""
        log = self.work / "started.log"
        return len(log.read_text().split()) if log.exists() else 0

    def leases(self, sids: list[str]) -> list[tuple[str, str | None, int, int]]:
        """The sessions' lease rows as stored (session, owner, epoch, expires), whether live, expired or released."""
        with psycopg.connect(self.url, autocommit=True) as conn:
            return conn.execute("SELECT session_id, owner, epoch, expires FROM session_lease"
                                " WHERE session_id = ANY(%s)", (sids,)).fetchall()

    def stop(self) -> None:
        for proxy in self.proxies:
            proxy.heal()
        for host in self.hosts:
            if host.proc.poll() is None:
                host.proc.send_signal(signal.SIGCONT)  # a paused one first wakes up, then stops
            try:
                host.stop(timeout=15)
            except subprocess.TimeoutExpired:
                host.stop(signal.SIGKILL)  # never leave a host behind, whatever the test did to it
        for proxy in self.proxies:
            proxy.stop()


async def durable_log(client: OpenCodeClient, sid: str) -> list[tuple[int, str, str]]:
    """(seq, id, type) of every durable event of the session, as the host serves it."""
    return [(e.durable.seq, e.id, e.type) async for e in client.session.log(sid, follow=False)
            if e.type != "log.synced"]
