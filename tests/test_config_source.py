"""The runtime's one configuration source: a second read at a Location is served from its cache, and any change on
disk to a file it depends on (edited, replaced, added, removed, a `{file:...}` target) is seen by the next read."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from opencode_session.core.config import ConfigError, ConfigSource, global_config_dir
from opencode_session.core.location import Location, resolve_location
from tests.test_config import write


@pytest.fixture
def where(tmp_path: Path) -> Location:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "pkg").mkdir()
    return resolve_location(root / "pkg")


def test_a_second_read_is_the_cached_config_and_an_edit_is_seen(where: Location):
    source = ConfigSource(dict(os.environ))
    file = write(where.project_root / "opencode.json", {"model": "a/one"})
    first = source.at_sync(where)
    assert first.model == "a/one"
    assert source.at_sync(where) is first  # not parsed again: the same object

    write(file, {"model": "a/three"})  # an edit that changes the size
    assert source.at_sync(where).model == "a/three"

    stamp = file.stat().st_mtime_ns
    write(file, {"model": "a/four!"})  # same size: only the time tells
    os.utime(file, ns=(stamp + 10**9, stamp + 10**9))
    assert source.at_sync(where).model == "a/four!"


def test_a_replaced_file_is_seen_even_with_the_same_size_and_time(where: Location):
    source = ConfigSource(dict(os.environ))
    file = write(where.project_root / "opencode.json", {"model": "a/one"})
    assert source.at_sync(where).model == "a/one"
    info = file.stat()
    replacement = write(where.project_root / "next.json", {"model": "a/two"})
    os.utime(replacement, ns=(info.st_atime_ns, info.st_mtime_ns))
    os.replace(replacement, file)  # what an editor saving atomically does: a new inode
    assert source.at_sync(where).model == "a/two"


def test_added_and_removed_files_are_seen(where: Location):
    source = ConfigSource(dict(os.environ))
    assert source.at_sync(where).model is None
    nearer = write(where.directory / ".opencode" / "opencode.json", {"model": "a/near"})  # a directory that was not
    assert source.at_sync(where).model == "a/near"
    write(global_config_dir(os.environ) / "opencode.json", {"model": "a/global", "small_model": "a/small"})
    config = source.at_sync(where)
    assert (config.model, config.small_model) == ("a/near", "a/small")
    nearer.unlink()
    assert source.at_sync(where).model == "a/global"


def test_a_file_placeholder_target_is_watched(where: Location):
    source = ConfigSource(dict(os.environ))
    key = write(where.project_root / "model.txt", "a/first")
    write(where.project_root / "opencode.json", {"model": "{file:model.txt}"})
    assert source.at_sync(where).model == "a/first"
    write(key, "a/second")
    assert source.at_sync(where).model == "a/second"


def test_a_changed_project_file_keeps_its_authority_until_a_restart(where: Location):
    # what the runtime first read is what the user wrote; a later change may be the model's (item 1 of issue 39)
    source = ConfigSource(dict(os.environ))
    file = write(where.project_root / "opencode.json", {"model": "a/one", "permission": {"bash": "ask"}})
    assert source.at_sync(where).permission == {"bash": "ask"}
    write(file, {"model": "a/two", "permission": {"bash": "allow"}, "mcp": {"x": {"type": "local", "command": ["id"]}},
                 "agent": {"build": {"prompt": "{file:/etc/hostname}"}}})
    config = source.at_sync(where)
    assert config.model == "a/two"  # content applies at once
    assert config.permission == {"bash": "ask"} and not config.mcp and not config.agent
    # a file that was not there when first read brings no authority with it either
    nested = write(where.directory / "opencode.json", {"permission": "allow", "model": "a/three"})
    config = source.at_sync(where)
    assert config.model == "a/three" and config.permission == {"bash": "ask"}
    # a new runtime (a restart) reads them as they are
    restarted = ConfigSource(dict(os.environ))
    assert restarted.at_sync(where).permission == "allow" and restarted.at_sync(where).mcp
    nested.unlink()


def test_a_broken_file_raises_on_every_read_until_mended(where: Location):
    source = ConfigSource(dict(os.environ))
    file = write(where.project_root / "opencode.json", {"model": "a/one"})
    assert source.at_sync(where).model == "a/one"
    write(file, '{"model": ')
    for _ in range(2):
        with pytest.raises(ConfigError) as bad:
            source.at_sync(where)
        assert bad.value.path == file
    write(file, {"model": "a/mended"})
    assert source.at_sync(where).model == "a/mended"


def test_locations_are_cached_apart_and_the_environment_counts(where: Location):
    write(where.project_root / "opencode.json", {"model": "a/root"})
    write(where.directory / "opencode.json", {"model": "a/pkg"})
    source = ConfigSource(dict(os.environ))
    root = resolve_location(where.project_root)
    assert (source.at_sync(where).model, source.at_sync(root).model) == ("a/pkg", "a/root")
    without_project = ConfigSource({**os.environ, "OPENCODE_DISABLE_PROJECT_CONFIG": "1"})
    assert without_project.at_sync(where).model is None


@pytest.mark.anyio
async def test_at_reads_off_the_event_loop_with_the_same_cache(where: Location):
    source = ConfigSource(dict(os.environ))
    write(where.project_root / "opencode.json", {"model": "a/one"})
    first = await source.at(where)
    assert first.model == "a/one"
    assert source.at_sync(where) is first
    assert await source.at(where) is first
