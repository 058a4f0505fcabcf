"""Soak: 8 threads schedule and cancel tens of thousands of tasks while the driver runs.

Always run; short by default (a few seconds). ``TICKWORK_SOAK_SECONDS=300 python3 dev.py
test tests/test_thread_soak.py`` keeps the threads going for that long instead.
"""

from __future__ import annotations

import itertools
import os
import random
import threading
import time

import pytest

from tickwork import ThreadScheduler

THREADS = 8
SHORT_OPS = 3000  # per thread: 24,000 tasks in the short form
SECONDS = float(os.environ.get("TICKWORK_SOAK_SECONDS", "0"))


@pytest.mark.slow
@pytest.mark.timeout(120 + 2 * SECONDS)
def test_soak_schedule_and_cancel_from_many_threads() -> None:
    ran: list[int] = []  # tokens of the runs; list.append is atomic
    token_of: dict[int, int] = {}  # task id -> token
    cancelled: set[int] = set()  # ids whose cancel returned True
    failures: list[BaseException] = []
    tokens = itertools.count()
    go = threading.Event()
    give_up = time.monotonic() + SECONDS

    ts = ThreadScheduler(max_workers=4)

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[int] = []
        try:
            go.wait()
            n = 0
            while n < SHORT_OPS or time.monotonic() < give_up:
                n += 1
                token = next(tokens)
                task_id = ts.schedule(rng.random() * 0.02, lambda t=token: ran.append(t))
                token_of[task_id] = token
                mine.append(task_id)
                if rng.random() < 0.4:
                    victim = rng.choice(mine) if rng.random() < 0.8 else rng.randint(1, task_id)
                    if ts.cancel(victim):
                        cancelled.add(victim)
                if n % 500 == 0:
                    ts.next_run_in()
                    ts.running()
                    mine = mine[-200:]
        except BaseException as exc:
            failures.append(exc)

    recurring_runs: list[int] = []
    recurring = [
        ts.schedule(0, lambda i=i: recurring_runs.append(i), interval=0.001) for i in range(4)
    ]
    ts.start()
    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(THREADS)]
    for t in threads:
        t.start()
    go.set()
    for t in threads:
        t.join(60 + 2 * SECONDS)
    assert not any(t.is_alive() for t in threads), "a scheduling thread deadlocked"
    for task_id in recurring:  # a scheduling thread may have cancelled it already
        assert ts.cancel(task_id) is True or task_id in cancelled
    deadline = time.monotonic() + 30
    while (len(ts) or ts.running()) and time.monotonic() < deadline:
        time.sleep(0.01)
    settled = len(recurring_runs)
    time.sleep(0.05)
    assert ts.stop(timeout=10) is True
    assert failures == []
    assert ts.errors == []
    assert len(ts) == 0 and ts.running() == {}
    assert len(recurring_runs) == settled, "a recurring task ran after its cancel returned True"
    ts._check()

    runs_per_token: dict[int, int] = {}
    for token in ran:
        runs_per_token[token] = runs_per_token.get(token, 0) + 1
    assert len(token_of) >= THREADS * SHORT_OPS
    for task_id, token in token_of.items():
        expected = 0 if task_id in cancelled else 1
        assert runs_per_token.get(token, 0) == expected, (task_id, expected)
    assert 0 < len(cancelled) < len(token_of)
