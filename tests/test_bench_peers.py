"""bench/peers.py: its helpers on made-up runs, and the delayed workload on a tiny load.

No figure of a benchmark is asserted here: the runs of the pure tests are invented to pin
the arithmetic; the two on a real server (tiny rates, a second) assert counts only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.peers import Lab, Run, median_range, round_ratios, table, tickwork_system
from bench.peers_delayed import (
    SOAK_TABLES,
    Enqueue,
    Steady,
    enqueue_rate,
    enqueue_table,
    paired,
    preload_table,
    soak_table,
    steady,
    steady_table,
)


def run(system: str, nodes: int, per_s: float, server: float, node: float) -> Run:
    return Run(system, nodes, jobs=1000, rows=1000, per_s=per_s, server_cpu=server, node_cpu=node)


def test_median_range_skips_what_is_not_finite() -> None:
    assert median_range([3.0, math.nan, 1.0, 2.0]) == (2.0, 1.0, 3.0)
    assert all(math.isnan(v) for v in median_range([math.nan]))


def test_cpu_per_run_is_split_into_server_and_nodes_in_ms() -> None:
    assert run("x", 1, 100.0, 0.5, 1.5).cpu_ms == (0.5, 1.5, 2.0)


def test_ratios_are_per_round_against_tickwork_on_the_same_node_count() -> None:
    rounds = [
        [run("tickwork", 1, 100.0, 1.0, 1.0), run("peer", 1, 50.0, 2.0, 2.0)],
        [run("peer", 1, 80.0, 1.0, 2.0), run("tickwork", 1, 200.0, 1.0, 0.5)],
        [run("tickwork", 3, 100.0, 1.0, 1.0)],  # another node count: not a pair for nodes=1
    ]
    assert round_ratios(rounds, "peer", 1, "rate") == [0.5, 0.4]
    assert round_ratios(rounds, "peer", 1, "cpu") == [2.0, 2.0]
    assert round_ratios(rounds, "peer", 3, "rate") == []


def test_table_gives_medians_ranges_and_ratios() -> None:
    rounds = [
        [run("tickwork", 1, 100.0, 1.0, 1.0), run("peer", 1, 50.0, 2.0, 2.0)],
        [run("tickwork", 1, 300.0, 1.0, 1.0), run("peer", 1, 30.0, 2.0, 2.0)],
    ]
    lines = table(rounds, ["tickwork", "peer"], [1])
    tail = "| 0 | 0 of 2 |"
    assert lines[2] == f"| tickwork | 1 | 200 (100-300) | 1.00x | 1.00 + 1.00 = 2.00 | 1.00x {tail}"
    assert lines[3] == f"| peer | 1 | 40 (30-50) | 0.30x | 2.00 + 2.00 = 4.00 | 2.00x {tail}"


# -- the delayed-jobs workload (bench/peers_delayed.py) ------------------------------------


def steady_run(system: str, nodes: int = 1, **kw: Any) -> Steady:
    base: dict[str, Any] = {
        "enqueued": 1000,
        "calls": 1000,
        "produced": 10.0,
        "in_window": 900,
        "rows": 1000,
        "distinct": 1000,
        "server_cpu": 0.5,
        "node_cpu": 1.5,
        "commits": 1500.0,
    }
    return Steady(system, nodes, 100.0, **{**base, **kw})


def test_a_fixed_rate_run_gives_rates_cpu_and_commits_per_job_that_ran() -> None:
    r = steady_run("peer", enqueued=1100, distinct=1000, rows=1002, pending=60)
    assert (r.reached, r.completed) == (110.0, 90.0)
    assert r.cpu_ms == (0.5, 1.5, 2.0)
    assert r.commits_per_run == 1.5
    assert r.twice_lost == (2, 40)  # rows beyond jobs; neither run nor pending
    assert all(math.isnan(v) for v in steady_run("x", distinct=0).cpu_ms)


def test_tickworks_twice_and_lost_come_from_its_ledger() -> None:
    r = steady_run("tickwork", enqueued=1000, rows=1000, pending=5, ledger=(996, 994, 0.01, 0.05))
    assert r.twice_lost == (2, 1)


def test_paired_ratios_are_per_round_and_skip_rounds_without_both() -> None:
    rounds = [[("a", 2.0), ("b", 4.0)], [("b", 1.0)], [("b", 3.0), ("a", 0.0)]]
    got = paired(rounds, lambda r: r[0] == "b", lambda r: r[0] == "a", lambda r: r[1])
    assert got == [2.0]  # round 2 has no base, round 3's base is 0


def test_the_enqueue_table_puts_tickwork_first_in_each_way() -> None:
    rounds = [
        [
            Enqueue("pgboss", "PostgreSQL", "single", 4, 3000, 1.0, "send"),
            Enqueue("tickwork", "PostgreSQL", "single", 4, 1000, 1.0, "enqueue"),
            Enqueue("tickwork", "SQLite", "bulk", 1, 50000, 1.0, "enqueue_many"),
        ],
        [
            Enqueue("tickwork", "PostgreSQL", "single", 4, 3000, 1.0, "enqueue"),
            Enqueue("pgboss", "PostgreSQL", "single", 4, 3000, 1.0, "send"),
        ],
    ]
    lines = enqueue_table(rounds)
    assert lines[2:] == [
        "| PostgreSQL | tickwork | `enqueue` | 4 | 2,000 (1,000-3,000) | 1.00x |",
        "| PostgreSQL | pgboss | `send` | 4 | 3,000 (3,000-3,000) | 2.00x |",  # 3.0x, 1.0x
        "| SQLite | tickwork | `enqueue_many` | 1 | 50,000 (50,000-50,000) | 1.00x |",
    ]


def test_the_fixed_rate_table_gives_medians_sums_and_the_cpu_ratio() -> None:
    rounds = [
        [
            steady_run("tickwork", ledger=(1000, 1000, 0.002, 0.02)),
            steady_run("peer", server_cpu=1.0, node_cpu=3.0, p50=0.2, p99=0.4, rows=1001),
        ]
    ]
    lines = steady_table(rounds, ["tickwork", "peer"], [1])
    assert lines[2] == (
        "| tickwork | 1 | 100 | 90 | - / - | 2.0 / 20.0 | 0 / 0 / 0"
        " | 0.50 + 1.50 = 2.00 | 1.00x | 1.50 |"
    )
    assert lines[3] == (
        "| peer | 1 | 100 | 90 | 200.0 / 400.0 | - | 1 / 0 / 0"
        " | 1.00 + 3.00 = 4.00 | 2.00x | 1.50 |"
    )


def test_the_soak_table_has_a_row_per_sample() -> None:
    r = steady_run("tickwork")
    r.samples = [
        (0.0, [("tickwork_claims", 0, 0, 16384, 0), ("tickwork_jobs", 5, 1, 2_000_000, 0)]),
        (10.2, [("tickwork_jobs", 7, 300, 3_000_000, 1), ("tickwork_ledger", 9, 0, 1e6, 2)]),
    ]
    lines = soak_table(r)
    assert lines[2] == "| 0 | 5 / 1 / 2.0 | 0 / 0 / 0.0 | - | 0 |"
    assert lines[3] == "| 10 | 7 / 300 / 3.0 | - | 9 / 0 / 1.0 | 3 |"


def test_the_preload_table_gives_each_p99_over_the_small_states_and_bytes_per_row() -> None:
    small = steady_run("tickwork", p50=0.01, p99=0.04, ledger=(1000, 1000, 0.002, 0.02))
    small.preload, small.sizes = (1000, 1000), (2000, 800_000, 300_000)
    big = steady_run("tickwork", p50=0.01, p99=0.05, ledger=(1000, 1000, 0.003, 0.03))
    big.preload, big.sizes = (1_000_000, 100_000), (1_100_000, 500_000_000, 150_000_000)
    lines = preload_table([small, big])
    assert lines[2] == (
        "| 1,000 | 1,000 | 1 | 100 | 90 | 10.0 / 40.0 | 2.0 / 20.0 | 1.00x"
        " | 2,000, 0.8 + 0.3, 550 |"
    )
    assert lines[3] == (
        "| 1,000,000 | 100,000 | 1 | 100 | 90 | 10.0 / 50.0 | 3.0 / 30.0 | 1.25x"
        " | 1,100,000, 500.0 + 150.0, 591 |"
    )


def test_a_preloaded_state_waits_beside_the_fixed_rate_on_a_real_server(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Pending one-offs and declared jobs loaded first: none runs, all are counted."""
    lab = Lab(pg_dsn, tmp_path)
    try:
        r = steady(lab, tickwork_system(), 1, 20, 1, producers=2, patience=120, preload=(50, 20))
    finally:
        lab.close()
    assert r.sizes is not None and r.sizes[0] == 70 and r.sizes[1] > 0 and r.sizes[2] > 0
    assert r.distinct == r.rows == r.enqueued >= 2  # the producers' one-offs ran, only they
    assert r.ledger is not None and r.ledger[:2] == (r.enqueued, r.enqueued)
    assert r.twice_lost == (0, 0) and r.pending == 0


def test_the_fixed_rate_runs_each_enqueued_one_off_once_on_a_real_server(
    pg_dsn: str, tmp_path: Path
) -> None:
    """A tiny rate for a second on one node: counts that hold however slow the machine is."""
    lab = Lab(pg_dsn, tmp_path)
    try:
        r = steady(lab, tickwork_system(), 1, 20, 1, producers=2, sample_every=0.5, patience=120)
    finally:
        lab.close()
    assert r.enqueued == r.calls >= 2  # single enqueues, one call per producer at least
    assert r.distinct == r.rows == r.enqueued
    assert r.ledger is not None and r.ledger[:2] == (r.enqueued, r.enqueued)
    assert r.twice_lost == (0, 0) and r.pending == 0
    assert 0 <= r.ledger[2] <= r.ledger[3] and 0 <= r.p50 <= r.p99
    assert math.isfinite(r.commits) and r.cpu_ms[2] > 0
    assert len(r.samples) >= 2  # the first and the last
    assert [row[0] for row in r.samples[-1][1]] == sorted(SOAK_TABLES)


def test_enqueue_rates_count_what_each_store_took(pg_dsn: str, tmp_path: Path) -> None:
    lab = Lab(pg_dsn, tmp_path)
    try:
        bulk = enqueue_rate(lab, tickwork_system(), "PostgreSQL", "bulk", 1, 1000, 0.2)
        single = enqueue_rate(lab, tickwork_system(), "SQLite", "single", 2, 1, 0.2)
    finally:
        lab.close()
    assert bulk.jobs >= 1000 and bulk.jobs % 1000 == 0 and bulk.api == "enqueue_many"
    assert single.jobs >= 2 and single.api == "enqueue" and single.per_s > 0
    assert list(tmp_path.iterdir()) == []  # the SQLite file went
