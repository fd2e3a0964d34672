"""privcore.engine.specs: bad library input to SweepSpec / DataSpec is refused by name, NumPy scalars are stored
as plain numbers (the spec's JSON key once failed on them)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from privcore.engine.specs import DataSpec, SweepSpec


def test_numpy_scalars_are_accepted_and_the_key_is_plain_json():
    # Once: accepted, then spec.key raised "Object of type int64 is not JSON serializable".
    spec = SweepSpec(data=DataSpec(name="digits", n=np.int64(100), dim=np.int64(5), classes=np.int64(3)),
                     epochs=np.int64(3), teachers=np.int64(8), clip=np.float64(0.5), repeats=np.int64(2),
                     vary="budget", values=(np.int64(3), 5))
    plain = SweepSpec(data=DataSpec(name="digits", n=100, dim=5, classes=3), epochs=3, teachers=8, clip=0.5,
                      repeats=2, vary="budget", values=(3, 5))
    assert spec.key == plain.key
    assert type(spec.data.dim) is int and type(spec.epochs) is int and type(spec.values[0]) is int


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(teachers=math.inf), "teachers must be an integer, got inf"),      # once named n (Problem's n = max(T, batch))
    (dict(batch_size=1e400), "batch_size must be an integer, got inf"),
    (dict(methods="dpsgd"), "methods must be a list or tuple of method names"),   # once: "got 'd'"
    (dict(epsilons=1.0), "epsilons must be a list or tuple of numbers"),    # once: "'float' object is not iterable"
    (dict(epsilons=np.float64(1.0)), "epsilons must be a list or tuple of numbers such as (0.1, 1.0), got 1.0"),
    (dict(vary="n", values=5), "values must be a list or tuple of n values, got 5"),
    (dict(baseline=np.int64(1)), "baseline must be True or False, got 1"),  # once: np.int64(1)
])
def test_bad_sweep_spec_values_name_the_parameter(kwargs, fragment):
    with pytest.raises((TypeError, ValueError)) as info:
        SweepSpec(**kwargs)
    assert fragment in str(info.value) and "np." not in str(info.value)


@pytest.mark.parametrize("kwargs", [dict(data_file=np.int64(5)), dict(augment=np.float64(1.5)),
                                    dict(preprocess=np.int64(5))])
def test_data_spec_messages_show_plain_numbers(kwargs):
    with pytest.raises(TypeError) as info:
        DataSpec(**kwargs)
    assert "np." not in str(info.value)


def test_repeated_methods_epsilons_and_values_count_once():
    # Once: --methods m,m --epsilons 1,1 --values 5,5 printed every row 8 times.
    spec = SweepSpec(methods=("dpsgd", "dpsgd", "model_sensitivity"), epsilons=(1, 1.0, 0.5), vary="budget",
                     values=(5, 5, np.int64(5), 10))
    assert spec.methods == ("dpsgd", "model_sensitivity")
    assert spec.epsilons == (1.0, 0.5) and spec.values == (5, 10)
    assert spec.key == SweepSpec(methods=("dpsgd", "model_sensitivity"), epsilons=(1.0, 0.5), vary="budget",
                                 values=(5, 10)).key


@pytest.mark.parametrize("text, words", [
    ('{"epsilons": [1e999]}', "overflows"),
    ('{"epsilons": [Infinity]}', "Infinity"),
    ('{"epsilons": [NaN]}', "NaN"),
    ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
])
def test_from_json_refuses_overflow_constants_and_deep_nesting_by_name(text, words):
    from privcore.engine.specs import SweepSpec
    with pytest.raises(ValueError, match=words):
        SweepSpec.from_json(text)


def test_from_json_still_reads_infinity_written_as_inf():
    from privcore.engine.specs import SweepSpec
    assert SweepSpec.from_json('{"epsilons": [1.0, "inf"]}').epsilons[-1] == float("inf")
