"""privcore.leakage.spec: NumPy scalars and out-of-type knobs in a LeakageSpec."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.engine.specs import DataSpec
from privcore.leakage.spec import LeakageSpec

DATA = DataSpec(name="digits", augment=False)


def test_numpy_scalars_make_the_plain_spec():
    # Once: to_json (the cache key) raised "Object of type int64 is not JSON serializable".
    odd = LeakageSpec(method="model_sensitivity", epsilon=np.float64(1.0), data=DATA, worlds=np.int64(2),
                      references=np.int64(8), seed=np.int64(1), budget=np.int64(5), teachers=np.int64(4))
    plain = LeakageSpec(method="model_sensitivity", epsilon=1.0, data=DATA, worlds=2, references=8, seed=1,
                        budget=5, teachers=4)
    assert odd.to_json() == plain.to_json()


@pytest.mark.parametrize("name", ["teachers", "batch_size"])
def test_a_bad_teachers_or_batch_is_named_itself(name):
    # Once: "n must be an integer, got inf" (Problem's n = max(T, batch)).
    with pytest.raises(TypeError, match=rf"^{name} must be an integer, got inf"):
        LeakageSpec(method="model_sensitivity", epsilon=1.0, data=DATA, **{name: math.inf})
