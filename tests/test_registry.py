"""The registry drives everything: a new method is its class plus one registry entry.

The toy method below is defined here, in the test, and registered through the registry's seam
(``privcore.methods.register``, the one registry line made at run time): runner, cache, calibration,
recommendation, charts and exports then handle it with no other file changed
(tests/methods/test_method_in_one_file.py follows a method's own result fields the same way).
"""

from __future__ import annotations

import re

import pytest
import torch

from privcore.calibration import calibrate_all
from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.methods import REGISTRY, get_method, methods_of_family, register, unregister
from privcore.methods.base import Method, MethodCard, WinContext
from privcore.methods.card import MIN_COLOUR_DIFFERENCE, colour_difference
from privcore.recommend import recommend
from privcore.types import NoiseScale, PrivacyBudget, Problem


class ToyMajority(Method):
    """Answers every query with the training set's majority label (needs no noise: eps-DP for any eps)."""

    name = "toy_majority"
    card = MethodCard(label="Toy majority", short_label="Toy", sentence_label="the toy majority vote", colour="#123456",
                      marker="hourglass", dash="6px,2px,1px,2px")
    family = "prediction"
    uses = ("budget",)
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


def test_every_two_methods_have_clearly_different_colours():
    """CIE76 colour difference of at least 25 between any two methods' line colours (sparse vector's former
    goldenrod was 17.8 from loss perturbation's orange: a walk-through could not tell them apart)."""
    import itertools

    from privcore.methods import REGISTRY

    colours = {name: m.colour for name, m in REGISTRY.items()}
    for (a, ca), (b, cb) in itertools.combinations(colours.items(), 2):
        assert colour_difference(ca, cb) >= MIN_COLOUR_DIFFERENCE == 25, (a, b, ca, cb)
    assert round(colour_difference("#E69F00", "#B8860B"), 1) == 17.8  # the old pair: the check catches it


@pytest.mark.parametrize("drawn, why", [
    ({"marker": "circle"}, "marker 'circle' is model_sensitivity's already"),
    ({"dash": "longdash"}, "dash 'longdash' is dpsgd's already"),
    ({"dash": "dash"}, "is the non-private reference's"),
    ({"colour": "#B8860B"}, "too close to loss_perturbation's #E69F00 (CIE76 difference 17.8"),
])
def test_registering_a_method_drawn_like_another_names_the_clash(drawn, why):
    """Charts must tell methods apart in colour and in greyscale: register() refuses a toy drawn like another
    method (the rule was only in the tests, so a plug-in registered at run time skipped it)."""
    import dataclasses

    card = dataclasses.replace(ToyMajority.card, **drawn)
    clashing = type("Clashing", (ToyMajority,), {"name": "toy_clashing", "card": card})()
    with pytest.raises(ValueError, match=re.escape(why)):
        register(clashing)
    assert "toy_clashing" not in REGISTRY


def test_uses_budget_follows_from_uses_and_a_disagreeing_declaration_is_refused():
    """The leakage audit covers B answers per trial where a method uses the budget; the flag was declared
    apart from ``uses`` and nothing checked the two agreed."""
    assert all(m.uses_budget == ("budget" in m.uses) for m in REGISTRY.values())
    silent = type("Silent", (ToyMajority,), {"name": "toy_silent", "uses_budget": False})()
    with pytest.raises(ValueError, match="uses_budget"):
        register(silent)


def test_every_abstaining_method_says_so_among_its_standing_caveats():
    """Abstentions count as wrong answers: each method that can abstain lists that caveat (the walk-through found
    sparse vector's accuracy under chance with nothing on the page saying why)."""
    from privcore.methods import REGISTRY

    abstaining = [m for m in REGISTRY.values() if m.abstains]
    assert len(abstaining) >= 2
    for m in abstaining:
        assert any("abstain" in c for c in m.caveats), m.name


def test_every_registry_line_passes_the_checks_register_makes():
    """The registry's own lines are not made through register(): the same declaration checks run on each."""
    from privcore.methods import ENTRIES, check_declarations

    for method in ENTRIES.values():
        check_declarations(method)
