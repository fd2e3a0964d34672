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


def test_rows_carry_the_declared_fields_and_read_the_shipped_figure_7():
    """Issue 31, item 3: DeepRow names no method's field. Its columns come from the declarations (the shipped
    Figure 7 files' header exactly, in order), the shipped rows read back as written, a stored record of the
    earlier shape reads back unchanged, and a new vote method's scale column joins the rows by itself."""
    import csv
    import dataclasses

    from privcore.deep.shipped import read_rows, shipped_runs
    from privcore.deep.spec import DeepRow, check_row, row_fields, vote_numbers
    from privcore.methods import register, unregister
    from privcore.methods.fields import ResultField
    from privcore.methods.subsample_aggregate import SubsampleAggregate
    from privcore.types import NoiseScale

    runs = shipped_runs()
    assert runs, "docs/figures holds the shipped Figure 7 run"
    for path in (p for r in runs for p in (r.panel_a, r.panel_b)):
        with open(path, newline="", encoding="utf-8") as fh:
            raw = list(csv.DictReader(fh))
            header = list(raw[0])
        assert list(DeepRow.columns()) == header, path.name
        for text, row in zip(raw, read_rows(path)):
            for name in [f.name for f in row_fields()]:  # the methods' own columns, as written
                assert row[name] == (None if text[name] == "" else float(text[name]))
        assert any(row[f.name] is not None for row in read_rows(path) for f in row_fields())

    stored = {"dataset": "fashion-mnist", "model": "small-cnn", "method": "sparse_vector", "epsilon": 1.0,
              "delta": 1e-5, "budget": 10, "teachers": 16, "accounting": "corrected", "n_train": 5000, "n_test": 2000,
              "accuracy_mean": 0.5, "accuracy_std": 0.1, "repeats": 4, "seconds": 1.5, "device": "cpu",
              "cached": False, **{f.name: 0.25 for f in row_fields()}, "noise_multiplier": None, "sigma": None,
              "beta": 0.3, "steps": None, "formula": "f"}
    assert check_row(stored) is None and DeepRow.from_dict(stored).to_dict() == stored
    share = next(f.name for f in row_fields() if not f.on_scale)
    assert check_row({**stored, share: 1.5}) is not None and check_row({**stored, "nope": 1}) is not None

    level = ResultField("toy_vote_level", "Vote level", "level", "the toy vote's calibrated level", on_scale=True)
    card = dataclasses.replace(SubsampleAggregate.card, colour="#8B0000", marker="bowtie", dash="1px,3px")
    toy = type("ToyVote", (SubsampleAggregate,), {"name": "toy_vote", "result_fields": (level,),
                                                  "scale_fields": (level,), "card": card})()
    register(toy)
    try:
        cols = DeepRow.columns()
        assert cols.index("toy_vote_level") == cols.index("beta") + len([f for f in row_fields() if f.on_scale])
        scale = NoiseScale("toy_vote", 1.0, 1e-5, "corrected", "exponential_mechanism", beta=0.1,
                           extras={"toy_vote_level": 2.0})
        numbers = vote_numbers(toy, scale, 0.9)
        assert numbers == {"toy_vote_level": 2.0}  # it does not abstain: no answered share
        assert DeepRow.from_dict({**stored, "method": "toy_vote", "toy_vote_level": 2.0}).toy_vote_level == 2.0
    finally:
        unregister("toy_vote")
    assert "toy_vote_level" not in DeepRow.columns()


def test_private_points_name_their_sampler_and_the_teachers_keep_their_keys():
    """DP-SGD trainings and votes made with torch's samplers (tails cut off, rates above q) are neither served
    nor resumed: their points carry NOISE_SAMPLER. The teachers and the reference add no noise, so their keys
    (and the trained teachers a cache holds) stay."""
    from privcore.deep.spec import NOISE_SAMPLER

    spec = DeepSpec(**PRESETS["cpu-small"])
    assert spec.dpsgd_point("dpsgd", 1.0)["sampler"] == NOISE_SAMPLER == 2
    assert spec.vote_point("subsample_aggregate", 1.0, 10)["sampler"] == NOISE_SAMPLER
    assert "sampler" not in spec.teacher_point() and "sampler" not in spec.baseline_point()
