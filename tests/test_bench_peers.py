"""bench/peers.py's pure helpers: medians, per-round ratios, the table (made-up runs).

No figure of a benchmark is asserted here: the runs are invented to pin the arithmetic.
"""

from __future__ import annotations

import math

from bench.peers import Run, median_range, round_ratios, table


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
