"""Item 6 of "Safe by default, round three", for files: `fs/find` on a location the caller chooses indexes at most a
bounded number of entries (`OCS_FIND_MAX_INDEXED`, 200,000 by default), answers within bounds however large the tree,
and says in the log that it searched only part of it (its answer's shape is the reference's, with no field for
that)."""

from __future__ import annotations

import time

import pytest
import requests

from opencode_session.core.fs.finder import MAX_INDEXED, Finder, max_indexed
from tests.security.conftest import TIMEOUT, peak_rss_mb, serve

CAP = 150  # below the API's largest `limit` (200), so an answer shows how much was indexed
FILES = 2000


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    root = tmp_path_factory.mktemp("find-cap")
    (root / "work").mkdir()
    big = root / "big"
    for d in range(FILES // 100):
        folder = big / f"dir{d:02}"
        folder.mkdir(parents=True)
        for n in range(100):
            (folder / f"file{d:02}_{n:03}.txt").write_text("x")
    return root


@pytest.fixture(scope="module")
def ocs(root):
    srv = serve(root, memory_mb=1536, OCS_FIND_MAX_INDEXED=str(CAP))
    yield srv
    assert srv.stop() == 0, "".join(srv.stderr_lines)


def _find(ocs, http: requests.Session, root, query: str, limit: int) -> list[dict]:
    answer = http.get(f"{ocs.url}/api/fs/find", params={"location[directory]": str(root / "big"),
                                                          "query": query, "limit": str(limit)}, timeout=TIMEOUT)
    assert answer.status_code == 200, answer.text
    return answer.json()["data"]


def test_a_tree_larger_than_the_cap_is_searched_only_up_to_it(ocs, http, root):
    started = time.monotonic()
    everything = _find(ocs, http, root, "", 200)
    assert time.monotonic() - started < TIMEOUT
    assert 0 < len(everything) <= CAP  # never more than the index may hold, of the 2,000 files and 20 folders
    assert ocs.wait_for_stderr("only the first 150 are searched", 10), "".join(ocs.stderr_lines)
    # a query still answers from what was indexed, and searching again does not grow the index
    assert all("file" in e["path"] or e["type"] == "directory" for e in _find(ocs, http, root, "file", 200))
    assert len(_find(ocs, http, root, "", 200)) == len(everything)
    assert peak_rss_mb(ocs.proc.pid) < 1024
    assert http.get(f"{ocs.url}/api/health", timeout=TIMEOUT).status_code == 200


def test_the_index_holds_at_most_the_cap(root):
    finder = Finder(max_indexed=CAP)
    found = finder.find(root / "big", "", {}, limit=10 * FILES)
    assert len(found) <= CAP
    index = finder._indexes[root / "big"]
    assert index.truncated and len(index.paths) <= CAP
    # without a cap this small the whole tree is there
    whole = Finder().find(root / "big", "", {}, limit=10 * FILES)
    assert len(whole) == FILES + FILES // 100


def test_the_cap_comes_from_the_environment_only_when_it_is_a_positive_number():
    assert max_indexed({}) == MAX_INDEXED
    assert max_indexed({"OCS_FIND_MAX_INDEXED": "500"}) == 500
    for bad in ("0", "-3", "lots", ""):
        assert max_indexed({"OCS_FIND_MAX_INDEXED": bad}) == MAX_INDEXED
