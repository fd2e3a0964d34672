"""privcore.calibration: the one-line refusal when an accountant reaches a numerical limit."""

from __future__ import annotations

import pytest

from privcore.calibration import calibrate
from privcore.types import CalibrationError, PrivacyBudget


@pytest.mark.parametrize("method, epsilon, delta, advice", [
    ("dpsgd", 1e10, 1e-5, "epsilon of at most 1e4"),       # the PLD overflows (math.expm1)
    ("sparse_vector", 1.0, 5e-324, "delta of at least 1e-100"),  # a division by zero
])
def test_numerical_limit_names_the_value_to_change_and_no_python_error(method, epsilon, delta, advice):
    with pytest.raises(CalibrationError) as info:
        calibrate(method, PrivacyBudget(epsilon, delta))
    text = str(info.value)
    assert advice in text and f"epsilon={epsilon:g}" in text
    assert "Error" not in text and "larger epsilon" not in text  # no OverflowError/ZeroDivisionError, no wrong advice
