"""`LookBoard`: the looks and promises schedulers sharing a PostgreSQL store tell each other.

On a frozen monotonic clock, so nothing here depends on the machine's speed; the
PostgreSQL channel itself is in ``tests/test_store_postgres.py``.
"""

from __future__ import annotations

import types

import pytest

from tickwork.stores import _looks as looks_mod
from tickwork.stores._looks import ANNOUNCE_ALONE, COVER_FOR, COVER_RENEW, LookBoard


class Mono:
    """A monotonic clock the test moves."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def mono(monkeypatch: pytest.MonkeyPatch) -> Mono:
    clock = Mono()
    monkeypatch.setattr(looks_mod, "time", types.SimpleNamespace(monotonic=clock))
    return clock


def promised(board: LookBoard, me: str, wake: float | None = 5.0, runs: str = "") -> str:
    """An announcement ``me`` makes with a worker free (a promise)."""
    board.cover(me, True)
    payload = board.announcement(me, wake, runs)
    assert payload is not None
    return payload


def test_a_look_promises_only_with_a_worker_free(mono: Mono) -> None:
    board = LookBoard()
    assert board.announcement("a", 5.0) == "a 5.0 covers=0.0"  # not told it is able
    assert not board.covering()
    mono.now += ANNOUNCE_ALONE
    assert board.cover("a", True) is False  # nothing to withdraw
    assert board.announcement("a", 5.0) == f"a 5.0 covers={COVER_FOR!r}"
    assert board.covering()
    mono.now += COVER_FOR
    assert not board.covering()  # not renewed: it lapsed


def test_a_promise_is_renewed_more_often_than_it_lapses(mono: Mono) -> None:
    board = LookBoard()
    promised(board, "a")
    mono.now += COVER_RENEW / 2
    assert board.announcement("a", 6.0) is None  # spaced: the promise still holds
    mono.now += COVER_RENEW / 2
    assert board.announcement("a", 6.0) == f"a 6.0 covers={COVER_FOR!r}"  # renewed
    assert COVER_RENEW < COVER_FOR < ANNOUNCE_ALONE  # a lone node renews before it lapses
    board.heard("a", "b 6.5 covers=0.0")  # others heard: still no more often than that
    mono.now += COVER_RENEW / 2
    assert board.announcement("a", 7.0) is None


def test_a_promise_heard_holds_until_it_lapses_or_is_withdrawn(mono: Mono) -> None:
    taker, other = LookBoard(), LookBoard()
    assert other.heard("b", promised(taker, "a")) is False  # a look is not a change
    assert other.covered("b") == pytest.approx(COVER_FOR)
    assert other.latest() == (1, 0.0, 5.0)
    mono.now += COVER_FOR / 2
    assert other.covered("b") == pytest.approx(COVER_FOR / 2)
    mono.now += COVER_FOR / 2
    assert other.covered("b") == 0.0  # lapsed: its maker may be dead or stalled
    assert other.heard("b", promised(taker, "a")) is False  # not spaced: it lapsed too
    assert taker.cover("a", False) is True  # every worker busy: withdraw now
    assert not taker.covering()
    assert other.heard("b", taker.withdrawal("a")) is True  # a change: look at once
    assert other.covered("b") == 0.0
    assert other.heard("b", taker.withdrawal("a")) is False  # nothing held: no news
    assert other.latest() == (2, 0.0, 5.0)  # a withdrawal is not a look


def test_a_look_without_a_promise_ends_its_makers_promise(mono: Mono) -> None:
    other = LookBoard()
    other.heard("b", f"a 5.0 covers={COVER_FOR!r}")
    assert other.covered("b") > 0
    other.heard("b", "a 6.0 covers=0.0")
    assert other.covered("b") == 0.0


def test_own_looks_are_no_news_and_a_lost_listener_forgets_promises(mono: Mono) -> None:
    board = LookBoard()
    payload = promised(board, "a")
    assert board.heard("a", payload) is False
    assert board.latest() is None and board.covered("a") == 0.0
    board.heard("a", f"c 5.0 covers={COVER_FOR!r}")
    board.heard("a", f"d 5.0 covers={COVER_FOR!r}")
    board.forget()  # a withdrawal may have been missed
    assert board.covered("a") == 0.0
    assert board.latest() == (2, 0.0, 5.0)


def test_two_promises_at_once_leave_the_lesser_owner(mono: Mono) -> None:
    a, b = LookBoard(), LookBoard()
    pa, pb = promised(a, "a"), promised(b, "b")
    a.heard("a", pb)
    b.heard("b", pa)
    assert a.covered("a") == 0.0  # a keeps its own: b's does not count for it
    assert a.cover("a", True) is False and a.covering()
    assert b.covered("b") == pytest.approx(COVER_FOR)  # b defers to a...
    assert b.cover("b", True) is True  # ...and withdraws
    assert not b.covering()
    assert a.heard("a", b.withdrawal("b")) is False  # a deferred to nobody
    mono.now += COVER_RENEW  # a's promise still holds
    assert b.announcement("b", 5.0) == "b 5.0 covers=0.0"  # so b makes none


def test_other_payloads_are_read_safely(mono: Mono) -> None:
    board = LookBoard()
    board.heard("me", "old-node 5.0")  # a release before promises: a look, no promise
    assert board.latest() == (1, 0.0, 5.0) and board.covered("me") == 0.0
    board.heard("me", "with space 7.5 covers=60")  # an owner with a space; capped
    assert board.latest() == (2, 0.0, 7.5)
    assert board.covered("me") == pytest.approx(COVER_FOR)
    board.heard("me", "x None covers=nan")
    assert board.latest() == (3, 0.0, None)
    board.heard("me", "y inf covers=oops")
    assert board.latest() == (4, 0.0, None)
    assert board.covered("me") == pytest.approx(COVER_FOR)  # only "with space" holds one


def test_a_promise_covers_the_changes_heard_only_for_a_node_that_runs_the_same_work(
    mono: Mono,
) -> None:
    taker, alike, other = LookBoard(), LookBoard(), LookBoard()
    mine, theirs = looks_mod.runs_key((["app:send"], [])), looks_mod.runs_key((["app:x"], []))
    assert mine != theirs and " " not in mine
    assert looks_mod.runs_key((["app:send"], [])) == mine  # the same work, the same key
    taker.cover("a", True)
    payload = taker.announcement("a", 5.0, mine)
    assert payload == f"a 5.0 covers={COVER_FOR!r} runs={mine}"
    alike.heard("b", payload)
    other.heard("c", payload)
    assert alike.covered("b") == pytest.approx(COVER_FOR)  # its due times: any promise
    assert alike.covered("b", mine) == pytest.approx(COVER_FOR)  # its changes too
    assert other.covered("c") == pytest.approx(COVER_FOR)
    assert other.covered("c", theirs) == 0.0  # another's work: it looks at its changes
    # A promise that names no work (a release before this one) covers no change.
    alike.heard("b", f"d 5.0 covers={COVER_FOR!r}")
    mono.now += COVER_FOR / 2
    alike.heard("b", "a 6.0 covers=0.0")  # a's promise ends; d's holds
    assert alike.covered("b") == pytest.approx(COVER_FOR / 2)
    assert alike.covered("b", mine) == 0.0
    # With an owner with a space, and in an order nothing else writes: read safely.
    alike.heard("b", f"with space 7.5 covers={COVER_FOR!r} runs={mine}")
    assert alike.covered("b", mine) == pytest.approx(COVER_FOR)
    assert alike.latest() == (4, 0.0, 7.5)  # a, d, a again, "with space"


def test_a_promise_counts_as_steady_once_it_has_held_unbroken_that_long(mono: Mono) -> None:
    taker, other = LookBoard(), LookBoard()
    runs = looks_mod.runs_key(([], []))
    steady = looks_mod.MUTE_AFTER
    other.heard("b", promised(taker, "a", runs=runs))
    assert other.covered("b", runs) == pytest.approx(COVER_FOR)
    assert other.covered("b", runs, steady) == 0.0  # just made
    mono.now += steady
    assert other.covered("b", runs, steady) == 0.0  # not renewed: it may lapse soon
    other.heard("b", promised(taker, "a", runs=runs))  # renewed before it lapsed
    assert other.covered("b", runs, steady) == pytest.approx(COVER_FOR)
    assert other.covered("b", "other work", steady) == 0.0
    mono.now += COVER_FOR  # lapsed: a later promise starts afresh
    other.heard("b", promised(taker, "a", runs=runs))
    assert other.covered("b", runs, steady) == 0.0
    mono.now += steady
    other.heard("b", promised(taker, "a", runs=runs))
    assert other.covered("b", runs, steady) > 0.0
    other.heard("b", taker.withdrawal("a"))  # withdrawn: gone at once
    assert other.covered("b", runs) == 0.0
