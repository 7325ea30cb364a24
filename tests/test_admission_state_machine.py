"""A hypothesis state machine over create/admit/promote/retry/conflict on a real SQLite store.

Invariants: every session's seq is gap-free from 0, every admitted prompt is pending or promoted exactly once,
an exact retry returns the original admission, a conflict appends nothing, and replay rebuilds the same projections.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from opencode_session.core.location import resolve_location
from opencode_session.core.session import Sessions
from opencode_session.core.session.projector import project
from opencode_session.core.store import Store
from opencode_session.schema import events as ev
from opencode_session.schema.errors import ConflictError
from opencode_session.schema.prompt import PromptInput
from tests.support.core import projected_state

TEXTS = st.sampled_from(["a", "b", "hello", "ünïcode", ""])
DELIVERY = st.sampled_from(["steer", "queue"])


class AdmissionMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.dir = Path(tempfile.mkdtemp(prefix="ocs-sm-"))
        (self.dir / "work").mkdir()
        self.store = Store(self.dir / "db.sqlite", project=project)
        self.run(self.store.open())
        self.sessions = Sessions(self.store, resolve_location(self.dir / "work"))
        self.admitted: dict[str, dict] = {}  # input id -> {session, text, delivery, admission}
        self.pending: dict[str, list[str]] = {}  # session -> pending ids in admission order
        self.promoted: dict[str, list[str]] = {}  # session -> promoted ids in promotion order
        self.counter = 0

    def run(self, coro):
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            before = self.run(projected_state(self.sessions))
            self.run(self.store.rebuild_projections())
            assert self.run(projected_state(self.sessions)) == before, "replay diverged from the live projections"
        finally:
            self.run(self.store.close())
            self.loop.close()
            shutil.rmtree(self.dir, ignore_errors=True)

    @initialize()
    def first_session(self) -> None:
        self.create_session()

    @precondition(lambda self: len(self.pending) < 3)
    @rule()
    def create_session(self) -> None:
        sid = self.run(self.sessions.create()).id
        self.pending[sid], self.promoted[sid] = [], []

    @rule(data=st.data(), text=TEXTS, delivery=DELIVERY)
    def admit_new(self, data, text, delivery) -> None:
        sid = data.draw(st.sampled_from(sorted(self.pending)))
        self.counter += 1
        mid = f"msg_sm{self.counter:06d}"
        admission = self.run(self.sessions.admit(sid, PromptInput(text=text), id=mid, delivery=delivery, resume=False))
        assert admission.promotedSeq is None and admission.id == mid
        self.admitted[mid] = {"session": sid, "text": text, "delivery": delivery, "admission": admission}
        self.pending[sid].append(mid)

    @precondition(lambda self: self.admitted)
    @rule(data=st.data())
    def exact_retry(self, data) -> None:
        mid = data.draw(st.sampled_from(sorted(self.admitted)))
        a = self.admitted[mid]
        again = self.run(self.sessions.admit(a["session"], PromptInput(text=a["text"]), id=mid,
                                             delivery=a["delivery"], resume=False))
        first = a["admission"]
        assert (again.admittedSeq, again.prompt, again.delivery, again.sessionID) == (
            first.admittedSeq, first.prompt, first.delivery, first.sessionID)
        if mid in self.promoted[a["session"]]:
            assert again.promotedSeq is not None and again.promotedSeq > again.admittedSeq
        else:
            assert again.promotedSeq is None

    @precondition(lambda self: self.admitted)
    @rule(data=st.data(), change=st.sampled_from(["text", "delivery", "session"]))
    def conflicting_reuse(self, data, change) -> None:
        mid = data.draw(st.sampled_from(sorted(self.admitted)))
        a = self.admitted[mid]
        sid, text, delivery = a["session"], a["text"], a["delivery"]
        if change == "text":
            text = text + "!"
        elif change == "delivery":
            delivery = "queue" if delivery == "steer" else "steer"
        else:
            others = [s for s in self.pending if s != sid]
            if not others:
                return
            sid = others[0]
        before = self.latest_seqs()
        try:
            self.run(self.sessions.admit(sid, PromptInput(text=text), id=mid, delivery=delivery, resume=False))
        except ConflictError:
            pass
        else:
            raise AssertionError("conflicting reuse of a prompt ID was accepted")
        assert self.latest_seqs() == before, "a rejected conflict appended an event"

    @rule(data=st.data(), scope=st.sampled_from(["steer", "input"]))
    def promote(self, data, scope) -> None:
        sid = data.draw(st.sampled_from(sorted(self.pending)))
        pending = self.pending[sid]
        steers = [m for m in pending if self.admitted[m]["delivery"] == "steer"]
        queued = [m for m in pending if self.admitted[m]["delivery"] == "queue"]
        expected = steers if steers or scope == "steer" else queued[:1]
        got = self.run(self.sessions.promote(sid, scope))
        assert got == expected
        for mid in got:
            pending.remove(mid)
            self.promoted[sid].append(mid)

    def latest_seqs(self) -> dict[str, int]:
        return {sid: self.run(self.store.latest_seq(sid)) for sid in self.pending}

    @invariant()
    def log_and_projections_agree(self) -> None:
        for sid in self.pending:
            log = self.run(self.store.events_after(sid, -1, limit=10_000))
            seqs = [record.seq for record in log]
            assert seqs == list(range(len(seqs))), f"gap in {sid}: {seqs}"
            pending = [p.id for p in self.run(self.sessions.pending(sid))]
            assert pending == self.pending[sid]
            messages, _ = self.run(self.sessions.messages(sid, limit=200, order="asc"))
            users = [m.id for m in messages if m.type == "user"]
            assert users == self.promoted[sid]
            promotions = [r.data.inputID for r in log if isinstance(r.data, ev.InputPromoted)]
            assert sorted(promotions) == sorted(self.promoted[sid]), "an input was promoted twice or lost"
            assert not set(pending) & set(users)


AdmissionMachine.TestCase.settings = settings(
    max_examples=40, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestAdmission = AdmissionMachine.TestCase
