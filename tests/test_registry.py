"""The registry drives everything: a new method is its class plus one registry entry.

The toy method below is defined here, in the test, and registered through the registry's seam
(``privcore.methods.register``, the one registry line made at run time): runner, cache, calibration,
recommendation, charts and exports then handle it with no other file changed
(tests/methods/test_method_in_one_file.py follows a method's own result fields the same way).
"""

from __future__ import annotations

import pytest
import torch

from privcore.calibration import calibrate_all
from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import get_method, methods_of_family, register, unregister
from privcore.methods.base import Method, MethodCard, WinContext
from privcore.recommend import recommend
from privcore.types import NoiseScale, PrivacyBudget, Problem


class ToyMajority(Method):
    """Answers every query with the training set's majority label (needs no noise: eps-DP for any eps)."""

    name = "toy_majority"
    card = MethodCard(label="Toy majority", short_label="Toy", sentence_label="the toy majority vote", colour="#123456")
    family = "prediction"
    uses = ("budget",)
    uses_budget = True
    releases = "labels"
    supports_approx = True

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "exponential_mechanism", beta=0.0,
                          formula="beta = 0: the answer ignores the data")

    def release(self, ctx, scales, repeats, queries=None):
        m = (ctx.x_test if queries is None else queries).shape[0]
        return torch.zeros(len(scales), repeats, m, dtype=torch.int64, device=ctx.device)

    def win_reason(self, s: WinContext) -> str:
        return f"the toy majority vote needs no privacy budget at B = {s.budget}"


@pytest.fixture
def toy():
    method = register(ToyMajority())  # the one registry line, made at run time
    yield method
    unregister(method.name)


@pytest.mark.slow
def test_toy_method_runs_through_every_layer(toy, tmp_path):
    assert get_method("toy_majority") is toy and "toy_majority" in methods_of_family("prediction")
    cal = calibrate_all(PrivacyBudget(1.0, 1e-5), Problem())
    assert cal["toy_majority"].formula.startswith("beta = 0")
    spec = SweepSpec(data=DataSpec(name="digits"), methods=("toy_majority", "model_sensitivity"), epsilons=(1.0,),
                     delta=1e-5, repeats=2, budget=10, teachers=8, batch_size=64, epochs=1)
    res = run_sweep(spec, cache=ResultCache(tmp_path))
    row = next(r for r in res.rows if r.method == "toy_majority")
    assert 0.0 < row.accuracy_mean < 0.3 and row.to_dict()["method"] == "toy_majority"
    again = run_sweep(spec, cache=ResultCache(tmp_path))  # cached like any method
    assert next(r for r in again.rows if r.method == "toy_majority").cached
    # A recommendation can pick it, with the reason its module gives.
    rows = [dict(row.to_dict(), accuracy_mean=0.99), *(r for r in res.rows if r.method != "toy_majority")]
    rec = recommend(rows)
    assert rec.winner == "toy_majority" and "needs no privacy budget" in rec.reason


def test_toy_method_is_drawn_with_its_own_label_and_colour(toy):
    from ui.figures import curve_figure, method_color, method_label

    rows = [{"method": "toy_majority", "epsilon": e, "accuracy_mean": 0.1, "accuracy_std": 0.0} for e in (1.0, 2.0)]
    fig = curve_figure(rows, "epsilon", title="t", log_x=True)
    assert any(t.name == "Toy majority" for t in fig.data)
    # figures read the live registry entry's label and colour, not a table of their own
    assert method_label("toy_majority") == "Toy majority"
    assert method_color("toy_majority") == "#123456"
    assert next(t for t in fig.data if t.name == "Toy majority").line.color == "#123456"


def test_unknown_method_names_the_registered_ones():
    with pytest.raises(ValueError, match="model_sensitivity"):
        get_method("nope")


def _lab(colour: str) -> tuple[float, float, float]:
    """sRGB hex to CIELAB (D65)."""
    def lin(c: float) -> float:
        return ((c + 0.055) / 1.055) ** 2.4 if c > 0.04045 else c / 12.92

    r, g, b = (lin(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(v: float) -> float:
        return v ** (1 / 3) if v > 0.008856 else 7.787 * v + 16 / 116

    return 116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z))


def test_every_two_methods_have_clearly_different_colours():
    """CIE76 colour difference of at least 25 between any two methods' line colours (sparse vector's former
    goldenrod was 17.8 from loss perturbation's orange: a walk-through could not tell them apart)."""
    import itertools
    import math

    from privcore.methods import REGISTRY

    colours = {name: m.colour for name, m in REGISTRY.items()}
    for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
        assert math.dist(_lab(ca), _lab(cb)) >= 25, (a, b, ca, cb)
    assert round(math.dist(_lab("#E69F00"), _lab("#B8860B")), 1) == 17.8  # the old pair: the check catches it


def test_every_abstaining_method_says_so_among_its_standing_caveats():
    """Abstentions count as wrong answers: each method that can abstain lists that caveat (the walk-through found
    sparse vector's accuracy under chance with nothing on the page saying why)."""
    from privcore.methods import REGISTRY

    abstaining = [m for m in REGISTRY.values() if m.abstains]
    assert len(abstaining) >= 2
    for m in abstaining:
        assert any("abstain" in c for c in m.caveats), m.name
