"""Recovery in the SQL stores: the claims of gone owners and of ended leases come back.

`ClaimRecovery` is a part of `SQLStore`: it remembers when it last looked for listed
owners that are gone (and the caller's ``now`` then, which `SQLStore.next_wakeup` uses),
forgets the gone ones that hold nothing, and releases the claims to recover per delivery
semantics, writing an ``abandoned`` ledger entry for each attempt that had started. The
store supplies, through `RecoveryHost`, which owners are gone and which claims to take.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Sequence
from typing import Any, Final, Generic, Protocol

from tickwork._core.text import iso

from ._jobspec import JobSpec
from ._ledger import LedgerQueries
from ._procs import end_leftovers
from ._records import Claim, Recovered, abandoned_error, recovery_action
from ._sqlbase import C, SQLHost
from ._terms import Outcome

__all__ = ["LIVENESS_CHECK", "ClaimRecovery", "RecoveryHost"]

#: How often (seconds, at most) a store looks for listed owners that are gone (their
#: process ended, or their database sessions), in the claim and recovery calls.
LIVENESS_CHECK: Final = 0.25

_log = logging.getLogger("tickwork.stores")


class RecoveryHost(SQLHost[C], Protocol[C]):
    """A store as its recovery sees it: `SQLHost`, its hooks and its row readers.

    Each is the `SQLStore` method of the same name; see there.
    """

    def _owners_gone(self, cur: C, mono: float) -> list[tuple[str, bool]]:
        """Listed owners this store can tell are gone, each with whether it holds claims."""
        ...

    def _expired(self, cur: C, now: float, gone: list[str]) -> list[Sequence[Any]]:
        """The held claims to recover, each row the claim's columns and its job's spec."""
        ...

    def _decode(self, job_id: str, text: str, *, strict: bool) -> JobSpec | None:
        """Decode a stored spec."""
        ...

    def _claim(self, row: Sequence[Any], spec: JobSpec) -> Claim:
        """A claim row as a `Claim`."""
        ...

    def _token(self, token: str) -> tuple[str, ...]:
        """The parameter for ``{last_token}``."""
        ...

    def _attempt_no(self, cur: C, job_id: str, scheduled: float, retry: bool) -> int:
        """The attempt number of a slot's run."""
        ...

    def _oneoffs_ended(self, cur: C, ended: Sequence[tuple[str, Outcome]]) -> int:
        """Delete the rows of the one-offs among ``ended`` and count their ends."""
        ...


class ClaimRecovery(Generic[C]):
    """Looks for gone owners and recovers claims, for one store.

    Args:
        store: The store whose transactions, dialect and hooks recovery uses.
        ledger: The store's slot ledger, which records each abandoned attempt.
        lost: Why a claim recovered before its lease ended was lost, for the log.

    """

    def __init__(self, store: RecoveryHost[C], ledger: LedgerQueries[C], lost: str) -> None:
        self._store = store
        self._ledger = ledger
        self._lost = lost
        self._checked = -math.inf  # monotonic time of the last look for gone owners
        #: The caller's ``now`` at the last look for gone owners (None: no look yet).
        self.now_seen: float | None = None

    def gone_owners(self, cur: C, now: float) -> list[str]:
        """Listed owners that are gone and hold claims (at most every `LIVENESS_CHECK` s).

        Listed owners that are gone and hold nothing are forgotten on the way. An owner
        with a process of its runs still alive on this host (`end_leftovers` kills it)
        is not gone yet.
        """
        mono = time.monotonic()
        if mono - self._checked < LIVENESS_CHECK:
            return []
        self._checked, self.now_seen = mono, now
        gone = self._store._owners_gone(cur, mono)
        idle = [owner for owner, holds in gone if not holds]
        if idle:
            cur.execute(*self._store._q_list("DELETE FROM {nodes} WHERE owner {any}", idle))
        # Nothing of a run may go on beside its takeover: processes of a gone owner's
        # runs still alive on this host are killed, and its claims wait for a look
        # that finds them gone.
        held = [owner for owner, holds in gone if holds]
        alive = end_leftovers(held) if held else set()
        return [owner for owner in held if owner not in alive]

    def recover(self, cur: C, now: float, *, expired: bool = True) -> list[Recovered]:
        """Release the claims whose lease ended by ``now`` or whose owner is gone.

        ``expired``: whether a lease may have ended (`LookUpkeep`); if not, only the
        claims of gone owners are looked for, when there are any.
        """
        store = self._store
        gone = self.gone_owners(cur, now)
        if not expired and not gone:
            return []
        out: list[Recovered] = []
        for row in sorted(store._expired(cur, now, gone), key=lambda r: (r[5], r[0])):
            token, job_id, owner, scheduled, _, lease_until, started, _, _, text = row
            spec = store._decode(job_id, text, strict=False)
            if spec is None:
                cur.execute(store._q("DELETE FROM {claims} WHERE token = ?"), (token,))
                continue
            early = lease_until > now  # recovered because its owner is gone
            if started is not None:
                self._abandoned(cur, row, abandoned_error(owner, lease_until, gone=early))
            action = recovery_action(spec, started)
            if action == "abandoned":
                cur.execute(store._q("DELETE FROM {claims} WHERE token = ?"), (token,))
                store._oneoffs_ended(cur, [(job_id, "abandoned")])  # a one-off's row goes
            else:
                # Re-offer exactly this slot (a retry under a new token, so the old owner's
                # claim is gone); the job's next run is not touched.
                cur.execute(
                    store._q(
                        "UPDATE {claims} SET token = ?, owner = '', lease_until = ?,"
                        " started = NULL, retry = {true} WHERE token = ?"
                    ),
                    (secrets.token_hex(16), now, token),
                )
                store._changed(cur, job_id)
            _log.warning(
                "claim on job %r (scheduled %s) by %r %s: %s",
                job_id,
                iso(scheduled, millis=True),
                owner,
                f"lost ({self._lost})" if early else "expired",
                action,
            )
            out.append(Recovered(store._claim(row[:9], spec), action))
        return out

    def _abandoned(self, cur: C, row: Sequence[Any], error: str) -> None:
        """Record the started attempt of claim ``row`` as ended with its runner.

        One ledger entry, whether or not the slot is re-offered (at-least-once runs it
        again, a new attempt), and the job's last run unless a later slot is recorded.
        """
        store = self._store
        token, job_id, owner, scheduled, claimed_at, _, started, retry, origin, _ = row
        self._ledger.write(
            cur,
            [
                (
                    job_id,
                    scheduled,
                    "abandoned",
                    1,
                    origin,
                    claimed_at,
                    started,
                    None,
                    owner,
                    store._attempt_no(cur, job_id, scheduled, bool(retry)),
                    error,
                    None,
                    time.time(),
                )
            ],
        )
        cur.execute(
            store._q(
                "UPDATE {jobs} SET last_scheduled = ?, last_started = ?,"
                " last_ended = NULL, last_outcome = 'abandoned', last_error = ?"
                "{last_token} WHERE id = ?"
                " AND (last_scheduled IS NULL OR last_scheduled <= ?)"
            ),
            (scheduled, started, error, *store._token(token), job_id, scheduled),
        )
