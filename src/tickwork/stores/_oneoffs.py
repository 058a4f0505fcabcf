"""One-offs: delayed jobs that app code enqueues, run once, and that leave when done.

A one-off is a job row like any other (so the claim, the run, retries, time limits,
pools, leases, recovery and the ledger are the ones every job has), with three marks:

- its id starts with `ONEOFF_MARK` (``~``): ``~`` and 28 hex digits, or ``~key:`` and
  the key the app gave, so that enqueueing the same key again finds the row and adds
  nothing while it is pending or running;
- its ``queue`` column names its function (NULL for every declared job), which keeps
  one-offs out of `Store.jobs` and the listings (a partial index finds the declared
  jobs alone) and counts them per function (`OneOffCounts`);
- when its slot ends (the finish, a recovery that gives the slot up, or a cancel), the
  same transaction deletes its row and adds the end to its function's totals in the
  ``queues`` table. Its ledger entry stays, under the ledger's retention.

A node claims only the one-offs whose function it allows (`OneOffFilter`, given by its
scheduler through `OneOffQueue.claim_oneoffs_of`): the claim's statements and its next
wake-up leave the others to the nodes that allow them (the dialect word
``{runnable}``, a job row ``j`` that is a declared job or a one-off allowed here, with
the parameters `OneOffMixin._runnable` gives).

`OneOffMixin` gives `SQLStore` the `OneOffQueue` face; a dialect supplies
`_insert_oneoffs` (how a batch of rows goes in and is announced, and which of them
were new) and
`oneoff_statement` (the same insert for an app's own connection).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from tickwork._core.schedules import instant_arg

from ._checks import check_job_id
from ._errors import JobSpecError
from ._fields import call_arguments
from ._jobspec import JobSpec
from ._ledger import LedgerQueries
from ._records import Finish
from ._sqlbase import SQLHost
from ._streak import FAILED_OUTCOMES
from ._terms import Outcome

__all__ = [
    "ONEOFF_COLUMNS",
    "ONEOFF_MARK",
    "ONEOFF_TOTALS",
    "WINDOW_ROWS",
    "OneOffCounts",
    "OneOffFilter",
    "OneOffForm",
    "OneOffMixin",
    "OneOffQueue",
    "OneOffRow",
    "OneOffWindow",
    "created_flags",
    "is_oneoff",
    "oneoff_rows",
]

#: The first character of every one-off's id (and of no declared job's).
ONEOFF_MARK: Final = "~"

#: The table of the one-offs' totals per function (``{t}``: its name, ``{text}``: the
#: dialect's text type); created by the schema step that brought one-offs.
ONEOFF_TOTALS: Final = (
    "CREATE TABLE {t} (queue {text} PRIMARY KEY NOT NULL, done bigint NOT NULL DEFAULT 0,"
    " failed bigint NOT NULL DEFAULT 0, dropped bigint NOT NULL DEFAULT 0)"
)

#: The columns an enqueue writes, in the order of `OneOffRow.values`.
ONEOFF_COLUMNS: Final = "id, spec, schedule, overlap, paused, next_run, first_slot, queue"

# The rows of one-offs whose slots have ended (no next run, no claim left) go; the
# queues they name are returned so that their totals count the ends.
_GONE: Final = (
    "id {any} AND queue IS NOT NULL AND next_run IS NULL"
    " AND NOT EXISTS (SELECT 1 FROM {claims} c WHERE c.job_id = {jobs}.id)"
)
# A pending one-off is cancelled: its row goes unless a run of it is held by a node.
_CANCEL: Final = (
    "id {any} AND queue IS NOT NULL AND NOT EXISTS (SELECT 1 FROM"
    " {claims} c WHERE c.job_id = {jobs}.id AND c.owner <> '')"
)
_TOTALS: Final = "INSERT INTO {queues} (queue, done, failed, dropped) VALUES (?, ?, ?, ?){add_up}"
# Taken while a store's `OneOffFilter` is replaced (rarely: a function allowed anew).
_FILTER_LOCK: Final = threading.Lock()
#: Most ledger rows `OneOffQueue.oneoff_window` reads, by default.
WINDOW_ROWS: Final = 20_000
# The window is read in this many evenly spaced runs of consecutive entries.
_CHUNKS: Final = 240


def is_oneoff(job_id: str) -> bool:
    """Whether ``job_id`` is a one-off's (see `ONEOFF_MARK`)."""
    return job_id.startswith(ONEOFF_MARK)


@dataclass(frozen=True, slots=True)
class OneOffRow:
    """One one-off as a store inserts it: its job row's values, encoded already."""

    id: str
    """``~`` and 28 hex digits, or ``~key:`` and the app's key."""
    spec: str
    """The `JobSpec` as stored (`spec_to_json`)."""
    schedule: str
    """Its `At` schedule as stored."""
    run_at: float
    """When it is due: UTC POSIX seconds."""
    queue: str
    """Its function's import path, under which it is counted."""

    def values(self) -> tuple[Any, ...]:
        """The values of `ONEOFF_COLUMNS`, in their order."""
        return (
            self.id,
            self.spec,
            self.schedule,
            "skip",
            False,
            self.run_at,
            self.run_at,
            self.queue,
        )


def created_flags(rows: Sequence[OneOffRow], created: set[str]) -> list[bool]:
    """Per row, whether it was new: its id is in ``created`` and not an earlier row's."""
    flags, seen = [], set()
    for r in rows:
        flags.append(r.id in created and r.id not in seen)
        seen.add(r.id)
    return flags


_ENCODE: Final = json.JSONEncoder(
    sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
).encode
# A string as `_ENCODE` writes it (``ensure_ascii=False``), without the encoder's setup.
_STRING: Final = json.encoder.encode_basestring


def _value_encoder() -> Callable[[object], str]:
    """`_ENCODE` for a run's own values, with the C encoder made once, not per call.

    The values are `call_arguments`' (JSON values, copied: no cycles to look for). Where
    the C encoder is missing or takes other arguments, `_ENCODE` itself.
    """
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:
        return _ENCODE
    base = json.JSONEncoder()
    try:
        chunks = make(None, base.default, _STRING, None, ":", ",", True, False, False)
        if "".join(chunks([{"b": 1.5, "a": "é"}], 0)) != '[{"a":"é","b":1.5}]':
            return _ENCODE
    except (TypeError, ValueError):
        return _ENCODE
    return lambda value: "".join(chunks(value, 0))


_VALUES: Final = _value_encoder()


def oneoff_rows(
    template: JobSpec, runs: Iterable[tuple[str, float, object, object]]
) -> list[OneOffRow]:
    """The rows of one-offs that share ``template``'s function and options.

    ``runs``: ``(id, due time, args, kwargs)`` each. Every row is the one `JobSpec`
    would store for ``replace(template, id=id, schedule=At(due), args=args,
    kwargs=kwargs)``, its arguments checked by the same rules (`call_arguments`), without
    building a spec per run (``tests/test_oneoffs.py`` holds the two the same).
    `OneOffForm` is the same, for a template that serves many calls.

    Raises:
        JobSpecError: An id that is not a one-off's, or arguments that are not JSON.

    """
    return OneOffForm(template).rows(runs)


class OneOffForm:
    """A template's stored text, cut where each one-off's own values go.

    Built once per function and options (the keys are sorted, so the cuts come in a
    fixed order); each row is then its few values encoded and joined between the cuts,
    not a whole spec's encoding.
    """

    __slots__ = ("_func", "_text")

    def __init__(self, template: JobSpec) -> None:
        """Cut ``template``'s stored form at ``args``, ``id``, ``kwargs`` and ``schedule``."""
        form = template.to_dict()
        holes = {"args": "\x00a", "id": "\x00i", "kwargs": "\x00k", "schedule": "\x00s"}
        form.update(holes)
        text = _ENCODE(form).replace("%", "%%")
        # The keys are sorted: the holes come in the order of `holes`.
        at = [text.index(_ENCODE(hole)) for hole in holes.values()]
        if at != sorted(at):  # pragma: no cover - sort_keys guarantees it
            raise AssertionError(f"a spec's keys out of order: {text!r}")
        for hole in holes.values():
            text = text.replace(_ENCODE(hole), "%s")
        self._text = text
        self._func = template.func

    def rows(self, runs: Iterable[tuple[str, float, object, object]]) -> list[OneOffRow]:
        """`oneoff_rows` of this form's template."""
        text, func = self._text, self._func
        rows = []
        for job_id, due, args, kwargs in runs:
            if not is_oneoff(job_id) or job_id != check_job_id(job_id):
                raise JobSpecError(f"a one-off's id starts with {ONEOFF_MARK!r}, got {job_id!r}")
            when = instant_arg("at", due)  # At(due)'s check, without the object
            pos, named = call_arguments(args, kwargs)
            # `_ENCODE` of ``At(when).to_dict()`` written out (the hot path of a bulk
            # enqueue): the keys in sorted order, a float as JSON writes it.
            schedule = '{"at":' + repr(when) + ',"kind":"at"}'
            spec = text % (
                _VALUES(pos) if pos else "[]",
                _STRING(job_id),
                _VALUES(named) if named else "{}",
                schedule,
            )
            rows.append(OneOffRow(job_id, spec, schedule, when, func))
        return rows


@dataclass(frozen=True, slots=True)
class OneOffFilter:
    """The one-offs a node claims: those whose function it allows (all by default)."""

    modules: tuple[str, ...] = ("*",)
    """Module prefixes (``"myapp.jobs"`` allows it and its submodules; ``"*"``: all)."""
    functions: frozenset[str] = frozenset()
    """Functions allowed by import path, whatever their module."""

    def allows(self, func: str) -> bool:
        """Whether a one-off of function ``func`` (``"module:function"``) runs here."""
        if func in self.functions:
            return True
        module = func.partition(":")[0]
        return any(p == "*" or module == p or module.startswith(p + ".") for p in self.modules)

    def likes(self) -> list[str]:
        """`modules` as SQL ``LIKE`` patterns (backslash escapes) of the functions they allow."""
        if "*" in self.modules:
            return ["%"]
        escaped = [p.replace("\\", "\\\\").replace("_", "\\_") for p in self.modules]
        return [e + tail for e in escaped for tail in (":%", ".%")]


@dataclass(frozen=True, slots=True)
class OneOffCounts:
    """One function's one-offs: pending and running now, and how the ended ones ended."""

    queue: str
    """The function's import path."""
    pending: int = 0
    """Enqueued and not yet running (due or not)."""
    running: int = 0
    """Held by a node now."""
    done: int = 0
    """Ended ``ok``, since the state was created."""
    failed: int = 0
    """Ended ``failed``, ``timeout`` or ``abandoned`` (after their retries)."""
    dropped: int = 0
    """Ended without a run: cancelled, or given up ``missed``."""


@dataclass(frozen=True, slots=True)
class OneOffWindow:
    """The one-offs' ledger entries over a time window, and the one-offs waiting now.

    Where the window holds more entries than the read's bound, `entries` is a sample:
    evenly spaced runs of consecutive entries, each standing for `weight` entries.
    """

    entries: list[tuple[float, float | None, float | None, str, float]]
    """``(scheduled, started, ended, outcome, weight)`` per one-off entry read."""
    waiting_before: int
    """Pending one-offs due before the window began (they wait through all of it)."""
    waiting_due: list[float]
    """The due times of the pending one-offs due in the window, earliest first."""
    read: int
    """Ledger rows read (at most the bound given), beside the seek's statements."""
    sampled: bool
    """Whether `entries` is a sample (the window held more rows than the bound)."""


@runtime_checkable
class OneOffQueue(Protocol):
    """A store that keeps one-offs (both shipped stores): see `tickwork.stores._oneoffs`."""

    def enqueue(self, rows: Sequence[OneOffRow]) -> list[bool]:
        """Insert ``rows`` in one transaction; per row, whether it was new.

        A row whose id exists (a key pending already) adds nothing.
        """
        ...

    def oneoff_statement(self, rows: Sequence[OneOffRow]) -> tuple[str, list[Any]]:
        """The statement and parameters that insert ``rows`` on an app's own connection.

        In the app's transaction (``%s`` placeholders): the rows exist, and are announced
        to the nodes, only if it commits. Its rows: the ids that were new.

        Raises:
            ValueError: The store takes no app's connection (SQLite's state is written
                by its own connection only).

        """
        ...

    def cancel_oneoff(self, job_id: str, *, at: float, by: str) -> bool:
        """Cancel a pending one-off; False if there is none or a node is running it."""
        ...

    def claim_oneoffs_of(
        self, *, modules: Sequence[str] = (), functions: Iterable[str] = ()
    ) -> None:
        """Claim only the one-offs of these functions (until the first call: all).

        ``modules``: module prefixes (``"myapp.jobs"``: it and its submodules, ``"*"``:
        all); ``functions``: import paths. Each call adds to what the calls before it
        allowed (schedulers sharing one store object claim for all of them). The
        one-offs of other functions are left to the nodes that allow them.
        """
        ...

    def oneoff_counts(self) -> list[OneOffCounts]:
        """Every function's one-off counts, by import path."""
        ...

    def oneoff_window(self, since: float, until: float, *, rows: int = ...) -> OneOffWindow:
        """The one-offs' entries recorded in ``[since, until)``, reading at most ``rows``."""
        ...


def _totals(outcome: Outcome) -> tuple[int, int, int]:
    """An ended slot's ``(done, failed, dropped)`` increments."""
    if outcome == "ok":
        return (1, 0, 0)
    if outcome in FAILED_OUTCOMES:
        return (0, 1, 0)
    return (0, 0, 1)


class _Host(SQLHost[Any], Protocol):
    """What `OneOffMixin` uses of its `SQLStore` beside `SQLHost`."""

    def _insert_oneoffs(self, cur: Any, rows: Sequence[OneOffRow]) -> set[str]:
        """Insert ``rows`` unless their ids exist, announce any new; the ids inserted."""
        ...

    def _oneoffs_ended(self, cur: Any, ended: Sequence[tuple[str, Outcome]]) -> int:
        """Delete the rows of the one-offs among ``ended`` and count their ends; how many."""
        ...

    def _xact(self, cur: Any) -> Any:
        """The id of ``cur``'s transaction (None: commits are never in doubt)."""
        ...

    def _xact_committed(self, cur: Any, xact: Any) -> bool:
        """Whether transaction ``xact`` committed."""
        ...

    @property
    def _ledger(self) -> LedgerQueries[Any]:
        """The store's slot ledger."""
        ...

    @property
    def _returns(self) -> bool:
        """Whether the dialect has ``DELETE ... RETURNING``."""
        ...

    def _take_rows(self, cur: Any, where: str, columns: str, ids: list[str]) -> list[Any]:
        """Delete the job rows of ``ids`` for which ``where`` holds; their ``columns``."""
        ...


class OneOffMixin:
    """`OneOffQueue` for `SQLStore`, and the end of a one-off in a finish's transaction."""

    _oneoff_filter: OneOffFilter = OneOffFilter()  # replaced whole, never changed in place
    _oneoff_filtered = False  # whether `claim_oneoffs_of` was called (else: all)

    def claim_oneoffs_of(
        self, *, modules: Sequence[str] = (), functions: Iterable[str] = ()
    ) -> None:
        """See `OneOffQueue.claim_oneoffs_of`.

        Raises:
            TypeError: ``modules`` or ``functions`` is a str (a list is wanted).

        """
        for name, value in (("modules", modules), ("functions", functions)):
            if isinstance(value, str):
                raise TypeError(f"{name} must be a list, not a str, got {value!r}")
        with _FILTER_LOCK:  # producers' threads may add functions at once
            old = self._oneoff_filter if self._oneoff_filtered else OneOffFilter(())
            self._oneoff_filter = OneOffFilter(
                (*old.modules, *(m for m in modules if m not in old.modules)),
                old.functions | set(functions),
            )
            self._oneoff_filtered = True

    def _runnable(self) -> tuple[Any, ...]:
        """The parameters of the ``{runnable}`` word (see the module's docstring)."""
        return ()

    @property
    def _returns(self) -> bool:
        """Whether the dialect has ``DELETE ... RETURNING`` (an SQLite before 3.35.5 not)."""
        return True

    def _take_rows(self: _Host, cur: Any, where: str, columns: str, ids: list[str]) -> list[Any]:
        """Delete the job rows of ``ids`` for which ``where`` holds; their ``columns``.

        ``where`` names the ids as ``id {any}``.
        """
        if self._returns:
            query = f"DELETE FROM {{jobs}} WHERE {where} RETURNING {columns}"
            return list(cur.execute(*self._q_list(query, ids)).fetchall())  # to its end
        # One writer at a time (SQLite): nothing changes the rows between the two.
        query = f"SELECT id, {columns} FROM {{jobs}} WHERE {where}"
        found = list(cur.execute(*self._q_list(query, ids)).fetchall())
        if found:
            cur.execute(*self._q_list("DELETE FROM {jobs} WHERE id {any}", [r[0] for r in found]))
        return [tuple(r[1:]) for r in found]

    def _insert_oneoffs(self, cur: Any, rows: Sequence[OneOffRow]) -> set[str]:
        """Insert ``rows`` unless their ids exist, announce any new; the ids inserted.

        Each dialect's own; the announcement is `_changed`'s, once for the batch.
        """
        raise NotImplementedError

    def oneoff_statement(self, rows: Sequence[OneOffRow]) -> tuple[str, list[Any]]:
        """See `OneOffQueue.oneoff_statement` (each dialect's own)."""
        raise NotImplementedError

    def _xact(self, cur: Any) -> Any:
        """The id of ``cur``'s transaction, for `_xact_committed` (None: SQLite).

        None where a commit's outcome is never in doubt.
        """
        return None

    def _xact_committed(self, cur: Any, xact: Any) -> bool:
        """Whether transaction ``xact`` committed (asked after a commit was cut off)."""
        raise NotImplementedError

    def enqueue(self: _Host, rows: Sequence[OneOffRow]) -> list[bool]:
        """Insert one-offs in one transaction (see `OneOffQueue.enqueue`).

        Raises:
            StoreError: The store failed; nothing was enqueued.

        """
        rows = list(rows)
        if not rows:
            return []

        made: list[tuple[Any, list[bool]]] = []  # the last attempt's transaction and result

        def body(cur: Any) -> list[bool]:
            created = self._insert_oneoffs(cur, rows)  # and announced
            flags = created_flags(rows, created)
            made[:] = [(self._xact(cur) if created else None, flags)]
            return flags

        def resolve(cur: Any) -> list[bool]:
            # The commit's outcome was unknown. Whether the rows are there now cannot
            # tell: a node may have run one since and deleted its row. The transaction's
            # own fate does (inserting a row again would run it twice).
            xact, flags = made[0]
            return flags if xact is None or self._xact_committed(cur, xact) else body(cur)

        return self._run(f"enqueue {len(rows)} one-off(s)", body, resolve=resolve)

    def _oneoffs_ended(self: _Host, cur: Any, ended: Sequence[tuple[str, Outcome]]) -> int:
        """Delete the ended one-offs' rows and add the ends to their functions' totals.

        Called in the transaction that ends their slots; ids that are not one-offs'
        (or whose row must stay: a claim left, a next run) are passed over. Returns how
        many rows went.
        """
        outcomes = {job_id: outcome for job_id, outcome in ended if is_oneoff(job_id)}
        if not outcomes:
            return 0
        totals: dict[str, list[int]] = {}
        taken = self._take_rows(cur, _GONE, "id, queue", list(outcomes))
        for job_id, queue in taken:
            add = totals.setdefault(queue, [0, 0, 0])
            for i, n in enumerate(_totals(outcomes[job_id])):
                add[i] += n
        if totals:
            cur.executemany(self._q(_TOTALS), [(q, *n) for q, n in sorted(totals.items())])
        return len(taken)

    def _oneoff_finished(self: _Host, cur: Any, f: Finish) -> bool:
        """Whether the ledger holds ``f``'s entry, a one-off's finish that left its row.

        Asked after a commit of unknown outcome: its row may also have gone with a
        recovery that gave the slot up meanwhile, and the ledger tells which (without
        entries to tell by, the finish is taken as done).
        """
        if f.recorded or self._ledger.keep == 0:
            return True
        c = f.claim
        found = cur.execute(
            self._q(
                "SELECT 1 FROM {ledger} WHERE job_id = ? AND scheduled = ? AND node = ?"
                " AND ended = ? AND outcome = ?"
            ),
            (c.job_id, c.scheduled, c.owner, f.ended, f.outcome),
        ).fetchone()
        return found is not None

    def cancel_oneoff(self: _Host, job_id: str, *, at: float, by: str) -> bool:
        """Cancel a pending one-off: its row goes, with a ``cancelled`` ledger entry.

        Returns:
            False if no such one-off is pending (it never was, it ended, or a node is
            running it now: a run that started is not stopped).

        """
        job_id = check_job_id(job_id)
        took: list[Any] = []  # the transaction of the last attempt that took the row

        def body(cur: Any) -> bool:
            took.clear()
            # The row locked first: a claim of it committing meanwhile is then seen by
            # the delete's own read (PostgreSQL reads each statement anew), not missed.
            cur.execute(self._q("SELECT 1 FROM {jobs} WHERE id = ?{lock}"), (job_id,))
            taken = self._take_rows(cur, _CANCEL, "queue, next_run", [job_id])
            if not taken:
                return False
            row = taken[0]
            took.append(self._xact(cur))
            queue, due = row
            self._ledger.write(
                cur,
                [(job_id, at if due is None else due, "cancelled", 1, "manual", None, None,
                  at, by, 1, "cancelled before it ran", None, at)],
            )  # fmt: skip
            cur.execute(self._q(_TOTALS), (queue, 0, 0, 1))
            return True

        def resolve(cur: Any) -> bool:
            # A cut commit: if it went through, the row is gone and this cancel did it.
            if took and (took[0] is None or self._xact_committed(cur, took[0])):
                return True
            return body(cur)

        return bool(self._run(f"cancel one-off {job_id!r}", body, resolve=resolve))

    def oneoff_counts(self: _Host) -> list[OneOffCounts]:
        """Every function's one-offs: pending and running now, and their ends' totals."""

        def body(cur: Any) -> list[OneOffCounts]:
            now: dict[str, list[int]] = {}
            for queue, n in cur.execute(
                self._q("SELECT queue, COUNT(*) FROM {jobs} WHERE queue IS NOT NULL GROUP BY queue")
            ).fetchall():
                now[queue] = [int(n), 0]
            for queue, n in cur.execute(
                self._q(
                    "SELECT j.queue, COUNT(DISTINCT j.id) FROM {claims} c JOIN {jobs} j"
                    " ON j.id = c.job_id WHERE j.queue IS NOT NULL AND c.owner <> ''"
                    " GROUP BY j.queue"
                )
            ).fetchall():
                now.setdefault(queue, [0, 0])[1] = int(n)
            ends = {
                q: (int(d), int(f), int(x))
                for q, d, f, x in cur.execute(
                    self._q("SELECT queue, done, failed, dropped FROM {queues}")
                ).fetchall()
            }
            out = []
            for queue in sorted(now.keys() | ends.keys()):
                total, running = now.get(queue, [0, 0])
                out.append(
                    OneOffCounts(queue, total - running, running, *ends.get(queue, (0, 0, 0)))
                )
            return out

        result: list[OneOffCounts] = self._run("count the one-offs", body, write=False)
        return result

    def oneoff_window(
        self: _Host, since: float, until: float, *, rows: int = WINDOW_ROWS
    ) -> OneOffWindow:
        """The one-offs' ledger entries recorded in ``[since, until)``; bounded work.

        The window's first and last entries are found by bisecting ``seq`` (its order is
        the order entries were recorded): a few dozen primary-key seeks. A window of more
        than ``rows`` entries is read as `_CHUNKS` evenly spaced runs of consecutive
        entries, so at most ``rows`` rows are read however many it holds. Also counts the
        pending one-offs due before ``since`` and reads the due times of those due in the
        window (at most ``rows``).

        Raises:
            ValueError: ``rows`` is not an int >= 1, or ``until`` is not after ``since``.

        """
        if isinstance(rows, bool) or not isinstance(rows, int) or rows < 1:
            raise ValueError(f"rows must be an int >= 1, got {rows!r}")
        if not until > since:
            raise ValueError(f"until must be after since, got since={since!r}, until={until!r}")

        def body(cur: Any) -> OneOffWindow:
            lo, hi = _seek(self, cur, since), _seek(self, cur, until)
            size = hi - lo
            spans = [(lo, size)] if size <= rows else _chunks(lo, size, rows)
            entries, read = [], 0
            for start, count in spans:
                got = cur.execute(
                    self._q(
                        "SELECT job_id, scheduled, started, ended, outcome FROM {ledger}"
                        " WHERE seq >= ? AND seq < ? ORDER BY seq LIMIT ?"
                    ),
                    (start, hi, min(count, rows - read)),
                ).fetchall()
                read += len(got)
                weight = (size / len(spans)) / len(got) if size > rows and got else 1.0
                entries += [(s, b, e, o, weight) for j, s, b, e, o in got if is_oneoff(j)]
            pending = "FROM {jobs} WHERE queue IS NOT NULL AND next_run IS NOT NULL AND next_run"
            before = cur.execute(self._q(f"SELECT COUNT(*) {pending} < ?"), (since,)).fetchone()
            due = cur.execute(
                self._q(
                    f"SELECT next_run {pending} >= ? AND next_run < ? ORDER BY next_run LIMIT ?"
                ),
                (since, until, rows),
            ).fetchall()
            return OneOffWindow(entries, int(before[0]), [d for (d,) in due], read, size > rows)

        result: OneOffWindow = self._run("read the one-offs' window", body, write=False)
        return result


def _seek(host: _Host, cur: Any, at: float) -> int:
    """The seq of the first ledger entry recorded at or after ``at`` (one past the last: none)."""
    # Two subqueries: each an index's end (SQLite scans for MIN and MAX in one).
    first, last = cur.execute(
        host._q("SELECT (SELECT MIN(seq) FROM {ledger}), (SELECT MAX(seq) FROM {ledger})")
    ).fetchone()
    if first is None:
        return 0
    lo, hi = int(first), int(last) + 1
    step = host._q("SELECT seq, recorded FROM {ledger} WHERE seq >= ? ORDER BY seq LIMIT 1")
    while lo < hi:  # the first seq whose entry (or the next one after it) is at or after
        mid = (lo + hi) // 2
        seq, recorded = cur.execute(step, (mid,)).fetchone()
        if recorded < at:
            lo = int(seq) + 1
        else:
            hi = mid
    return lo


def _chunks(lo: int, size: int, rows: int) -> list[tuple[int, int]]:
    """``(first seq, rows)`` of `_CHUNKS` runs spread evenly over ``size`` seqs from ``lo``.

    Each run sits in the middle of its share of the window, so that the window's edges
    are read as its middle is.
    """
    n = min(_CHUNKS, rows)
    per = rows // n
    return [(lo + max(0, size * (2 * k + 1) // (2 * n) - per // 2), per) for k in range(n)]
