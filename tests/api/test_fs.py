"""Files as a front end reads them, over `ocs serve` and the Embedded host: read, list and fuzzy-find inside the
Location, with the tools' path resolution (`..`, symlinks), ignore files, limits and binary detection."""

from __future__ import annotations

import json
import os

import pytest

from opencode_session.client import ForbiddenError, InvalidRequestError
from opencode_session.core.fs import MAX_READ_BYTES
from tests.api.conftest import raw_http

pytestmark = pytest.mark.anyio


@pytest.fixture
async def tree(api, tmp_path):
    """A project in its own directory (its Location, given with each call), and something outside it."""
    root = tmp_path / "project"
    (root / "src" / "server").mkdir(parents=True)
    (root / "src" / "server" / "handlers.py").write_text("def handle(): ...\n")
    (root / "src" / "client.py").write_text("client\n")
    (root / "README.md").write_text("# readme\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (root / ".env").write_text("SECRET=1\n")
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "handlers_generated.py").write_text("generated\n")
    (root / "debug.log").write_text("log\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("outside\n")
    (root / "link-out").symlink_to(outside / "secret.txt")
    (root / "link-in").symlink_to(root / "README.md")
    return root, {"directory": str(root)}


async def test_read_returns_the_bytes_and_says_text_or_binary(api, tree):
    root, location = tree
    assert await api.fs.read("src/server/handlers.py", location=location) == b"def handle(): ...\n"
    assert await api.fs.read("link-in", location=location) == b"# readme\n"  # a symlink inside is followed
    assert await api.fs.read("src/../README.md", location=location) == b"# readme\n"
    async with raw_http(api) as http:
        text = await http.get("/api/fs/read/README.md", params={"location[directory]": str(root)})
        binary = await http.get("/api/fs/read/logo.png", params={"location[directory]": str(root)})
    assert text.headers["content-type"] == "application/octet-stream"
    assert text.headers["x-file-kind"] == "text" and binary.headers["x-file-kind"] == "binary"
    assert binary.content.startswith(b"\x89PNG") and text.headers["x-content-type-options"] == "nosniff"


async def test_read_refuses_what_lies_outside_or_is_not_a_readable_file(api, tree):
    root, location = tree
    for outside in ("../outside/secret.txt", "link-out", str(root.parent / "outside" / "secret.txt")):
        with pytest.raises(ForbiddenError):  # the Location authority: no rule allows leaving it
            await api.fs.read(outside, location=location)
    with pytest.raises(ForbiddenError):  # OpenCode's default rules deny reading environment files
        await api.fs.read(".env", location=location)
    for bad in ("missing.txt", "src", "nul\x00byte", ""):
        with pytest.raises(InvalidRequestError) as refused:
            await api.fs.read(bad, location=location)
        assert refused.value.field == "path", bad
    (root / "big.bin").write_bytes(b"\x00" * (MAX_READ_BYTES + 1))
    with pytest.raises(InvalidRequestError):
        await api.fs.read("big.bin", location=location)
    with pytest.raises(InvalidRequestError):
        await api.fs.read("README.md", location={"directory": str(root / "missing")})


async def test_an_allow_rule_opens_a_directory_outside(api, tree, tmp_path):
    root, location = tree
    rule = {"permission": {"external_directory": {f"{(tmp_path / 'outside').resolve()}/*": "allow"}}}
    (root / "opencode.json").write_text(json.dumps(rule))
    assert await api.fs.read("../outside/secret.txt", location=location) == b"outside\n"


async def test_list_shows_one_directory_without_ignored_entries(api, tree):
    root, location = tree
    top = (await api.fs.list(location=location)).data
    # `.env` is not named: the read rules deny it (issue 39)
    assert [(e.path, e.type) for e in top] == [
        ("src", "directory"), (".gitignore", "file"), ("README.md", "file"), ("logo.png", "file")]
    nested = (await api.fs.list(path="src", location=location)).data
    assert [(e.path, e.type) for e in nested] == [("src/server", "directory"), ("src/client.py", "file")]
    for bad in ("README.md", "missing"):
        with pytest.raises(InvalidRequestError):
            await api.fs.list(path=bad, location=location)
    with pytest.raises(ForbiddenError):
        await api.fs.list(path="..", location=location)


async def test_find_ranks_like_a_fuzzy_finder_and_honours_gitignore(api, tree):
    root, location = tree
    found = [e.path for e in (await api.fs.find(query="hndlr", location=location)).data]
    assert found == ["src/server/handlers.py"]  # build/handlers_generated.py is ignored
    assert [e.path for e in (await api.fs.find(query="readme", location=location)).data][0] == "README.md"
    dirs = (await api.fs.find(query="srv", type="directory", location=location)).data
    assert [(e.path, e.type) for e in dirs] == [("src/server", "directory")]
    assert (await api.fs.find(query="zzzq", location=location)).data == []
    assert len((await api.fs.find(query="", limit=2, location=location)).data) == 2
    (root / "src" / "handlers_new.py").write_text("new\n")  # the index sees a change to the tree
    assert "src/handlers_new.py" in [e.path for e in (await api.fs.find(query="hndlr", location=location)).data]
    for limit in (0, 201):
        with pytest.raises(InvalidRequestError):
            await api.fs.find(query="x", limit=limit, location=location)
    async with raw_http(api) as http:
        missing = await http.get("/api/fs/find")
        assert missing.status_code == 400 and missing.json()["_tag"] == "InvalidRequestError"


def test_the_finder_lists_again_only_what_changed(tmp_path):
    from opencode_session.core.fs.finder import Finder

    root = tmp_path / "tree"
    (root / "a" / "deep").mkdir(parents=True)
    (root / "a" / "deep" / "one.txt").write_text("1")
    (root / "b").mkdir()
    finder = Finder()
    env = dict(os.environ)

    def found(query: str) -> list[str]:
        return [e.path for e in finder.find(root, query, env)]

    assert found("one") == ["a/deep/one.txt"]
    index = finder._index(root, env)
    (root / "b" / "two.txt").write_text("2")  # a directory's entries changed: it alone is listed again
    (root / "b" / "new").mkdir()
    (root / "b" / "new" / "three.txt").write_text("3")  # a new directory: its subtree is walked
    assert found("two") == ["b/two.txt"] and found("three") == ["b/new/three.txt"]
    assert finder._index(root, env) is index
    (root / "a" / "deep" / "one.txt").unlink()
    (root / "a" / "deep").rmdir()
    assert found("one") == []
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("three.txt\n")  # a new ignore file: what is below it is seen afresh
    assert found("three") == []
    (root / ".gitignore").write_text("two.txt\n")  # edited in place
    assert found("three") == ["b/new/three.txt"] and found("two") == []
