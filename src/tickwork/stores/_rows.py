"""Reading stored rows back into records: shared by every SQL store.

Both stores keep the same columns (a job row: id, spec, paused, next run, the last
run, the runtime pause, the first slot and the slot held for a pool; a claim row:
token, job id, owner, scheduled, claimed at, lease end, started, retry, origin), so
turning rows into `JobState` and `Claim` values is written once, here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, Final

from tickwork.stores._errors import StoreError

from ._codec import spec_from_json
from ._jobspec import JobSpec
from ._records import Claim, JobState, LastRun, PauseNote

_log = logging.getLogger("tickwork.stores")

#: Decoded specs kept per store, by their stored text (a recurring job's spec is read
#: at every claim; the text is the whole spec, so equal text is an equal spec).
SPEC_CACHE: Final = 1024


class RowReader:
    """Mixin: decode specs (warning once per unreadable row) and build records."""

    _warned: set[tuple[str, str]]
    _specs: dict[str, JobSpec]

    def _decode(self, job_id: str, text: str, *, strict: bool) -> JobSpec | None:
        """Decode a stored spec; unreadable ones raise (strict) or are logged once."""
        specs = self._specs
        spec = specs.get(text)
        if spec is not None:
            return spec
        try:
            spec = spec_from_json(text)
        except StoreError as exc:
            if strict:
                raise
            if (job_id, text) not in self._warned:
                self._warned.add((job_id, text))
                _log.warning("skipping job %r: %s", job_id, exc)
            return None
        if len(specs) >= SPEC_CACHE:
            specs.clear()  # bounded; refilled by the jobs read from now on
        specs[text] = spec
        return spec

    @staticmethod
    def _claim(row: Sequence[Any], spec: JobSpec) -> Claim:
        token, job_id, owner, scheduled, claimed_at, lease_until, started, retry, origin = row
        return Claim(
            token,
            job_id,
            owner,
            scheduled,
            claimed_at,
            lease_until,
            started,
            spec,
            bool(retry),
            origin,
        )

    def _state(
        self, row: Sequence[Any], spec: JobSpec, claims: Sequence[Sequence[Any]]
    ) -> JobState:
        _, _, paused, next_run, l_sched, l_start, l_end, l_outcome, l_error, control = row[:10]
        last = None
        if l_outcome is not None:
            last = LastRun(l_sched, l_start, l_end, l_outcome, l_error)
        return JobState(
            spec=spec,
            next_run=next_run,
            paused=bool(paused),
            last_run=last,
            claims=tuple(self._claim(c, spec) for c in claims),
            pause=PauseNote.from_json(control) if control else None,
            first_slot=row[10],
            # The mark counts only for the slot it was written for (moving on clears it).
            pool_wait=next_run if row[11] is not None and row[11] == next_run else None,
        )
