"""Declaring jobs in the SQL stores: one by one (`Store.upsert`) or a program's at once.

A program (or a jobs file) declares every job at each start, and nearly all of them are
unchanged. `DeclareMixin.upsert_many` reads the stored declarations of a batch with one
statement per thousand ids and writes only the jobs that are new or changed, all in one
transaction: a restart with 100,000 unchanged jobs is a hundred reads, not a hundred
thousand transactions. The new jobs go in set-based (`DeclareMixin._insert_declared`:
one ``executemany`` on SQLite, one statement on PostgreSQL), their
edges (chains) after them and one announcement for the batch; a changed job is
written as `upsert` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Final, Protocol, runtime_checkable

from ._chains import ChainQueries
from ._checks import check_optional_time, check_spec
from ._codec import schedule_json, spec_to_json
from ._errors import JobSpecError, SchemaVersionError
from ._jobspec import SPEC_VERSION, JobSpec
from ._oneoffs import ONEOFF_MARK, is_oneoff
from ._records import Upsert
from ._sqlbase import SQLHost

__all__ = ["NEW_COLUMNS", "BatchDeclare", "DeclareMixin"]

_READ_AT_ONCE: Final = 1000  # ids per read of the stored declarations
#: The columns of a new job's row, in the order of `_new_row`.
NEW_COLUMNS: Final = "id, spec, schedule, overlap, paused, next_run, first_slot"


def _declared_paused(job_id: str, old_text: str) -> object:
    """``paused`` of a stored declaration; refuses to overwrite a newer version's."""
    try:
        old = json.loads(old_text)
    except ValueError:
        return None  # unreadable: the new declaration repairs the row
    if not isinstance(old, dict):
        return None
    version = old.get("v")
    if isinstance(version, int) and version > SPEC_VERSION:
        raise SchemaVersionError(
            f"job {job_id!r} was stored by a newer tickwork (spec version {version});"
            " refusing to overwrite it"
        )
    return old.get("paused")


def _declarable(spec: object, next_run: object) -> tuple[JobSpec, float | None]:
    spec = check_spec(spec)
    if is_oneoff(spec.id):
        raise JobSpecError(
            f"a declared job's id must not start with {ONEOFF_MARK!r} (a one-off's"
            f" mark), got {spec.id!r}"
        )
    return spec, check_optional_time("next_run", next_run)


@runtime_checkable
class BatchDeclare(Protocol):
    """A store that declares many jobs in one transaction (both shipped stores)."""

    def upsert_many(self, items: Sequence[tuple[JobSpec, float | None]]) -> list[Upsert]:
        """Declare each ``(spec, next_run)`` as `Store.upsert` would, in one transaction."""
        ...


def _new_row(spec: JobSpec, next_run: float | None, text: str) -> tuple[Any, ...]:
    """A new job's row: the values of `NEW_COLUMNS`."""
    return (spec.id, text, schedule_json(spec), spec.overlap, spec.paused, next_run, next_run)


class _Host(SQLHost[Any], Protocol):
    """What `DeclareMixin` uses of its `SQLStore` beside `SQLHost`."""

    @property
    def _chains(self) -> ChainQueries[Any]:
        """The store's chains (a job's ``after=`` edges)."""
        ...

    def _upsert_in(self, cur: Any, spec: JobSpec, next_run: float | None, text: str) -> Upsert:
        """Declare one job in ``cur``'s transaction."""
        ...

    def _insert_declared(self, cur: Any, rows: Sequence[tuple[Any, ...]]) -> set[str]:
        """Insert new jobs' rows (`NEW_COLUMNS`) unless their ids exist; the ids inserted."""
        ...

    def _created(self, cur: Any, specs: Sequence[JobSpec]) -> None:
        """What creating ``specs`` writes beside their rows (their edges, one announcement)."""
        ...


class DeclareMixin:
    """`Store.upsert` for `SQLStore`, and `upsert_many`, its batch."""

    def upsert(self: _Host, spec: JobSpec, next_run: float | None) -> Upsert:
        """Declare a job, idempotently by id (see `tickwork.stores.Store.upsert`).

        Raises:
            SchemaVersionError: The stored declaration was written by a newer tickwork
                (it is not overwritten).
            JobSpecError: Its id is a one-off's (starts with ``~``).

        """
        spec, next_run = _declarable(spec, next_run)
        text = spec_to_json(spec)
        intended: list[Upsert] = []

        def body(cur: Any) -> Upsert:
            result = self._upsert_in(cur, spec, next_run, text)
            if result is not Upsert.UNCHANGED:
                intended.append(result)
            return result

        def resolve(cur: Any) -> Upsert:
            # Our write may have committed: then the row holds our declaration already.
            result = body(cur)
            return intended[0] if result is Upsert.UNCHANGED and intended else result

        result: Upsert = self._run(f"upsert job {spec.id!r}", body, resolve=resolve)
        return result

    def upsert_many(self: _Host, items: Sequence[tuple[JobSpec, float | None]]) -> list[Upsert]:
        """Declare many jobs in one transaction, each as `upsert` would.

        ``items``: ``(spec, next_run)`` pairs, distinct ids. The stored declarations are
        read a thousand at a time; only new or changed jobs are written.

        Raises:
            ValueError: Two items have one id.
            SchemaVersionError, JobSpecError: As for `upsert` (nothing is written).

        """
        checked = [_declarable(spec, next_run) for spec, next_run in items]
        ids = [spec.id for spec, _ in checked]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"items must have distinct ids, got {twice[0]!r} twice")
        texts = [spec_to_json(spec) for spec, _ in checked]
        intended: dict[str, Upsert] = {}

        def body(cur: Any) -> list[Upsert]:
            stored: dict[str, str] = {}
            for at in range(0, len(ids), _READ_AT_ONCE):
                query, params = self._q_list(
                    "SELECT id, spec FROM {jobs} WHERE id {any}", ids[at : at + _READ_AT_ONCE]
                )
                stored.update((r[0], r[1]) for r in cur.execute(query, params).fetchall())
            new = [i for i, (spec, _) in enumerate(checked) if spec.id not in stored]
            rows = [_new_row(*checked[i], texts[i]) for i in new]
            made = self._insert_declared(cur, rows) if rows else set()
            self._created(cur, [checked[i][0] for i in new if checked[i][0].id in made])
            out = []
            for (spec, next_run), text in zip(checked, texts, strict=True):
                if spec.id in made:
                    result = Upsert.CREATED
                elif stored.get(spec.id) == text:
                    result = Upsert.UNCHANGED
                else:  # changed, or inserted by another transaction since the read
                    result = self._upsert_in(cur, spec, next_run, text)
                if result is not Upsert.UNCHANGED:
                    intended[spec.id] = result
                out.append(intended.get(spec.id, result))
            return out

        done: list[Upsert] = self._run(f"upsert {len(ids)} jobs", body)
        return done

    def _insert_declared(self: _Host, cur: Any, rows: Sequence[tuple[Any, ...]]) -> set[str]:
        """Insert new jobs' rows (`NEW_COLUMNS`) unless their ids exist; the ids inserted.

        One ``executemany`` (where a write transaction excludes the others, as SQLite's,
        no id can appear since the caller's read); a dialect may do it in one statement.
        """
        query = self._q(f"INSERT INTO {{jobs}} ({NEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)")
        if len(rows) == 1:  # the rowcount tells whether the row went in
            inserted = cur.execute(query + self._q("{if_absent}"), rows[0]).rowcount
            return {rows[0][0]} if inserted == 1 else set()
        cur.executemany(query, rows)
        return {r[0] for r in rows}

    def _created(self: _Host, cur: Any, specs: Sequence[JobSpec]) -> None:
        """After ``specs``' rows went in: their edges (chains), one announcement."""
        for spec in specs:
            if spec.after:  # a new job has no edges yet (they go with its row)
                self._chains.declared(cur, spec)
        if specs:
            self._changed(cur, specs[0].id)  # one announcement for the batch

    def _upsert_in(
        self: _Host, cur: Any, spec: JobSpec, next_run: float | None, text: str
    ) -> Upsert:
        """Declare ``spec`` (stored as ``text``) in ``cur``'s transaction, its row locked."""
        schedule = schedule_json(spec)
        select = self._q("SELECT spec, schedule, paused FROM {jobs} WHERE id = ?{lock}")
        row = cur.execute(select, (spec.id,)).fetchone()
        if row is None:
            if self._insert_declared(cur, [_new_row(spec, next_run, text)]):
                self._created(cur, [spec])
                return Upsert.CREATED
            # Inserted by another transaction since the select (where that can be).
            row = cur.execute(select, (spec.id,)).fetchone()
            assert row is not None  # nothing deletes it under our lock
        old_text, old_schedule, paused = row
        if old_text == text:
            return Upsert.UNCHANGED
        if _declared_paused(spec.id, old_text) != spec.paused:
            # The declaration's pause changed: it wins over one made at run time.
            paused = spec.paused
            cur.execute(
                self._q("UPDATE {jobs} SET control = NULL, paused_until = NULL WHERE id = ?"),
                (spec.id,),
            )
        if old_schedule == schedule:
            cur.execute(
                self._q("UPDATE {jobs} SET spec = ?, overlap = ?, paused = ? WHERE id = ?"),
                (text, spec.overlap, paused, spec.id),
            )
        else:
            cur.execute(
                self._q(
                    "UPDATE {jobs} SET spec = ?, schedule = ?, overlap = ?, paused = ?,"
                    " next_run = ? WHERE id = ?"
                ),
                (text, schedule, spec.overlap, paused, next_run, spec.id),
            )
        self._chains.declared(cur, spec)  # chains: the job's after= edges
        self._changed(cur, spec.id)
        return Upsert.UPDATED
