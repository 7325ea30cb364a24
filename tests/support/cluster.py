"""Several real `ocs serve` hosts on one PostgreSQL schema, with the loopback tool model (`tool_model.py`): what the
cluster tests start, read and stop. A host may reach the database through a `TcpProxy` (to cut it off)."""

from __future__ import annotations

import collections
import json
import signal
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import psycopg

from opencode_session.client import OpenCodeClient
from tests.support.postgres import activity
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

    async def diagnosis(self, observer: OpenCodeClient, sids: list[str]) -> str:
        """What a failure message says of sessions that did not do what they should: the end of each one's log,
        their leases as stored, what each host said last, and what every connection to the database is doing."""
        told = []
        for sid in sids:
            events = story([e async for e in observer.session.log(sid, follow=False)])
            told.append(f"{sid}:\n  " + "\n  ".join(events[-12:]))
        leases = await anyio.to_thread.run_sync(self.leases, sids)
        said = "\n".join(f"{host.url} (pid {host.proc.pid}):\n  " + "  ".join(host.stderr_lines[-12:])
                         for host in self.hosts)
        database = "\n".join(await anyio.to_thread.run_sync(activity))
        return (f"\n{chr(10).join(told)}\ntheir leases as stored (now {time.time() * 1000:.0f}): {leases}\n"
                f"the hosts said:\n{said}\nthe database's connections:\n{database}")

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


def story(events: list[Any]) -> list[str]:
    """A log as a failure message tells it: each event's position, type, and its error or call where it has one."""
    told = []
    for event in events:
        if event.type == "log.synced":
            continue
        data = event.data
        detail = getattr(data, "error", None) or getattr(data, "callID", None) or ""
        told.append(f"{event.durable.seq} {event.type} {detail}".rstrip())
    return told
