"""Delayed jobs: one-offs that app code enqueues, on a durable scheduler.

`Enqueuing` gives `DurableScheduler` ``enqueue``, ``enqueue_many``, ``cancel`` and
``oneoffs``. Each one-off becomes a `JobSpec` with an `At` schedule (so every check of a
job's fields is `JobSpec`'s own, and the run is any job's run: retries, time limit,
pool, grace and ``missed``, isolation), encoded here and inserted by the store in one
statement per batch (`tickwork.stores.contract.OneOffQueue`). Given ``connection=``, the
same insert runs on the app's own PostgreSQL connection, inside its transaction: a
rollback leaves no trace, a commit announces the one-offs to every node.
"""

from __future__ import annotations

import math
import re
import secrets
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

from tickwork._core.scheduler import _is_coroutine_function, misfit
from tickwork._core.schedules import At, Duration, duration_arg
from tickwork.stores import JobSpec, JobSpecError, Store
from tickwork.stores.contract import (
    ONEOFF_MARK,
    OneOffCounts,
    OneOffForm,
    OneOffQueue,
    OneOffRow,
    check_job_id,
    created_flags,
    resolve_func,
)

__all__ = ["Enqueued", "Enqueuing", "OneOff", "enqueue_paths", "instant", "oneoff_id"]

#: The options of `JobSpec` that mean something for a single run.
RUN_OPTIONS: Final = frozenset(
    {
        "retries",
        "retry_backoff",
        "retry_backoff_max",
        "timeout",
        "kill_grace",
        "isolation",
        "pool",
        "grace",
        "missed",
        "delivery",
    }
)
#: A keyed one-off's id is this and its key.
KEYED: Final = ONEOFF_MARK + "key:"
_MAX_KEY: Final = 190  # "~key:" and the key: a job id of at most 200 characters
_PATH: Final = re.compile(r"[\w.]+:[\w.]+")


def instant(name: str, value: object) -> float:
    """POSIX seconds from an aware datetime or a finite number; naive datetimes refused."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError(f"{name} must be an aware datetime or POSIX seconds, got {value!r}")
        return value.timestamp()
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise TypeError(f"{name} must be an aware datetime or POSIX seconds, got {value!r}")
    return float(value)


def _func_path(func: object) -> str:
    """The import path of ``func`` (a module-level function, or its path as text)."""
    if isinstance(func, str):
        return func
    path = f"{getattr(func, '__module__', '')}:{getattr(func, '__qualname__', '')}"
    if not callable(func) or not _PATH.fullmatch(path) or path.startswith("__main__:"):
        raise TypeError(
            "func must be a module-level function (other processes import it by its path)"
            f" or its import path 'package.module:function', got {func!r}"
        )
    return path


def _key(key: object) -> str | None:
    return None if key is None else check_job_id(key, "key", _MAX_KEY)


@dataclass(frozen=True, slots=True)
class OneOff:
    """One delayed job, for `DurableScheduler.enqueue_many` (``enqueue`` takes the same).

    Args:
        func: The function to call: a module-level function, or its import path
            ``"package.module:function"``. Every node that runs it must allow it (it
            enqueued it itself, or lists its module in ``allowed_modules``).
        args: Positional arguments, JSON values.
        kwargs: Keyword arguments, JSON values.
        at: When to run: an aware `datetime` or POSIX seconds. At most one of ``at``
            and ``delay``; neither: now.
        delay: Seconds from now (a number, a `timedelta` or text such as ``"3d"``).
        key: Makes the enqueue idempotent: while a one-off with this key is pending or
            running, enqueueing the key again adds nothing (and returns the one that
            exists). Its id is ``"~key:"`` and the key.
        options: A run's options, as `JobSpec` takes them: ``retries``,
            ``retry_backoff``, ``retry_backoff_max``, ``timeout``, ``kill_grace``,
            ``isolation``, ``pool``, ``grace``, ``missed``, ``delivery``.

    Raises:
        TypeError: ``func`` is neither a module-level function nor an import path.
        ValueError: A bad ``key``, ``at``/``delay`` both given, or an unknown option;
            the message names it and shows the value.

    """

    func: str | Callable[..., object]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    at: float | datetime | None = None
    delay: Duration | None = None
    key: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "func", _func_path(self.func))
        _key(self.key)
        if self.at is not None and self.delay is not None:
            raise ValueError(
                f"give at or delay, not both: got at={self.at!r} and delay={self.delay!r}"
            )
        unknown = sorted(set(self.options) - RUN_OPTIONS) if self.options else None
        if unknown:
            raise ValueError(
                f"unknown option(s) {', '.join(unknown)}: a one-off takes"
                f" {', '.join(sorted(RUN_OPTIONS))}"
            )

    def due(self, now: float) -> float:
        """When it is due, for an enqueue at ``now``."""
        if self.at is not None:
            return instant("at", self.at)
        if self.delay is not None:
            return now + duration_arg("delay", self.delay, positive=False)
        return now


@dataclass(frozen=True, slots=True)
class Enqueued:
    """What an enqueue did: the one-off's id, and whether this call added it."""

    id: str
    """Its job id: ``"~"`` and 28 hex digits, or ``"~key:"`` and its key. `cancel` and
    `DurableScheduler.get` take it; its ledger entry is under it."""
    run_at: float
    """When it is due (UTC POSIX seconds): as asked, even when the key existed."""
    created: bool = True
    """False when its key was pending already: nothing was added."""
    key: str | None = None
    """The key it was enqueued with."""


class _Host(Protocol):
    """What `Enqueuing` uses of its `DurableScheduler`."""

    _store: Store
    _enqueues: Combiner

    def _allow(self, func: str) -> None: ...
    def _poke(self) -> None: ...
    def now(self) -> float: ...
    @property
    def _awaits(self) -> bool: ...


class Enqueuing:
    """`DurableScheduler`'s delayed jobs (see the module's docstring)."""

    def enqueue(
        self: _Host,
        /,
        func: str | Callable[..., object],
        *args: Any,
        at: float | datetime | None = None,
        delay: Duration | None = None,
        key: str | None = None,
        kwargs: Mapping[str, Any] | None = None,
        connection: object = None,
        **options: Any,
    ) -> Enqueued:
        """Run ``func(*args, **kwargs)`` once, at ``at`` or after ``delay`` (else now).

        ``enqueue(send_reminder, user.id, delay="3d", key=f"remind:{user.id}")``. The
        arguments are those of `OneOff`; ``options`` are a run's (``retries=3``,
        ``timeout=30``, ``pool="mail"``, ...). Durable when it returns (written in the
        store's own transaction), or, with ``connection``, when the app's commits.

        Args:
            func: A module-level function or its import path.
            *args: Its positional arguments (JSON values).
            at: When (aware datetime or POSIX seconds).
            delay: Or how long from now.
            key: Idempotency key: see `OneOff`.
            kwargs: Its keyword arguments (JSON values).
            connection: Enqueue inside the app's open transaction on PostgreSQL: a
                psycopg connection or cursor, a SQLAlchemy ``Session`` or
                ``Connection``, or Django's ``connection`` (inside
                ``transaction.atomic()``). It must reach the store's database (and,
                for a store without ``schema=``, find its tables on its
                ``search_path``). The one-off exists only if that transaction commits.
            **options: The run's options (`OneOff`).

        Returns:
            `Enqueued`: its id, when it is due, and whether it was added.

        Raises:
            TypeError, ValueError, JobSpecError: A bad argument (nothing is stored):
                ``connection`` of a kind not listed above or to another database is a
                `TypeError` naming its type; any ``connection`` on a SQLite store a
                `ValueError`.
            StoreError: The store failed (nothing is stored).

        """
        item = OneOff(func, args, kwargs or {}, at, delay, key, options)
        return Enqueuing.enqueue_many(self, [item], connection=connection)[0]

    def enqueue_many(
        self: _Host, /, items: Iterable[OneOff], *, connection: object = None
    ) -> list[Enqueued]:
        """Enqueue every item in one transaction and one statement (see `enqueue`).

        All or nothing: a bad item raises before anything is written.
        """
        items = _items(items)
        store = _queue(self._store)
        rows = _rows(items, self.now(), awaits=self._awaits)
        if connection is None:
            created = self._enqueues.enqueue(store, rows)
        else:
            try:
                query, params = store.oneoff_statement(rows)
            except ValueError as exc:  # a store that takes no app's connection (SQLite)
                raise ValueError(f"{exc}, got connection={connection!r}") from None
            new = {row[0] for row in _execute_in(connection, query, params)}
            created = created_flags(rows, new)
        for path in {item.func for item in items}:
            self._allow(str(path))
        if connection is None:  # else the app's commit announces them, to this node too
            self._poke()
        return _enqueued(items, rows, created)

    def cancel(self: _Host, ref: Enqueued | str, *, by: str | None = None) -> bool:
        """Cancel a pending one-off, by its `Enqueued`, its id or its key.

        Its row goes and its ledger records ``cancelled``. Returns False when there is
        no such one-off pending: it ended, never was, or a node is running it now (a
        started run is not stopped).
        """
        job_id = oneoff_id(ref)
        store = self._store
        if not isinstance(store, OneOffQueue):
            return False
        from tickwork._durable.control import default_actor

        done = store.cancel_oneoff(job_id, at=self.now(), by=by or default_actor())
        self._poke()
        return done

    def oneoffs(self: _Host) -> list[OneOffCounts]:
        """The one-offs per function: pending, running, and how the ended ones ended."""
        store = self._store
        return store.oneoff_counts() if isinstance(store, OneOffQueue) else []


def oneoff_id(ref: Enqueued | str) -> str:
    """The job id of a one-off named by its `Enqueued`, its id (``~...``) or its key.

    Raises:
        ValueError: ``ref`` is neither an id nor a well-formed key.

    """
    if isinstance(ref, Enqueued):
        return ref.id
    if isinstance(ref, str) and ref.startswith(ONEOFF_MARK):
        return ref
    return KEYED + str(_key(ref))


def enqueue_paths(store: Store, items: Iterable[OneOff], *, now: float) -> list[Enqueued]:
    """Enqueue one-offs by their functions' paths alone, for a producer without the code.

    What ``tickwork enqueue`` and the daemon's ``POST /api/enqueue`` use: every check of
    `DurableScheduler.enqueue_many` but the two that need the function (that it imports,
    and takes these arguments), so a path is checked for its form only and a wrong one
    fails its run on the node. Nothing here is allowed to run: a node runs it only if it
    allows the function (``allowed_modules``). One transaction, all or nothing.

    Args:
        store: The state (a `OneOffQueue`: both shipped stores).
        items: The one-offs (a function given as itself stands for its path).
        now: What "now" is (``at``/``delay`` are from it): UTC POSIX seconds.

    Raises:
        TypeError, ValueError, JobSpecError: A bad item (nothing is stored).
        StoreError: The store failed (nothing is stored).

    """
    items = _items(items)
    rows = _rows(items, now, awaits=None)
    return _enqueued(items, rows, _queue(store).enqueue(rows))


def _items(items: Iterable[OneOff]) -> list[OneOff]:
    items = list(items)
    for i, item in enumerate(items):
        if not isinstance(item, OneOff):
            raise TypeError(f"items[{i}] must be a tickwork.OneOff, got {item!r}")
    return items


# Store classes found to be `OneOffQueue`s (a protocol's check reads every member).
_QUEUES: Final[set[type]] = set()


def _queue(store: Store) -> OneOffQueue:
    if type(store) in _QUEUES:
        return store  # type: ignore[return-value]
    if not isinstance(store, OneOffQueue):
        raise TypeError(f"the store keeps no one-offs (not a OneOffQueue): {store!r}")
    _QUEUES.add(type(store))
    return store


def _enqueued(items: list[OneOff], rows: list[OneOffRow], created: list[bool]) -> list[Enqueued]:
    return [
        Enqueued(r.id, r.run_at, made, item.key)
        for r, made, item in zip(rows, created, items, strict=True)
    ]


class _Waiting:
    """One caller's rows, waiting for the transaction that writes them."""

    __slots__ = ("done", "error", "flags", "lead", "rows")

    def __init__(self, rows: list[OneOffRow]) -> None:
        self.rows = rows
        self.done = threading.Event()
        self.flags: list[bool] = []
        self.error: BaseException | None = None
        #: Woken to write the next transaction (its own rows not written yet).
        self.lead = False


class Combiner:
    """Group commit for enqueues: concurrent callers share one transaction.

    A caller that finds no transaction being written writes one with its rows and
    those of every caller waiting then. Callers that arrive meanwhile wait; when that
    transaction has committed, the writer wakes the first of them to write the next
    one (all the rows waiting by then), and returns. So each caller waits for at most
    the transaction in flight and its own, never for the others' after its own (a
    writer that went on while callers kept coming would not return for as long as
    they came). Each caller returns once its own rows are committed, or raises the
    store's error with nothing of that transaction written. Four producer threads on
    one scheduler so pay one commit per group, not one each.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: list[_Waiting] = []
        self._writing = False

    def enqueue(self, store: OneOffQueue, rows: list[OneOffRow]) -> list[bool]:
        """``store.enqueue(rows)``, sharing a transaction with concurrent callers."""
        mine = _Waiting(rows)
        with self._lock:
            self._waiting.append(mine)
            lead = not self._writing
            self._writing = True
        if not lead:
            mine.done.wait()
        if lead or mine.lead:
            self._write(store)
        if mine.error is not None:
            raise mine.error
        return mine.flags

    def _write(self, store: OneOffQueue) -> None:
        """Write every waiting caller's rows in one transaction; hand on to the next."""
        with self._lock:
            group, self._waiting = self._waiting, []
        try:
            flags = store.enqueue([r for w in group for r in w.rows])
        except BaseException as exc:  # each caller of the group gets it
            for w in group:
                w.error = exc
        else:
            at = 0
            for w in group:
                w.flags, at = flags[at : at + len(w.rows)], at + len(w.rows)
        with self._lock:
            following = self._waiting[0] if self._waiting else None
            if following is None:
                self._writing = False
            else:
                following.lead = True
        for w in group:
            w.done.set()
        if following is not None:
            following.done.set()


def _rows(items: list[OneOff], now: float, *, awaits: bool | None) -> list[OneOffRow]:
    """The items as rows, checked as `JobSpec` values (and their calls by signature).

    Items that share a function and options share one template spec: the options are
    checked once, each item's arguments on their own (`OneOffForm`). ``awaits``:
    whether coroutine functions are awaited where they run; ``None``: the functions are
    not imported (a producer without the code), their paths checked for form only.
    """
    groups: dict[tuple[str, str], list[int]] = {}
    for i, item in enumerate(items):
        options = repr(sorted(item.options.items())) if item.options else ""
        groups.setdefault((str(item.func), options), []).append(i)
    rows: list[OneOffRow | None] = [None] * len(items)
    for (path, options), members in groups.items():
        fn = None if awaits is None else resolve_func(path)  # JobSpecError: path and why
        if fn is not None and not awaits and _is_coroutine_function(fn):
            raise TypeError(
                "func must be a plain function, not a coroutine function (async def),"
                f" on DurableScheduler; use AsyncDurableScheduler, got {path!r}"
            )
        form = _form(path, options, items[members[0]].options, now)
        runs = []
        hexes = secrets.token_hex(8 * len(members))
        stamp = f"{_id_clock(now):012x}"
        for n, i in enumerate(members):
            item = items[i]
            # `misfit` remembers its answer by function and call shape.
            why = None if fn is None else misfit(fn, tuple(item.args), item.kwargs)
            if why is not None:
                raise JobSpecError(
                    f"items[{i}]: func {path!r} cannot be called with args={list(item.args)!r}"
                    f" and kwargs={dict(item.kwargs)!r}: {why}"
                )
            key = item.key
            job_id = (
                ONEOFF_MARK + stamp + hexes[16 * n : 16 * n + 16] if key is None else KEYED + key
            )
            runs.append((job_id, item.due(now), item.args, item.kwargs))
        for i, row in zip(members, form.rows(runs), strict=True):
            rows[i] = row
    return [r for r in rows if r is not None]


def _id_clock(now: float) -> int:
    """The milliseconds that lead a one-off's id: its first 12 of 28 hex digits.

    Ids that grow with time go to the right edge of the primary key's B-tree (and of
    every index that ends in the id), where random ids would touch a page anywhere in
    it: with 150,000 rows pending a SQLite bulk enqueue runs at 2.1x the rate
    (``bench/enqueue_depth.py``). A clock before 1970 or past the year 10889 still
    gives a valid id (the 12 digits wrap).
    """
    return int(now * 1000) % (1 << 48)


# The forms of the templates enqueued lately, by function and options (`_form`).
_FORMS: Final[dict[tuple[str, str], OneOffForm]] = {}


def _form(path: str, key: str, options: Mapping[str, Any], now: float) -> OneOffForm:
    """The stored form of one-offs of ``path`` with ``options`` (``key``: their repr).

    Checked as `JobSpec` checks a job once, then kept: an app enqueues a few functions
    with a few sets of options, again and again. Bounded: cleared when full.
    """
    try:
        return _FORMS[path, key]
    except KeyError:
        form = OneOffForm(JobSpec(ONEOFF_MARK, path, At(now), **options))
    if len(_FORMS) >= 256:
        _FORMS.clear()
    _FORMS[path, key] = form
    return form


#: What ``connection=`` takes, for the error that names what it got.
_CONNECTIONS: Final = (
    "a psycopg connection or cursor, a SQLAlchemy Session or Connection, or Django's"
    " connection, on PostgreSQL"
)


def _execute_in(connection: object, query: str, params: list[Any]) -> list[Any]:
    """Run ``query`` on the app's connection, in its open transaction; its rows.

    Raises:
        TypeError: ``connection`` is none of `_CONNECTIONS` (its type named), or one of
            them on another database, or an async one (not driven from a thread).

    """
    kinds = {c.__module__.partition(".")[0] for c in type(connection).__mro__}
    if "sqlalchemy" in kinds:
        return _in_sqlalchemy(connection, query, params)
    if "django" in kinds:
        database = getattr(connection, "vendor", None)
        if database != "postgresql" or not callable(getattr(connection, "cursor", None)):
            raise _wrong(connection, f"Django's connection to {database!r}")
        with connection.cursor() as cur:  # type: ignore[attr-defined]
            cur.execute(query, params)
            return list(cur.fetchall())
    if "psycopg" in kinds:
        import psycopg
        import psycopg.rows

        if isinstance(connection, psycopg.Cursor):
            connection = connection.connection  # a cursor of its own: the app's keeps its rows
        if isinstance(connection, psycopg.Connection):
            # Tuples, whatever rows the app's connection makes (dict_row, a class, ...).
            with connection.cursor(row_factory=psycopg.rows.tuple_row) as cur:
                return list(cur.execute(query, params).fetchall())
    raise _wrong(connection)


def _in_sqlalchemy(connection: object, query: str, params: list[Any]) -> list[Any]:
    """`_execute_in` on a SQLAlchemy ``Session`` or ``Connection`` (sync, PostgreSQL)."""
    from sqlalchemy.engine import Connection
    from sqlalchemy.orm import Session

    if isinstance(connection, Session):
        connection = connection.connection()  # the Session's transaction, begun if need be
    if not isinstance(connection, Connection):  # an Engine, an AsyncSession, ...
        raise _wrong(connection)
    if connection.dialect.name != "postgresql":
        raise _wrong(connection, f"a SQLAlchemy connection to {connection.dialect.name!r}")
    return list(connection.exec_driver_sql(query, tuple(params)).fetchall())


def _wrong(connection: object, what: str = "") -> TypeError:
    """The error for a ``connection`` this cannot use: ``what`` it is (else its type)."""
    kind = type(connection)
    what = what or f"a {kind.__module__}.{kind.__qualname__}"
    return TypeError(f"connection must be {_CONNECTIONS}, got {what}: {connection!r}")
