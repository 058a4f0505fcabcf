"""A page of a store's jobs: a name search, a state filter, the counts per state.

The status page, ``/api/jobs`` and ``tickwork jobs`` show 10,000 jobs a page at a time.
Decoding a stored job costs far more than finding it, so `ListingMixin.jobs_page` (every
SQL store) picks the page and counts the states in SQL from the rows' own columns, and
decodes only the jobs it returns. `list_jobs` asks a store that can (`JobListing`) and
reads any other store whole, with the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from ._checks import check_job_id
from ._jobspec import JobSpec
from ._protocol import SlotLedger, Store
from ._records import JobState
from ._sqlbase import SQLHost
from ._streak import FAILED_OUTCOMES, failure_streak

__all__ = [
    "JOB_STATES",
    "LATE_AFTER",
    "JobListing",
    "JobQuery",
    "JobsPage",
    "ListingMixin",
    "list_jobs",
]

#: The states a listing filters by, in the order the pages show them.
JOB_STATES: Final = ("failing", "paused", "late", "running", "waiting")
#: Seconds past its due time after which a run not started makes its job late.
LATE_AFTER: Final = 60.0
#: Most jobs one page holds.
MOST: Final = 1000


@dataclass(frozen=True, slots=True)
class JobQuery:
    """Which jobs to list (by id, in id order), and which page of them.

    Args:
        prefix: Only ids that start with it (a daemon's ``namespace/``).
        search: Only jobs whose id after ``prefix`` holds this text, in any case.
        state: Only jobs in this state of `JOB_STATES` (``None``: all): *failing* (the
            newest run that ended failed, timed out or was abandoned), *paused*, *late*
            (not paused and no run going, yet its next run or a waiting run was due more
            than `LATE_AFTER` seconds ago), *running* (a run held by a node) or *waiting*
            (a run queued or recovered, not taken yet, or its due run held for a full pool).
        offset: Matching jobs skipped before the page.
        limit: Most jobs on the page (1 to 1,000); ``None``: all of them.

    Raises:
        ValueError: A field out of its range; the message names it and shows the value.

    """

    prefix: str = ""
    search: str = ""
    state: str | None = None
    offset: int = 0
    limit: int | None = 50

    def __post_init__(self) -> None:
        if self.state is not None and self.state not in JOB_STATES:
            raise ValueError(f"state must be one of {', '.join(JOB_STATES)}, got {self.state!r}")
        if isinstance(self.offset, bool) or not isinstance(self.offset, int) or self.offset < 0:
            raise ValueError(f"offset must be an integer >= 0, got {self.offset!r}")
        most = self.limit
        if most is not None and (
            isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MOST
        ):
            raise ValueError(f"limit must be an integer from 1 to {MOST:,} or None, got {most!r}")
        for name in ("prefix", "search"):
            if not isinstance(getattr(self, name), str):
                raise TypeError(f"{name} must be a str, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class JobsPage:
    """One page of a listing, and what the whole listing holds."""

    jobs: list[JobState]
    """The page, in id order."""
    total: int
    """Jobs that match the prefix, the search and the state."""
    counts: Mapping[str, int] = field(default_factory=dict)
    """Jobs that match the prefix and the search: ``all``, and each of `JOB_STATES`."""


@runtime_checkable
class JobListing(Protocol):
    """A store that lists a page of its jobs without reading them all (`ListingMixin`)."""

    def jobs_page(self, query: JobQuery, *, now: float) -> JobsPage:
        """The page of jobs ``query`` asks for, judged late as of ``now`` (POSIX seconds)."""
        ...


def _like(text: str) -> str:
    """``text`` found anywhere, for ``LIKE ... ESCAPE '!'``."""
    return "%" + text.lower().replace("!", "!!").replace("%", "!%").replace("_", "!_") + "%"


_HELD = "EXISTS (SELECT 1 FROM {claims} c WHERE c.job_id = j.id AND c.owner <> '')"
_QUEUED = "SELECT 1 FROM {claims} c WHERE c.job_id = j.id AND c.owner = ''"
#: Each state as a condition on a job row ``j``; ``?``: ``now - LATE_AFTER``.
_WHERE: Final = {
    "failing": "COALESCE((SELECT l.outcome FROM {ledger} l WHERE l.job_id = j.id AND l.outcome"
    " IN ('ok', 'failed', 'timeout', 'abandoned') ORDER BY l.seq DESC LIMIT 1), 'ok') <> 'ok'",
    "paused": "j.paused = {true}",
    "late": f"(j.paused = {{false}} AND NOT {_HELD} AND (j.next_run < ?"
    f" OR EXISTS ({_QUEUED} AND c.scheduled < ?)))",
    "running": _HELD,
    "waiting": f"(EXISTS ({_QUEUED}) OR j.pool_wait = j.next_run)",
}


class _Host(SQLHost[Any], Protocol):
    """What `ListingMixin` uses of its `SQLStore`: the row readers beside `SQLHost`."""

    def _claims_by_job(self, cur: Any, job_ids: Sequence[str]) -> dict[str, list[Sequence[Any]]]:
        """The claims held on each job, oldest slot first."""
        ...

    def _decode(self, job_id: str, text: str, *, strict: bool) -> JobSpec | None:
        """A stored declaration, decoded."""
        ...

    def _state(
        self, row: Sequence[Any], spec: JobSpec, claims: Sequence[Sequence[Any]]
    ) -> JobState:
        """A job row and its claims as a `JobState`."""
        ...

    @property
    def _WORDS(self) -> Mapping[str, str]:
        """The dialect's words (`SQLStore._WORDS`)."""
        ...


class ListingMixin:
    """The reads of jobs for `SQLStore`: one, all, or a page with its counts.

    `Store.get`, `Store.jobs`, and `JobListing.jobs_page` in one read transaction.
    """

    def get(self: _Host, job_id: str) -> JobState | None:
        """The job's state, or ``None`` (see `tickwork.stores.Store.get`).

        Raises:
            StoreError: The stored declaration cannot be read.

        """
        job_id = check_job_id(job_id)

        def body(cur: Any) -> JobState | None:
            row = cur.execute(
                self._q("SELECT {job_columns} FROM {jobs} WHERE id = ?"), (job_id,)
            ).fetchone()
            if row is None:
                return None
            spec = self._decode(job_id, row[1], strict=True)
            assert spec is not None  # strict decoding raises instead
            return self._state(row, spec, self._claims_by_job(cur, [job_id]).get(job_id, []))

        return self._run(f"get job {job_id!r}", body, write=False)

    def jobs(self: _Host) -> list[JobState]:
        """Every job, ordered by id.

        A job whose stored declaration cannot be read is skipped, with a warning logged
        on ``tickwork.stores``.
        """

        def body(cur: Any) -> list[JobState]:
            snapshot = self._WORDS["snapshot"]
            if snapshot:  # one snapshot for both reads, so claims and jobs agree
                cur.execute(snapshot)
            claims: dict[str, list[Sequence[Any]]] = {}
            for c in cur.execute(
                self._q("SELECT {claim_columns} FROM {claims} ORDER BY scheduled, token")
            ).fetchall():
                claims.setdefault(c[1], []).append(c)
            out = []
            for row in cur.execute(
                self._q("SELECT {job_columns} FROM {jobs} WHERE queue IS NULL ORDER BY {by_id}")
            ).fetchall():
                spec = self._decode(row[0], row[1], strict=False)
                if spec is not None:
                    out.append(self._state(row, spec, claims.get(row[0], [])))
            return out

        return self._run("list jobs", body, write=False)

    def jobs_page(self: _Host, query: JobQuery, *, now: float) -> JobsPage:
        """The page of jobs ``query`` asks for (see `JobQuery`), late as of ``now``.

        Two statements count the matching jobs per state and pick the page's ids; one
        reads those rows and one their claims. Only the page's declarations are decoded.

        Raises:
            StoreError: The store cannot be read.

        """
        where = ["j.queue IS NULL", "substr(j.id, 1, CAST(? AS INTEGER)) = ?"]
        params: list[Any] = [len(query.prefix), query.prefix]
        if query.search:
            where.append("lower(substr(j.id, CAST(? AS INTEGER))) LIKE ? ESCAPE '!'")
            params += [len(query.prefix) + 1, _like(query.search)]
        late = [now - LATE_AFTER] * 2
        sums = ", ".join(f"SUM(CASE WHEN {_WHERE[s]} THEN 1 ELSE 0 END)" for s in JOB_STATES)
        base = " FROM {jobs} j WHERE " + " AND ".join(where)
        count = self._q(f"SELECT COUNT(*), {sums}{base}")
        pick, pick_params = base, list(params)
        if query.state is not None:
            pick += f" AND {_WHERE[query.state]}"
            pick_params += late if query.state == "late" else []
        pick += " ORDER BY {by_id}"
        if query.limit is not None:
            pick += " LIMIT ? OFFSET ?"
            pick_params += [query.limit, query.offset]
        select = self._q("SELECT {job_columns}" + pick)

        def body(cur: Any) -> JobsPage:
            row = cur.execute(count, [*late, *params]).fetchone()
            counts = {"all": int(row[0])} | {
                s: int(n or 0) for s, n in zip(JOB_STATES, row[1:], strict=True)
            }
            rows = cur.execute(select, pick_params).fetchall()
            if query.limit is None:  # all of them, past the offset
                rows = rows[query.offset :]
            held = self._claims_by_job(cur, [r[0] for r in rows])
            jobs = []
            for r in rows:
                spec = self._decode(r[0], r[1], strict=False)
                if spec is not None:
                    jobs.append(self._state(r, spec, held.get(r[0], [])))
            total = counts["all"] if query.state is None else counts[query.state]
            return JobsPage(jobs, total, counts)

        return self._run("list a page of jobs", body, write=False)


def _failing(store: Store, s: JobState) -> bool:
    if isinstance(store, SlotLedger):
        failures, _ = failure_streak(store, s.id)
        return failures > 0
    return s.last_run is not None and s.last_run.outcome in FAILED_OUTCOMES


def _in_state(store: Store, s: JobState, state: str, now: float) -> bool:
    """Whether ``s`` is in ``state``: the rules of `JobQuery`, for a store read whole."""
    held = any(c.owner for c in s.claims)
    if state == "failing":
        return _failing(store, s)
    if state == "paused":
        return s.paused
    if state == "running":
        return held
    if state == "waiting":
        return s.waiting_runs > 0 or s.pool_wait is not None
    due = [c.scheduled for c in s.waiting] + ([] if s.next_run is None else [s.next_run])
    return not s.paused and not held and any(t < now - LATE_AFTER for t in due)


def list_jobs(store: Store, query: JobQuery, *, now: float) -> JobsPage:
    """The page of jobs ``query`` asks for, from any store (late as of ``now``).

    A `JobListing` store is asked; any other is read whole and filtered here.

    Raises:
        StoreError: The store cannot be read.

    """
    if isinstance(store, JobListing):
        return store.jobs_page(query, now=now)
    search = query.search.lower()
    found = [
        s
        for s in store.jobs()
        if s.id.startswith(query.prefix) and search in s.id[len(query.prefix) :].lower()
    ]
    counts = {"all": len(found)} | {
        state: sum(_in_state(store, s, state, now) for s in found) for state in JOB_STATES
    }
    if query.state is not None:
        found = [s for s in found if _in_state(store, s, query.state, now)]
    end = None if query.limit is None else query.offset + query.limit
    return JobsPage(found[query.offset : end], len(found), counts)
