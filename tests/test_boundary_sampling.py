"""Where a Step boundary (and a read of the configuration in effect) reads the filesystem: on the event loop when the
Location and the config directory are on local mounts (no thread hop, no wait for the interpreter lock), in a worker
thread on a mount that can hang (network, FUSE) and whenever that is not yet known."""

from __future__ import annotations

import sys
import threading

import pytest

from opencode_session.core import localfs
from opencode_session.core.config import ConfigSource
from opencode_session.core.execution import sampling
from opencode_session.core.location import resolve_location
from tests.support.scripted import text
from tests.test_runner import harness

pytestmark = pytest.mark.anyio

TABLE = r"""/dev/vda / ext4 rw,relatime 0 0
proc /proc proc rw 0 0
server:/export /mnt/share nfs4 rw,vers=4.2 0 0
me@host:/src /home/a\040b/src fuse.sshfs rw 0 0
tmpfs /tmp tmpfs rw 0 0
"""


def test_mount_table_decides_which_paths_are_local():
    table = localfs.parse_mounts(TABLE)
    assert ("/home/a b/src", "fuse.sshfs") in table  # an escaped space in a mount point is decoded
    assert localfs.all_local([localfs.Path("/tmp/x"), localfs.Path("/home/a b")], table)
    assert not localfs.all_local([localfs.Path("/mnt/share/repo/sub")], table)  # below a network mount
    assert not localfs.all_local([localfs.Path("/mnt/share")], table)
    assert localfs.all_local([localfs.Path("/mnt/shared")], table)  # a sibling name, not below the mount
    assert not localfs.all_local([localfs.Path("/home/a b/src/app")], table)
    assert not localfs.all_local([localfs.Path("/tmp")], [])  # no table (not Linux): never assumed local


@pytest.fixture
def sample_threads(monkeypatch):
    """The thread each boundary sample ran on, recorded where the sample resolves its Location."""
    threads: list[int] = []
    real = sampling.resolve_location

    def recording(*args, **kwargs):
        threads.append(threading.get_ident())
        return real(*args, **kwargs)

    monkeypatch.setattr(sampling, "resolve_location", recording)
    return threads


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="local mounts are read from Linux's mount table")
async def test_a_location_on_a_local_mount_is_sampled_on_the_loop_after_the_first_step(tmp_path, sample_threads):
    if not localfs.all_local([tmp_path.resolve()]):
        pytest.skip(f"the test's temp directory is not on a local mount here: {tmp_path}")
    async with harness(tmp_path, [[text("one")], [text("two")]]) as h:
        sid = await h.session()
        await h.admit(sid, "first")
        await h.wait(sid)
        await h.admit(sid, "second")
        await h.wait(sid)
    loop = threading.get_ident()
    assert len(sample_threads) == 2
    assert sample_threads[0] != loop  # not known yet: a thread samples and checks the mounts
    assert sample_threads[1] == loop


async def test_a_location_on_a_network_mount_is_always_sampled_in_a_thread(tmp_path, sample_threads, monkeypatch):
    mounts = tmp_path / "mounts"
    mounts.write_text("server:/export / nfs4 rw 0 0\n")  # everything under a network mount
    monkeypatch.setattr(localfs, "MOUNTS", mounts)
    async with harness(tmp_path, [[text("one")], [text("two")]]) as h:
        sid = await h.session()
        for prompt in ("first", "second"):
            await h.admit(sid, prompt)
            await h.wait(sid)
    assert len(sample_threads) == 2
    assert threading.get_ident() not in sample_threads


@pytest.fixture
def config_threads(monkeypatch):
    """The thread each `ConfigSource.at_sync` ran on."""
    threads: list[int] = []
    real = ConfigSource.at_sync

    def recording(self, location):
        threads.append(threading.get_ident())
        return real(self, location)

    monkeypatch.setattr(ConfigSource, "at_sync", recording)
    return threads


async def _read_config_twice(tmp_path) -> None:
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_DATA_HOME": str(tmp_path / "data")}
    project = tmp_path / "project"
    project.mkdir()
    (project / "opencode.json").write_text('{"model": "a/b"}')
    configs = ConfigSource(env)
    location = resolve_location(project)
    for _ in range(2):
        assert (await configs.at(location)).model == "a/b"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="local mounts are read from Linux's mount table")
async def test_the_configuration_is_read_on_the_loop_once_a_thread_found_its_files_local(tmp_path, config_threads):
    if not localfs.all_local([tmp_path.resolve()]):
        pytest.skip(f"the test's temp directory is not on a local mount here: {tmp_path}")
    await _read_config_twice(tmp_path)
    assert len(config_threads) == 2
    assert config_threads[0] != threading.get_ident()  # not known yet: a thread reads and checks the mounts
    assert config_threads[1] == threading.get_ident()


async def test_the_configuration_on_a_network_mount_is_always_read_in_a_thread(tmp_path, config_threads, monkeypatch):
    mounts = tmp_path / "mounts"
    mounts.write_text("server:/export / nfs4 rw 0 0\n")
    monkeypatch.setattr(localfs, "MOUNTS", mounts)
    await _read_config_twice(tmp_path)
    assert len(config_threads) == 2
    assert threading.get_ident() not in config_threads
