"""bench/postgres.py's pure helpers for ``--repeat``: the median round, the rounds table.

No figure of a benchmark is asserted here: the runs are invented to pin the arithmetic.
"""

from __future__ import annotations

import pytest
from bench.postgres import Result, _median_rounds, rounds_table


def run(server: float, node: float, runs: int = 1000) -> Result:
    return Result(runs=runs, server_cpu=server, node_cpu=node)


def test_the_median_round_is_a_real_round_the_lower_of_an_even_count() -> None:
    odd = [run(0.4, 0.4), run(0.1, 0.1), run(0.3, 0.2)]  # 0.8, 0.2 and 0.5 ms per run
    even = [run(0.4, 0.4), run(0.1, 0.1), run(0.3, 0.2), run(0.6, 0.6)]
    chosen = _median_rounds({("new", 1): odd, ("new", 3): even})
    assert chosen["new", 1] is odd[2]
    assert chosen["new", 3] is even[2]


def test_the_rounds_table_gives_each_rounds_ratio_and_their_median(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rounds = {
        ("old", 1): [run(0.5, 0.5), run(0.6, 0.4), run(0.4, 0.4)],  # 1.0, 1.0, 0.8 ms
        ("new", 1): [run(0.4, 0.4), run(0.5, 0.5), run(0.2, 0.2)],  # 0.8, 1.0, 0.4 ms
    }
    rounds_table("burst of 1,000", ["old", "new"], rounds)
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row == (
        "| 1 | 1.00 (0.80-1.00); server 0.50 | 0.80 (0.40-1.00); server 0.40"
        " | 0.80x, 1.00x, 0.50x | 0.80x |"
    )


def test_one_tree_gets_no_ratio_and_no_rounds_print_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    rounds_table("steady", ["new"], {("new", 3): [run(0.3, 0.3), run(0.2, 0.2)]})
    assert (
        capsys.readouterr().out.strip().splitlines()[-1] == "| 3 | 0.50 (0.40-0.60); server 0.25 |"
    )
    rounds_table("steady", ["new"], {})
    assert capsys.readouterr().out == ""
