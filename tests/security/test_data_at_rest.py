"""Item 5 of "Safe by default": the database (prompts, file contents, tool output) is private to its owner, and a
provider's error text never carries the configured credentials into the durable, streamed event log."""

from __future__ import annotations

import json
import stat

import pytest

from opencode_session.client import OpenCodeClient
from tests.security.conftest import run_prompt, serve, write_provider_config
from tests.support import fake_openai as fake
from tests.support.server import isolated_env, start_server

pytestmark = pytest.mark.anyio

API_KEY = "sk-test-4f9b2c7d1e8a6b3c"
HEADER_TOKEN = "hdr-token-9a8b7c6d5e4f"


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _database_files(db) -> list:
    return [p for p in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")) if p.exists()]


async def _write_something(url: str) -> None:
    async with OpenCodeClient(url) as client:
        sid = (await client.session.create()).id
        await client.session.context_entry_put(sid, "k", value="a secret prompt")


async def test_the_default_data_directory_and_database_are_private(tmp_path):
    srv = start_server(tmp_path, env=isolated_env(tmp_path), default_paths=True)
    try:
        await _write_something(srv.url)
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    data_dir = tmp_path / "data" / "opencode-session"
    assert _mode(data_dir) == 0o700
    files = _database_files(data_dir / "sessions.db")
    assert len(files) >= 1 and all(_mode(f) == 0o600 for f in files), {f.name: oct(_mode(f)) for f in files}


async def test_existing_readable_files_are_narrowed(tmp_path):
    data_dir = tmp_path / "data" / "opencode-session"
    data_dir.mkdir(parents=True, mode=0o755)
    data_dir.chmod(0o755)  # as an earlier version left it
    srv = start_server(tmp_path, env=isolated_env(tmp_path), default_paths=True)
    try:
        await _write_something(srv.url)
    finally:
        assert srv.stop() == 0
    for f in _database_files(data_dir / "sessions.db"):
        f.chmod(0o644)
    data_dir.chmod(0o755)
    srv = start_server(tmp_path, env=isolated_env(tmp_path), default_paths=True)
    try:
        await _write_something(srv.url)
        assert _mode(data_dir) == 0o700
        files = _database_files(data_dir / "sessions.db")
        assert all(_mode(f) == 0o600 for f in files), {f.name: oct(_mode(f)) for f in files}
    finally:
        assert srv.stop() == 0


async def test_a_database_in_a_new_directory_is_created_private(tmp_path):
    db = tmp_path / "fresh" / "nested" / "my.db"
    srv = start_server(tmp_path, env=isolated_env(tmp_path), db=db, args=["--mkdir"])  # asked to make them
    try:
        await _write_something(srv.url)
    finally:
        assert srv.stop() == 0
    assert _mode(db.parent) == 0o700 and _mode(db.parent.parent) == 0o700
    assert all(_mode(f) == 0o600 for f in _database_files(db))


async def test_provider_errors_do_not_carry_credentials_into_events(tmp_path, provider):
    srv = serve(tmp_path, OTHER_API_KEY="sk-other-0123456789")
    write_provider_config(tmp_path, provider)  # then given our key and a credential header
    config_path = tmp_path / "config" / "opencode" / "opencode.json"
    config = json.loads(config_path.read_text())
    config["provider"]["loop"]["options"].update(apiKey=API_KEY, headers={"X-Api-Token": HEADER_TOKEN})
    config_path.write_text(json.dumps(config))
    echo = (f"Incorrect API key provided: {API_KEY}. You sent 'Authorization: Bearer {API_KEY}', "
            f"X-Api-Token {HEADER_TOKEN}, Bearer eyJhbGciOi.J9.sig and sk-other-0123456789")
    try:
        async with OpenCodeClient(srv.url) as client:
            _, log = await run_prompt(client, provider, fake.error(401, echo, type="invalid_request_error",
                                                                   code="invalid_api_key"))
        stream = json.dumps([e.wire() for e in log])
        assert "session.execution.failed" in stream and "[REDACTED]" in stream
        for secret in (API_KEY, HEADER_TOKEN, "eyJhbGciOi", "sk-other-0123456789"):
            assert secret not in stream
        assert "Incorrect API key provided" in stream  # the rest of the message is kept
        raw = srv.db.read_bytes() + srv.db.with_name(srv.db.name + "-wal").read_bytes()
        assert API_KEY.encode() not in raw and HEADER_TOKEN.encode() not in raw
    finally:
        assert srv.stop() == 0, "".join(srv.stderr_lines)
    assert not any(API_KEY in line for line in srv.stderr_lines)
