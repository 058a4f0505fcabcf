"""Model-based test: random schedule / cancel / advance / run_pending sequences.

The model below is deliberately naive (a dict of tasks, a sorted snapshot per call),
so that it is obviously right; the real scheduler must agree with it on every return
value, the run order, ``errors``, ``next_run_in()`` and its own ``_check()``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from tickwork import Scheduler
from tickwork.testing import FakeClock

# What a job does when it runs: (kind, argument). Kinds:
#   "log"      append its own id to the log
#   "fail"     raise RuntimeError
#   "cancel"   cancel task <argument> and log the result
#   "selfstop" cancel itself
#   "spawn"    schedule a new one-shot "log" task with delay <argument>
#   "slow"     take <argument> seconds (advances the clock), then log
Action = tuple[str, float]

actions = st.one_of(
    st.just(("log", 0.0)),
    st.just(("fail", 0.0)),
    st.tuples(st.just("cancel"), st.integers(1, 30).map(float)),
    st.just(("selfstop", 0.0)),
    st.tuples(st.just("spawn"), st.sampled_from([0.0, 0.5, 1.0, 3.0])),
    st.tuples(st.just("slow"), st.sampled_from([0.25, 1.0, 4.0])),
)
delays = st.sampled_from([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 7.0])
intervals = st.one_of(st.none(), st.sampled_from([0.5, 1.0, 2.0, 3.0]))


@dataclass
class ModelTask:
    due: float
    interval: float | None
    fixed_delay: bool
    action: Action


class Model:
    """The contract, written the obvious way."""

    def __init__(self) -> None:
        self.now = 0.0
        self.tasks: dict[int, ModelTask] = {}
        self.next_id = 1
        self.errors: list[str] = []
        self.log: list[str] = []
        self.in_call = False

    def schedule(
        self, delay: float, interval: float | None, fixed_delay: bool, action: Action
    ) -> int:
        tid = self.next_id
        self.next_id += 1
        self.tasks[tid] = ModelTask(self.now + delay, interval, fixed_delay, action)
        return tid

    def cancel(self, tid: int) -> bool:
        return self.tasks.pop(tid, None) is not None

    def next_run_in(self) -> float | None:
        if not self.tasks:
            return None
        return max(0.0, min(t.due for t in self.tasks.values()) - self.now)

    def run_pending(self) -> int:
        now = self.now
        due = sorted((t.due, tid) for tid, t in self.tasks.items() if t.due <= now)
        ran = 0
        for _, tid in due:
            task = self.tasks.get(tid)
            if task is None:
                continue  # cancelled earlier in this call
            ran += 1
            if task.interval is None:
                del self.tasks[tid]
            try:
                perform(task.action, tid, self.log, self.cancel, self.schedule_log, self.advance)
            except RuntimeError as exc:
                self.errors.append(f"task {tid}: {exc}")
            if task.interval is not None and tid in self.tasks:
                if task.fixed_delay:
                    task.due = self.now + task.interval
                else:
                    nxt = task.due + task.interval
                    task.due = nxt if nxt > now else now + task.interval
        return ran

    def schedule_log(self, delay: float) -> int:
        return self.schedule(delay, None, False, ("log", 0.0))

    def advance(self, dt: float) -> None:
        self.now += dt


def perform(
    action: Action,
    tid: int,
    log: list[str],
    cancel: Callable[[int], bool],
    schedule_log: Callable[[float], int],
    advance: Callable[[float], Any],
) -> None:
    kind, arg = action
    if kind == "log":
        log.append(f"{tid}")
    elif kind == "fail":
        log.append(f"{tid}!")
        raise RuntimeError(f"boom {tid}")
    elif kind == "cancel":
        log.append(f"{tid} cancel {int(arg)} -> {cancel(int(arg))}")
    elif kind == "selfstop":
        log.append(f"{tid} selfstop -> {cancel(tid)}")
    elif kind == "spawn":
        log.append(f"{tid} spawned {schedule_log(arg)}")
    elif kind == "slow":
        advance(arg)
        log.append(f"{tid} slow")
    else:  # pragma: no cover
        raise AssertionError(kind)


class SchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.real = Scheduler(self.clock, max_errors=None)
        self.model = Model()
        self.real_log: list[str] = []

    def _job(self, action: Action) -> Callable[[], None]:
        box: list[int] = []

        def run() -> None:
            perform(
                action,
                box[0],
                self.real_log,
                self.real.cancel,
                self._schedule_log,
                self.clock.advance,
            )

        run.box = box  # type: ignore[attr-defined]
        return run

    def _schedule_log(self, delay: float) -> int:
        job = self._job(("log", 0.0))
        tid = self.real.schedule(delay, job)
        job.box.append(tid)  # type: ignore[attr-defined]
        return tid

    @rule(delay=delays, interval=intervals, fixed=st.booleans(), action=actions)
    def schedule(self, delay: float, interval: float | None, fixed: bool, action: Action) -> None:
        fixed = fixed and interval is not None
        job = self._job(action)
        tid = self.real.schedule(delay, job, interval, fixed_delay=fixed)
        job.box.append(tid)  # type: ignore[attr-defined]
        assert tid == self.model.schedule(delay, interval, fixed, action)

    @rule(tid=st.integers(0, 35))
    def cancel(self, tid: int) -> None:
        assert self.real.cancel(tid) == self.model.cancel(tid)

    @rule(dt=st.sampled_from([0.0, 0.25, 0.5, 1.0, 2.0, 5.0]))
    def advance(self, dt: float) -> None:
        self.clock.advance(dt)
        self.model.advance(dt)

    @rule()
    def run_pending(self) -> None:
        assert self.real.run_pending() == self.model.run_pending()
        assert self.real_log == self.model.log

    @invariant()
    def agree(self) -> None:
        self.real._check()
        assert self.clock.now == self.model.now
        assert self.real.errors == self.model.errors
        assert self.real.next_run_in() == self.model.next_run_in()
        assert len(self.real) == len(self.model.tasks)
        assert [(t.task_id, t.due) for t in self.real.tasks()] == sorted(
            ((tid, t.due) for tid, t in self.model.tasks.items()),
            key=lambda p: (p[1], p[0]),
        )


SchedulerMachine.TestCase.settings = settings(
    max_examples=300, stateful_step_count=60, deadline=None, derandomize=True
)
TestSchedulerModel = SchedulerMachine.TestCase
