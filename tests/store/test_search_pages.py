"""Pages of session search on SQLite and PostgreSQL, over sessions seeded as projection rows: title matches before
text matches, each newest first; pages by cursor forward, back and in ascending order across sessions with many
matching messages (the index is read a batch of documents at a time); other filters; renames, reverts and removals."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from opencode_session.core.store import Store
from opencode_session.core.store.keyset import Order, PageRequest
from opencode_session.core.store.rows import SessionFilter
from tests.store.backends import BACKENDS, BackendFactory

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

SESSIONS = 40
TITLED = (5, 16, 30)  # "heron" in the title (16 and 30 have it in their messages too)
MANY = 150  # messages with "heron" in each session n with n % 3 == 0: more than a batch of the index's documents


@pytest.fixture(params=BACKENDS, ids=lambda factory: factory.name)
def factory(request, tmp_path) -> Iterator[BackendFactory]:
    made: BackendFactory = request.param
    with contextlib.ExitStack() as stack:
        made.prepare(tmp_path, stack)
        yield made


def sid(n: int) -> str:
    return f"ses_{n:03d}"


def _seed(tx: Any) -> None:
    for n in range(SESSIONS):
        title = f"heron log {n}" if n in TITLED else f"plain log {n}"
        tx.sessions.insert({"id": sid(n), "projectID": "prj", "title": title,
                            "location": {"directory": "/even" if n % 2 == 0 else "/odd"},
                            "time": {"created": 1000 + n, "updated": 1000 + n}, "agent": "build"})
        texts = [f"a heron by the pond {m}" for m in range(MANY)] if n % 3 == 0 else \
            ["nothing here", "one heron flew over"] if n % 3 == 1 else ["no birds at all"]
        for seq, text in enumerate(texts):
            if seq % 2:
                message: dict[str, Any] = {
                    "id": f"msg_{n}_{seq}", "type": "assistant", "time": {"created": 2000 + seq, "completed": 1},
                    "agent": "build", "model": {"id": "m", "providerID": "p"},
                    "content": [{"type": "text", "id": "t", "text": text}]}
            else:
                message = {"id": f"msg_{n}_{seq}", "type": "user", "time": {"created": 2000 + seq}, "text": text}
            tx.messages.insert(sid(n), seq, message)


def _expected(where: Any = lambda n: True) -> list[str]:
    titled = [sid(n) for n in reversed(range(SESSIONS)) if n in TITLED and where(n)]
    talked = [sid(n) for n in reversed(range(SESSIONS)) if n % 3 != 2 and n not in TITLED and where(n)]
    return titled + talked


async def _all(store: Store, text: str, *, limit: int = 3, order: Order = "desc", **where: Any) -> list[str]:
    """Every session found, page after page by the last row's key."""
    found: list[str] = []
    anchor = None
    while True:
        request = PageRequest(order, limit, anchor)
        page = await store.read(lambda r, request=request: r.sessions.page(SessionFilter(search=text, **where),
                                                                          request))
        found += [s.id for s in page.items]
        if len(page.items) < limit:
            return found
        anchor = page.last


async def test_title_matches_come_first_then_text_matches_each_newest_first(factory: BackendFactory):
    async with Store(factory.backend()) as store:
        await store.write(_seed)
        expected = _expected()
        assert await _all(store, "heron") == expected
        assert await _all(store, "HERONS"[:-1]) == expected  # case does not matter
        assert await _all(store, "hero") == expected  # the last word is a prefix
        assert await _all(store, "heron", limit=7) == expected
        assert await _all(store, "heron", limit=100) == expected
        assert await _all(store, "heron", order="asc") == list(reversed(expected))
        # every word in one document: no title has "pond", so 30 is found by its messages' text
        assert await _all(store, "heron pond") == [sid(n) for n in reversed(range(SESSIONS)) if n % 3 == 0]
        assert await _all(store, "heron log") == [sid(n) for n in reversed(TITLED)]
        assert await _all(store, "heron nowhere") == []
        # the other filters apply too: only the odd sessions
        assert await _all(store, "heron", directory="/odd") == _expected(lambda n: n % 2 == 1)


async def test_pages_go_back_by_their_first_key(factory: BackendFactory):
    async with Store(factory.backend()) as store:
        await store.write(_seed)
        where = SessionFilter(search="heron")
        pages = []
        request = PageRequest("desc", 4)
        while True:
            page = await store.read(lambda r, request=request: r.sessions.page(where, request))
            if not page.items:
                break
            pages.append(page)
            request = PageRequest("desc", 4, page.last, "next")
        assert [s.id for p in pages for s in p.items] == _expected()
        # any key a cursor may carry pages without error: beyond every session of a tier, or before every one
        body = _expected()[3:7]
        for key, found in (((2, 2**63 - 1), _expected()[:4]), ((2, -(2**63)), body), ((1, 2**62), body),
                           ((1, -(2**63)), []), ((3, 0), _expected()[:4])):
            page = await store.read(lambda r, key=key: r.sessions.page(where, PageRequest("desc", 4, key)))
            assert [s.id for s in page.items] == found, key
        for before, after in zip(pages, pages[1:], strict=False):
            back = PageRequest("desc", 4, after.first, "previous")
            previous = await store.read(lambda r, back=back: r.sessions.page(where, back))
            assert [s.id for s in previous.items] == [s.id for s in before.items]
            assert (previous.first, previous.last) == (before.first, before.last)


async def test_renames_reverts_and_removals_are_found_no_more(factory: BackendFactory):
    async with Store(factory.backend()) as store:
        await store.write(_seed)

        def change(tx: Any) -> None:
            info = tx.sessions.load_data(sid(16))
            tx.sessions.save_data(sid(16), {**info, "title": "renamed log"})  # its messages still say heron
            info = tx.sessions.load_data(sid(5))
            tx.sessions.save_data(sid(5), {**info, "title": "quiet log"})  # nothing else of it says heron
            tx.messages.remove_from(sid(4), 1)  # reverted: its only heron message goes
            tx.messages.remove_from(sid(9), 100)  # reverted in part: 100 of its heron messages stay
            tx.lifecycle.remove(sid(12))

        await store.write(change)
        talked = [sid(n) for n in reversed(range(SESSIONS)) if n % 3 != 2 and n not in (30, 4, 12)]
        assert sid(16) in talked and sid(9) in talked
        assert await _all(store, "heron") == [sid(30), *talked]
        assert await _all(store, "renamed") == [sid(16)]
        assert await _all(store, "quiet") == [sid(5)]
