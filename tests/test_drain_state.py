"""The Session Drain's named state: what each boundary promotes, how the allowance counts Steps and retries, and that a
Physical Attempt is one request on the wire of a Step (a compaction before sending makes none; an overflow's rebuild
is the Step's second, which may not recover again), while retries are counted apart, on their own assistant."""

from __future__ import annotations

from opencode_session.core.execution.drain import DrainState, Next, PhysicalAttempt, Retrying


def test_each_boundary_promotes_what_its_purpose_allows():
    assert DrainState().promotes == "input"
    assert DrainState(Next.INPUT).promotes == "input"
    assert DrainState(Next.CONTINUE).promotes == "steer"
    assert DrainState(Next.REBUILD).promotes is None
    assert DrainState(Next.RETRY).promotes is None


def test_settled_steps_count_against_the_allowance_until_input_is_promoted():
    state = DrainState().settled(continues=True)
    assert (state.next, state.step) == (Next.CONTINUE, 2)
    state = state.settled(continues=False)
    assert (state.next, state.step) == (Next.INPUT, 3)
    assert state.promoted().step == 1


def test_a_retry_is_the_next_step_on_the_failed_steps_assistant():
    state = DrainState(Next.CONTINUE, step=2).retry("msg_a")
    assert (state.next, state.step, state.retrying) == (Next.RETRY, 3, Retrying(1, "msg_a"))
    assert state.retrying.attempt == 2  # the request's second try, as session.retry.scheduled numbers it
    again = state.retry("msg_a")
    assert (again.step, again.retrying.retries, again.retrying.attempt) == (4, 2, 3)
    assert again.settled(continues=False).retrying == Retrying()  # the chain ends with a Step that settles


def test_a_physical_attempt_is_a_request_on_the_wire():
    state = DrainState()
    assert state.attempt.may_recover_overflow
    before_sending = state.compacted(overflowed=False)  # nothing was sent: still the Step's first attempt
    assert (before_sending.next, before_sending.attempt, before_sending.step) == (Next.REBUILD, PhysicalAttempt(1), 1)
    overflowed = before_sending.compacted(overflowed=True)
    assert overflowed.attempt == PhysicalAttempt(2) and not overflowed.attempt.may_recover_overflow
    assert overflowed.step == 1  # the same logical Step
    assert overflowed.settled(continues=False).attempt.may_recover_overflow  # the next Step starts afresh


def test_a_rebuild_keeps_the_retry_count_but_not_the_retrys_assistant():
    state = DrainState().retry("msg_a").compacted(overflowed=True)
    assert state.retrying == Retrying(1, None)  # that assistant lies before the checkpoint now
    assert state.promotes is None and state.next is Next.REBUILD
