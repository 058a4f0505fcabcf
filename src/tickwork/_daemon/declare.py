"""What a jobs file declares: its jobs as durable job specs, and whose they are.

`spec_for` maps a `JobConfig` to the `JobSpec` the daemon declares (its id is
``<namespace>/<name>``, its function the daemon's `ENTRY_POINT`); `fingerprint` names a
job's options; `owned` says whether a stored job is a namespace's; `owner_label` shows a
claim's owner as ``host:pid``. Where the state is and how it is opened:
`tickwork._daemon.state`.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import fields
from typing import TYPE_CHECKING, Any, Final, cast

from tickwork._daemon.jobsfile.config import OUTPUT_LIMIT, JobConfig
from tickwork._daemon.mail import MAIL_COMMAND
from tickwork._durable.chains import upstream_first
from tickwork.stores import JobSpec, JobState, Schedule, Upsert

if TYPE_CHECKING:
    from tickwork._durable.scheduler import DurableScheduler

__all__ = [
    "ENTRY_POINT",
    "declare_file",
    "fingerprint",
    "job_id",
    "owned",
    "owner_label",
    "spec_for",
]

_log = logging.getLogger("tickwork.daemon")

# Stored in every job a jobs file declares: keep it stable. `tickwork._daemon` (the package)
# hands the name to this module, so state written before the folders existed still runs.
ENTRY_POINT: Final = "tickwork._daemon:run_configured_job"
"""The function every daemon job names in the store; the only one the daemon admits."""


# -- the mapping: JobConfig -> JobSpec ----------------------------------------------------


def _plain(value: object) -> Any:
    """``value`` as JSON data, for fingerprints (schedules by their stored form)."""
    if isinstance(value, Schedule):
        return value.to_dict()  # fields at their defaults left out: stable as fields come
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in sorted(value.items())}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


#: Options added after the first release, with their defaults: left out of a job's
#: fingerprint while at their default, so an upgrade changes no fingerprint.
_LATER: Final[dict[str, object]] = {
    "output": "log",
    "on_failure": None,
    "output_limit": OUTPUT_LIMIT,
    "isolation": "thread",
    **dict.fromkeys(
        ("on_success", "keep_ok", "keep_failed", "env_file", "user", "group", "umask"), None
    ),
    **dict.fromkeys(("limit_memory", "limit_cpu", "limit_files"), None),
    **dict.fromkeys(("alert_if_no_success", "alert_if_late", "alert_if_running"), None),
    "alert_if_missed": False,
    "after": (),  # chains
    "pool": None,
    "delivery": "at_most_once",
    "mail_to": (),
    "mail_command": MAIL_COMMAND,
    "smtp": None,
    "at_start": False,
}
_NOT_DEFAULT: Final = object()


def fingerprint(job: JobConfig) -> str:
    """12 hex digits that change whenever any option of ``job`` changes.

    Stored in the job's kwargs, so a changed job is an ``UPDATED`` declaration and a
    host running an older file can tell (it logs a warning and runs its own version).
    """
    data = {
        f.name: _plain(getattr(job, f.name))
        for f in fields(job)
        if f.name != "line" and _LATER.get(f.name, _NOT_DEFAULT) != getattr(job, f.name)
    }
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def job_id(namespace: str, name: str) -> str:
    """The store id of job ``name``: ``<namespace>/<name>``."""
    return f"{namespace}/{name}"


def spec_for(
    job: JobConfig, *, namespace: str, now: float, stored: JobState | None = None
) -> JobSpec:
    """The durable declaration of one job of the file.

    Args:
        job: The job.
        namespace: The daemon's namespace (the id prefix).
        now: UTC POSIX seconds; an ``in`` one-shot is due ``now + delay``...
        stored: ...unless the store holds this same job (same fingerprint) already:
            then its stored instant is kept, so a restart never re-runs a one-shot.

    Returns:
        The spec to `DurableScheduler.declare`.
    """
    fp = fingerprint(job)
    s = job.schedule
    # Chains: a job that runs only after others has none. Else the file's values are the
    # stored ones (jitter and until included), but an "in" one-shot becomes its instant,
    # or the one stored for this same job. (`declared` gives one of the stored kinds.)
    schedule = None if s is None else cast("Schedule", s.declared(now))
    if (
        schedule is not s
        and stored is not None
        and stored.spec.kwargs.get("fingerprint") == fp
        and type(stored.spec.schedule) is type(schedule)
    ):
        schedule = stored.spec.schedule
    return JobSpec(
        job_id(namespace, job.name),
        ENTRY_POINT,
        schedule,
        kwargs={"job": job.name, "fingerprint": fp},
        # "replace" is the daemon's: the store queues the slot that comes due while a
        # run goes on, and the daemon ends that run so the queued one starts.
        overlap="queue" if job.overlap == "replace" else job.overlap,
        missed=job.missed,
        grace=job.grace,
        pool=job.pool,
        delivery=job.delivery,
        paused=not job.enabled,
        # Chains: the file's names become the state's job ids.
        after=tuple((job_id(namespace, name), on) for name, on in job.after),
    )


def declare_file(
    scheduler: DurableScheduler,
    jobs: Sequence[JobConfig],
    *,
    namespace: str,
    now: float,
    stored: Mapping[str, JobState],
) -> list[tuple[JobConfig, Upsert | Exception]]:
    """Declare a file's jobs (`spec_for` each) on ``scheduler``, in one transaction.

    Each job goes after its upstream jobs (chains: the library checks that they exist).
    When the batch fails (the store refused it), each job is declared on its own and
    says for itself. ``stored``: the namespace's jobs in the store, by id.

    Returns:
        Each job, upstream first, with what its declaration did or what refused it.
    """
    specs = {
        job.name: spec_for(job, namespace=namespace, now=now, stored=stored.get(jid))
        for job in jobs
        for jid in [job_id(namespace, job.name)]
    }
    ordered = list(upstream_first(jobs, lambda j: j.name, lambda j: (u for u, _ in j.after)))
    batch = [specs[job.name] for job in ordered]
    results: list[Upsert | Exception]
    try:
        results = list(scheduler.declare_many(batch))
    except Exception as exc:  # the store failed: each job says for itself
        _log.warning("declaring %d jobs at once failed (%s): one by one", len(batch), exc)
        results = []
        for spec in batch:
            try:
                results.append(scheduler.declare(spec))
            except Exception as refused:
                results.append(refused)
    return list(zip(ordered, results, strict=True))


def owned(state: JobState, namespace: str) -> bool:
    """Whether a stored job belongs to the daemon of ``namespace``."""
    return state.spec.func == ENTRY_POINT and state.id.startswith(namespace + "/")


def owner_label(owner: str) -> str:
    """A claim's owner as ``host:pid`` (the durable scheduler adds a random suffix)."""
    host, _, rest = owner.partition(":")
    pid = rest.partition(":")[0]
    return f"{host}:{pid}" if pid else owner
