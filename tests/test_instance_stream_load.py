"""The instance-wide stream keeps readers that keep reading: under load (50 sessions x 4 queued prompts on a
loopback model, 20 readers of /api/event and 180 of per-session streams, against a real `ocs serve`), every reader
receives every durable event of every session, in order; a reader that stops reading is cut off, visibly, while the
others carry on."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import anyio
import pytest

from tests.support import fake_openai as fake
from tests.support.config import write_global_config
from tests.support.load import load_config, run_load
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.anyio

STALL = 5.0  # seconds the server waits on a reader that accepts nothing before cutting it off


def _stalled_reader(url: str) -> socket.socket:
    """A subscriber that sends its request and never reads: a tiny receive buffer fills at once."""
    parts = urlsplit(url)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((parts.hostname, parts.port))
    sock.sendall(f"GET /api/event HTTP/1.1\r\nHost: {parts.netloc}\r\nAccept: text/event-stream\r\n\r\n".encode())
    return sock


def _read_to_end(sock: socket.socket) -> bytes:
    sock.settimeout(30)
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


@pytest.mark.slow
@pytest.mark.timeout(300)
async def test_every_reader_that_keeps_reading_gets_every_durable_event_in_order(tmp_path):
    provider = fake.FakeOpenAI()
    provider.fallback = fake.completion(fake.text_deltas("Sure", ", here ", "it is."))
    async with provider:
        env = isolated_env(tmp_path)
        write_global_config(env["XDG_CONFIG_HOME"], load_config(provider.base_url))
        server = start_server(tmp_path, env=env, args=("--stall-timeout", str(STALL)))
        try:
            stalled = _stalled_reader(server.url)
            # 32 KB prompts: well more than the stalled socket's buffers hold (the kernel grows a loopback send buffer
            # to megabytes), so its writes block while everyone else keeps reading
            result = await run_load(server.url, prompt_chars=32_000)
            assert result.missing() == [], result.missing()[:5]
            assert not any(s.stopped for s in result.subscribers)
            assert len(provider.requests) == 200
            # the reader that stopped reading was cut off: its connection ends without the body's last chunk
            assert await anyio.to_thread.run_sync(server.wait_for_stderr, "cut off an event stream", 60)
            received = await anyio.to_thread.run_sync(_read_to_end, stalled)
            stalled.close()
            assert b'"server.connected"' in received and not received.endswith(b"0\r\n\r\n")
        finally:
            code = server.stop()
        assert code == 0, "".join(server.stderr_lines)
        assert not any("without completing response" in line for line in server.stderr_lines)
