"""A look that carries finishes: runs that ended since, recorded by the next claim.

At sparse rates a durable run costs two transactions: the look that claims it, and the
record of its end. Yet the next look is rarely far off: when runs are due every few
milliseconds, the end of one run and the claim of the next could share a commit. A
store offering `CarryingClaim` does that: `CarryingClaim.claim_due_carrying` records the
finishes it is given exactly as `BatchRecorder.record` would (the ledger entry with the
release of its claim, in the same transaction), then claims as `Store.claim_due`
would, in one transaction and one commit.

The scheduler decides when a finish may wait for the next look (never longer than a
few milliseconds, and only while a look is that close); the store only does both in
one transaction. Both SQL stores implement it (`CarryMixin`).

The words look, carry, finish mean what docs/architecture.md, "Glossary", says.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from ._checks import check_finish
from ._protocol import SlotLedger
from ._records import AdvanceFn, Claim, Finish, GiveUpFn, StartNowFn

__all__ = ["CarriedFinishes", "CarryMixin", "CarryingClaim"]


@runtime_checkable
class CarryingClaim(Protocol):
    """Optional store capability: a claim that first records finishes, in one commit."""

    def claim_due_carrying(
        self,
        finishes: Sequence[Finish],
        now: float,
        *,
        owner: str,
        lease_seconds: float,
        limit: int,
        advance: AdvanceFn,
        start: StartNowFn | None = None,
        given_up: GiveUpFn | None = None,
    ) -> tuple[list[bool], list[Claim]]:
        """Record ``finishes``, then claim, in one transaction.

        The finishes are recorded as `BatchRecorder.record` records them (with no
        starts), the claim is made as `Store.claim_due` makes it. Returns, per finish,
        whether its claim was held (and so released, with its ledger entry), and the
        claims. On an error nothing of either is kept.
        """
        ...


class _Host(SlotLedger, Protocol):
    _carried: CarriedFinishes

    def _recorded(
        self, cur: Any, starts: Sequence[Any], finishes: Sequence[Finish], again: bool
    ) -> tuple[list[bool], list[bool]]: ...


class CarriedFinishes:
    """The finishes the calling thread's claim carries, and what recording them gave."""

    def __init__(self, host: _Host) -> None:
        self._host = host
        self._local = threading.local()

    def record(self, cur: Any, *, again: bool) -> None:
        """Record the carried finishes in ``cur``'s transaction (the claim's first step).

        ``again``: after a commit of unknown outcome, find out what the first attempt
        recorded (as `BatchRecorder.record` does).
        """
        finishes: Sequence[Finish] = getattr(self._local, "finishes", ())
        if finishes:
            self._local.ended = self._host._recorded(cur, (), finishes, again)[1]

    @contextmanager
    def carrying(self, finishes: list[Finish]) -> Iterator[list[bool]]:
        """Carry ``finishes`` in the calling thread's claim made inside the block.

        Yields the list that holds, once the block ends, whether each was recorded
        with its claim released (all False if the claim did not record them).
        """
        ended = [False] * len(finishes)
        local = self._local
        local.finishes, local.ended = finishes, ended
        try:
            yield ended
        finally:
            ended[:] = local.ended
            local.finishes, local.ended = (), []


class CarryMixin:
    """`CarryingClaim` for a store whose claim calls `CarriedFinishes.record` first."""

    def claim_due_carrying(
        self: _Host,
        finishes: Sequence[Finish],
        now: float,
        *,
        owner: str,
        lease_seconds: float,
        limit: int,
        advance: AdvanceFn,
        start: StartNowFn | None = None,
        given_up: GiveUpFn | None = None,
    ) -> tuple[list[bool], list[Claim]]:
        """Record ``finishes``, then claim, in one transaction (see `CarryingClaim`)."""
        checked = [check_finish(f) for f in finishes]
        with self._carried.carrying(checked) as ended:
            claims = self.claim_due(
                now,
                owner=owner,
                lease_seconds=lease_seconds,
                limit=limit,
                advance=advance,
                start=start,
                given_up=given_up,
            )
        return ended, claims
