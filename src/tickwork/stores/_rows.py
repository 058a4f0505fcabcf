"""Reading stored rows back into records: shared by every SQL store.

Both stores keep the same columns (a job row: id, spec, paused, next run and the last
run; a claim row: token, job id, owner, scheduled, claimed at, lease end, started,
retry), so turning rows into `JobState` and `Claim` values is written once, here.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ._errors import StoreError
from ._model import Claim, JobSpec, JobState, LastRun, spec_from_json

_log = logging.getLogger("tickwork.stores")


class RowReader:
    """Mixin: decode specs (warning once per unreadable row) and build records."""

    _warned: set[tuple[str, str]]

    def _decode(self, job_id: str, text: str, *, strict: bool) -> JobSpec | None:
        """Decode a stored spec; unreadable ones raise (strict) or are logged once."""
        try:
            return spec_from_json(text)
        except StoreError as exc:
            if strict:
                raise
            if (job_id, text) not in self._warned:
                self._warned.add((job_id, text))
                _log.warning("skipping job %r: %s", job_id, exc)
            return None

    @staticmethod
    def _claim(row: Sequence[Any], spec: JobSpec) -> Claim:
        token, job_id, owner, scheduled, claimed_at, lease_until, started, retry = row
        return Claim(
            token, job_id, owner, scheduled, claimed_at, lease_until, started, spec, bool(retry)
        )

    def _state(
        self, row: Sequence[Any], spec: JobSpec, claims: Sequence[Sequence[Any]]
    ) -> JobState:
        _, _, paused, next_run, l_sched, l_start, l_end, l_outcome, l_error = row
        last = None
        if l_outcome is not None:
            last = LastRun(l_sched, l_start, l_end, l_outcome, l_error)
        return JobState(
            spec=spec,
            next_run=next_run,
            paused=bool(paused),
            last_run=last,
            claims=tuple(self._claim(c, spec) for c in claims),
        )
