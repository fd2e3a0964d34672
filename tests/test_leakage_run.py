"""privcore.leakage end to end on a tiny data set: the attacks find the non-private model's leakage,
find none beyond the bound on private releases, and the game is built as documented."""

from __future__ import annotations

import json
import math

import pytest
import torch

from privcore.engine.cache import ResultCache
from privcore.engine.specs import DataSpec
from privcore.leakage import ATTACKS, NON_PRIVATE, LeakageResult, LeakageSpec, run_leakage
from privcore.leakage.game import build_population, reference_masks, world_masks
from privcore.methods import REGISTRY

DATA = DataSpec(name="digits", n=200, dim=16, augment=False)
FAST = dict(data=DATA, delta=1e-5, budget=5, teachers=4, batch_size=32, epochs=3, references=8, canaries=8,
            worlds=2, repeats=2, audit_trials=32, accounting="corrected")


@pytest.fixture(scope="module")
def results():
    out = {}
    for eps in (1.0, 10.0):
        for name in (NON_PRIVATE,) + tuple(REGISTRY):
            out[name, eps] = run_leakage(LeakageSpec(method=name, epsilon=eps, **FAST), use_cache=False)
    return out


def test_non_private_model_leaks(results):
    r = results[NON_PRIVATE, 1.0]
    assert r.method == NON_PRIVATE and math.isinf(r.epsilon)
    assert {a.attack for a in r.attacks} == set(ATTACKS)
    assert r.attack("canary").auc > 0.9          # inserted canaries are memorised
    assert r.attack("lira").auc > 0.55           # and ordinary rows leak at this small N
    assert r.attack("lira").auc > r.attack("loss").auc - 0.02  # LiRA at least as strong as the loss
    assert r.audit.lower > 0.5                   # the audit certifies leakage (eps > 0) at 95 %
    assert r.accuracy > 0.6


def test_strongly_private_release_shows_no_leakage():
    """Every attack's AUC within the eps-DP bound e^eps / (1 + e^eps) plus 2.5 standard errors of an AUC on its
    own n_in x n_out trials (Hanley and McNeil at 0.5): 0.325 off 0.5 for the canaries' 8 x 24, which the
    non-private model's canaries (AUC > 0.9, test_non_private_model_leaks) exceed. A fixed 0.12 was about
    one standard error for the canaries, passed or failed by the draws."""
    eps = 0.1
    r = run_leakage(LeakageSpec(method="model_sensitivity", epsilon=eps, **FAST), use_cache=False)
    for a in r.attacks:
        se = math.sqrt((a.roc.n_in + a.roc.n_out + 1) / (12 * a.roc.n_in * a.roc.n_out))
        assert abs(a.auc - 0.5) < math.exp(eps) / (1 + math.exp(eps)) - 0.5 + 2.5 * se, (a.attack, a.auc, se)
    assert r.audit.lower == 0.0


@pytest.mark.parametrize("eps", [1.0, 10.0])
def test_measured_epsilon_never_exceeds_the_claim(results, eps):
    for name in REGISTRY:
        r = results[name, eps]
        assert r.epsilon == eps and r.audit is not None
        assert 0.0 <= r.audit.lower <= eps, (name, r.audit)
        assert r.audit.confidence == pytest.approx(0.95)
        for a in r.attacks:
            # TPR can never exceed the DP region (up to the sampling error of a few hundred trials)
            assert a.roc.tpr_at_1 <= math.exp(eps) * 0.01 + 1e-5 + 0.25, (name, a.attack)


def test_result_rows_are_plain_numbers(results):
    r = results["subsample_aggregate", 10.0]
    d = r.to_dict()
    back = LeakageResult.from_dict(json.loads(json.dumps(d)))
    assert back == r
    row = r.summary()
    assert {"accuracy", "epsilon", "eps_lower", "lira_auc", "canary_tpr_at_0.1%", "loss_advantage"} <= set(row)
    assert r.family == "prediction" and r.releases == "labels"


def test_cache_round_trip(tmp_path):
    store = ResultCache(tmp_path)
    spec = LeakageSpec(method="prediction_sensitivity", epsilon=3.0, **FAST)
    first = run_leakage(spec, cache=store)
    second = run_leakage(spec, cache=store)
    assert not first.cached and second.cached
    assert second.summary()["lira_auc"] == first.summary()["lira_auc"]
    assert second.audit == first.audit
    assert len(store) == 1


def test_population_canaries_and_independent_references():
    torch.manual_seed(0)
    x = torch.rand(50, 8) * torch.tensor([1, 1, 1, 1, 1, 1, 0, 0.0])  # two coordinates never used
    x = x / x.norm(dim=1, keepdim=True)
    y = torch.randint(0, 3, (50,))
    xt, yt = x[:10].clone(), y[:10].clone()
    pop = build_population(x, y, xt, yt, 3, canaries=4, seed=1)
    assert pop.size == 54 and pop.n_train == 27
    assert pop.canary.sum() == 4 and pop.ood.sum() == 2
    ood = pop.x[pop.ood]
    assert torch.all((ood != 0).sum(dim=1) == 1) and set(ood.argmax(dim=1).tolist()) == {6, 7}
    mis = pop.canary & ~pop.ood
    assert torch.all(pop.y[mis] != yt[torch.nonzero(torch.all(xt.unsqueeze(0) == pop.x[mis].unsqueeze(1), dim=2))[:, 1]])
    # The worlds are random halves; the references come from another stream, whatever the worlds.
    w2, w5 = world_masks(pop, 2, seed=1), world_masks(pop, 5, seed=1)
    assert torch.equal(w2, w5[:2]) and torch.all(w2.sum(dim=1) == 27)
    refs = reference_masks(pop, 8, seed=1)
    assert torch.all(refs.sum(dim=1) == 27)
    assert not torch.equal(refs[:2], w2)
    assert torch.equal(refs, reference_masks(pop, 8, seed=1))


@pytest.mark.parametrize("kwargs, match", [
    (dict(method="nope"), "method"),
    (dict(epsilon=0.0), "epsilon"),
    (dict(delta=1.0), "delta"),
    (dict(references=1), "references"),
    (dict(canaries=1), "canaries"),
    (dict(audit_trials=2), "audit_trials"),
    (dict(accounting="loose"), "accounting"),
    (dict(alpha=1.5), "alpha"),
])
def test_bad_specs_are_rejected(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LeakageSpec(**{**FAST, **kwargs})


def test_batch_larger_than_the_worlds_is_a_clear_error():
    with pytest.raises(ValueError, match="batch_size must be at most 104"):
        run_leakage(LeakageSpec(method="dpsgd", epsilon=1.0, **{**FAST, "batch_size": 150}), use_cache=False)
    with pytest.raises(TypeError):
        run_leakage("dpsgd")  # type: ignore[arg-type]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_every_method_runs_on_the_gpu():
    for name in (NON_PRIVATE,) + tuple(REGISTRY):
        r = run_leakage(LeakageSpec(method=name, epsilon=10.0, **{**FAST, "device": "cuda"}), use_cache=False)
        assert r.device.startswith("cuda") and 0.0 <= r.audit.lower <= (math.inf if name == NON_PRIVATE else 10.0)


def test_quick_methods_audit_more_trials():
    from privcore.leakage import audit_trials_for

    assert audit_trials_for("loss_perturbation", 64) == audit_trials_for("dpsgd", 64) == 64
    assert audit_trials_for("model_sensitivity", 64) == audit_trials_for(NON_PRIVATE, 64) == 512
    assert audit_trials_for("subsample_aggregate", 256) == 1024
