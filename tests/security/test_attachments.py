"""Item 3 of "Safe by default": prompt attachments are files the session may read, read safely. A `files[].uri`
resolves in the Session's Location under the tools' authority, must be a regular file within the size bound, and is
read off the event loop; what can be known when the prompt arrives is a 400 then, and every read re-checks."""

from __future__ import annotations

import json
import os

import anyio
import pytest

from opencode_session.client import InvalidRequestError
from tests.security.conftest import TIMEOUT, write_provider_config
from tests.support import fake_openai as fake

pytestmark = pytest.mark.anyio

ATTACHMENT_LIMIT = 5 * 1024 * 1024


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("attachments")
    (root / "work").mkdir()
    (root / "work" / "only-in-cwd.txt").write_text("the server's working directory")
    project = root / "project"
    project.mkdir()
    (project / "notes.txt").write_text("notes inside the location")
    (project / "big.txt").write_bytes(b"x" * (ATTACHMENT_LIMIT + 1))
    os.mkfifo(project / "pipe")
    (root / "outside.txt").write_text("outside the location")
    return root


async def _session(client, root) -> str:
    return (await client.session.create(location={"directory": str(root / "project")})).id


async def _refused(client, sid: str, uri: str) -> InvalidRequestError:
    with pytest.raises(InvalidRequestError) as refused:
        await client.session.prompt(sid, prompt={"text": "look", "files": [{"uri": uri}]})
    assert refused.value.values.get("field") == "prompt.files.0.uri"
    return refused.value


async def _nothing_admitted(client, sid: str) -> None:
    log = [e.type async for e in client.session.log(sid, follow=False)]
    assert "session.input.admitted" not in log, log


@pytest.mark.parametrize("uri", ["file:///etc/hostname", "/etc/passwd", "../outside.txt", "file:///dev/zero",
                                 "/dev/zero", "only-in-cwd.txt", "file://otherhost/etc/passwd"])
async def test_attachments_outside_the_location_are_refused_at_admission(client, root, uri):
    sid = await _session(client, root)
    await _refused(client, sid, uri)
    await _nothing_admitted(client, sid)


@pytest.mark.parametrize(("uri", "reason"), [("pipe", "regular file"), (".", "regular file"),
                                             ("big.txt", str(ATTACHMENT_LIMIT)), ("missing.txt", "No such file")])
async def test_only_regular_files_within_the_bound_are_admitted(client, root, uri, reason):
    sid = await _session(client, root)
    error = await _refused(client, sid, uri)
    assert reason in error.message
    await _nothing_admitted(client, sid)


async def test_devices_stay_refused_even_where_reading_outside_is_allowed(client, root, provider):
    write_provider_config(root, provider, permission={"external_directory": {"/dev/*": "allow"}})
    sid = await _session(client, root)
    assert "regular file" in (await _refused(client, sid, "file:///dev/zero")).message


async def test_a_readable_attachment_reaches_the_provider(client, root, provider):
    provider.enqueue(fake.completion(fake.text_deltas("ok")))
    sid = await _session(client, root)
    await client.session.prompt(sid, prompt={"text": "look", "files": [{"uri": "notes.txt"}]})
    with anyio.fail_after(TIMEOUT):
        await client.session.wait(sid)
    assert "notes inside the location" in json.dumps(provider.requests[0].json["messages"])


async def test_an_attachment_that_turned_into_a_fifo_is_rechecked_when_read(client, root, provider, ocs):
    target = root / "project" / "later.txt"
    target.write_text("fine at admission")
    sid = await _session(client, root)
    await client.session.prompt(sid, prompt={"text": "look", "files": [{"uri": "later.txt"}]}, resume=False)
    target.unlink()
    os.mkfifo(target)  # reading it the old way would block the whole server
    provider.enqueue(fake.completion(fake.text_deltas("ok")))
    await client.session.prompt(sid, prompt={"text": "go on"})
    with anyio.fail_after(TIMEOUT):
        await client.session.wait(sid)
    sent = json.dumps(provider.requests[0].json["messages"])
    assert "later.txt could not be read" in sent and "regular file" in sent
    # Reading a FIFO the old way hung the event loop, so that nothing, SIGTERM included, was answered.
    with anyio.fail_after(TIMEOUT):
        assert (await client.health.get()).healthy


async def test_an_attachment_replaced_by_a_link_outside_is_rechecked_when_read(client, root, provider):
    target = root / "project" / "moved.txt"
    target.write_text("fine at admission")
    sid = await _session(client, root)
    await client.session.prompt(sid, prompt={"text": "look", "files": [{"uri": "moved.txt"}]}, resume=False)
    target.unlink()
    target.symlink_to(root / "outside.txt")
    provider.enqueue(fake.completion(fake.text_deltas("ok")))
    await client.session.prompt(sid, prompt={"text": "go on"})
    with anyio.fail_after(TIMEOUT):
        await client.session.wait(sid)
    sent = json.dumps(provider.requests[0].json["messages"])
    assert "outside the location" not in sent and "external_directory" in sent
