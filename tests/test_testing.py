from __future__ import annotations

import math

import pytest

from tickwork.testing import FakeClock


def test_fake_clock_advance_and_set() -> None:
    c = FakeClock()
    assert c() == 0.0
    assert c.advance(1.5) == 1.5
    assert c() == c.now == 1.5
    assert c.set(10) == 10.0
    assert c.set(10) == 10.0  # standing still is fine
    assert isinstance(c(), float)


def test_fake_clock_refuses_to_go_backwards() -> None:
    c = FakeClock(5)
    with pytest.raises(
        ValueError, match=r"^seconds must be >= 0 \(the clock never goes back\), got -1$"
    ):
        c.advance(-1)
    with pytest.raises(
        ValueError, match=r"^now must not be earlier than the current reading 5.0, got 4$"
    ):
        c.set(4)
    assert c() == 5.0


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_fake_clock_refuses_non_finite(bad: float) -> None:
    with pytest.raises(ValueError, match=r"^start must be a finite number, got "):
        FakeClock(bad)
    with pytest.raises(ValueError, match=r"^seconds must be a finite number, got "):
        FakeClock().advance(bad)


def test_fake_clock_refuses_non_numbers() -> None:
    with pytest.raises(TypeError, match=r"^now must be a number of seconds, got '3'$"):
        FakeClock().set("3")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^start must be a number of seconds, got True$"):
        FakeClock(True)


def test_fake_clock_wall_moves_with_monotonic_and_jumps_alone() -> None:
    c = FakeClock(100, wall_start=1_000_000)
    assert c.wall() == 1_000_000
    c.advance(10)
    assert c.wall() == 1_000_010
    assert c.jump_wall(-3600) == 1_000_010 - 3600
    assert c() == 110  # the monotonic reading did not move
    c.advance(1)
    assert c.wall() == 1_000_011 - 3600
    assert repr(c) == "FakeClock(111.0, wall_start=996411.0)"
