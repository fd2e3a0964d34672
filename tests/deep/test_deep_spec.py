"""privcore.deep.spec: NumPy scalars and repeated entries in a DeepSpec."""

from __future__ import annotations

import numpy as np

from privcore.deep.spec import PRESETS, DeepSpec


def test_numpy_scalars_and_repeats_make_the_plain_spec():
    # Once: to_json raised "Object of type int64 is not JSON serializable", and repeated epsilons,
    # budgets or methods trained and printed everything twice.
    base = {**PRESETS["cpu-small"], "methods": ("dpsgd",)}
    odd = DeepSpec(**{**base, "epsilons": (1.0, 1.0, 2.0), "budgets": (5, np.int64(5)),
                      "methods": ("dpsgd", "dpsgd"), "n_train": np.int64(100), "lr": np.float32(0.5),
                      "seed": np.int64(3)})
    plain = DeepSpec(**{**base, "epsilons": (1.0, 2.0), "budgets": (5,), "n_train": 100, "lr": 0.5, "seed": 3})
    assert odd.to_json() == plain.to_json()
    assert odd.methods == ("dpsgd",) and odd.epsilons == (1.0, 2.0) and odd.budgets == (5,)
