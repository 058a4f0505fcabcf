"""One check of "a number of seconds" for every layer: its rules and its messages."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest

from tickwork._core.args import seconds
from tickwork._core.runs import seconds_or_none
from tickwork._core.schedules import seconds_arg
from tickwork.stores._checks import check_positive, check_time


@pytest.mark.parametrize(
    ("bound", "value", "message"),
    [
        ("finite", math.nan, "x must be a finite number, got nan"),
        ("finite", -math.inf, "x must be a finite number, got -inf"),
        (">= 0", -1, "x must be a finite number >= 0, got -1"),
        (">= 0", math.inf, "x must be a finite number >= 0, got inf"),
        ("> 0", 0, "x must be a finite number > 0, got 0"),
        ("> 0", -0.5, "x must be a finite number > 0, got -0.5"),
    ],
)
def test_a_number_out_of_bounds_names_the_argument_the_rule_and_the_value(
    bound: str, value: float, message: str
) -> None:
    with pytest.raises(ValueError, match=f"^{message}$"):
        seconds("x", value, bound=bound)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, "5", None, [1]])
def test_a_non_number_is_a_type_error(value: object) -> None:
    with pytest.raises(TypeError, match=r"^x must be a number of seconds, got "):
        seconds("x", value)


def test_bounds_are_inclusive_or_not_as_they_say() -> None:
    assert seconds("x", 0, bound=">= 0") == 0.0
    assert seconds("x", -3) == -3.0
    assert seconds("x", Fraction(1, 4), bound="> 0") == 0.25
    assert type(seconds("x", 2)) is float


def test_optional_lets_none_through_and_says_so() -> None:
    assert seconds("t", None, optional=True) is None
    with pytest.raises(ValueError, match=r"^t must be None or a finite number > 0, got 0$"):
        seconds("t", 0, bound="> 0", optional=True)


def test_the_error_types_are_the_callers() -> None:
    class Refused(Exception):
        pass

    with pytest.raises(Refused, match=r"^o must be a finite number >= 0, got 'x'$"):
        seconds("o", "x", bound=">= 0", error=Refused, type_error=Refused)


def test_each_layers_checker_is_this_one() -> None:
    with pytest.raises(ValueError, match=r"^delay must be a finite number >= 0, got nan$"):
        seconds_arg("delay", math.nan, positive=False)
    with pytest.raises(ValueError, match=r"^timeout must be None or a finite number >= 0, got "):
        seconds_or_none("timeout", "soon", positive=False)
    with pytest.raises(ValueError, match=r"^now must be a finite number, got inf$"):
        check_time("now", math.inf)
    with pytest.raises(ValueError, match=r"^lease must be a finite number > 0, got 0$"):
        check_positive("lease", 0)
