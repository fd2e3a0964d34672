"""The tuned comparison: candidates, parameterised methods, both variants and what they claim."""

from __future__ import annotations

import math

import pytest

from privcore.engine.cache import ResultCache
from privcore.engine.specs import DataSpec, SweepSpec
from privcore.engine.runner import run_sweep
from privcore.engine.tuned import candidates, tuned_seed
from privcore.engine.tuning import SELECTION_FRACTION, release_budget, selection_budget, selection_seed
from privcore.methods import REGISTRY, get_method, method_name
from privcore.types import PrivacyBudget, Problem


def run_tuned(spec: SweepSpec, tuning: str, **kw):
    """A tuned sweep as users run one: ``run_sweep`` of the spec with ``tuning`` set."""
    import dataclasses

    return run_sweep(dataclasses.replace(spec, tuning=tuning), **kw)


def _spec(**kw) -> SweepSpec:
    base = dict(data=DataSpec(name="synthetic"), methods=("model_sensitivity", "subsample_aggregate"),
                epsilons=(1.0, 10.0), delta=1e-5, repeats=2, teachers=8, lam=1e-2, device="cpu")
    base.update(kw)
    return SweepSpec(**base)


# ---------------------------------------------------------------- parameterised methods

def test_parameterised_names_are_canonical_and_default_is_the_registry_entry():
    assert get_method("private_knn[neighbours=25]") is REGISTRY["private_knn"]
    a = get_method("private_knn[sample_rate=0.2, neighbours=10]")
    assert a.name == "private_knn[neighbours=10,sample_rate=0.2]" == method_name("private_knn", sample_rate=0.2,
                                                                                   neighbours=10)
    assert (a.neighbours, a.sample_rate) == (10, 0.2) and a.base_name == "private_knn"
    assert get_method(a.name) is a
    assert SweepSpec(methods=("private_knn[sample_rate=0.2,neighbours=10]",)).methods == (a.name,)


@pytest.mark.parametrize("bad, words", [("private_knn[k=3]", "neighbours, sample_rate"),
                                        ("private_knn[neighbours=x]", "must be a number"),
                                        ("private_knn[neighbours=0]", "neighbours"),
                                        ("dpsgd[clip=1]", "takes the parameters none"),
                                        ("nope[a=1]", "method must be one of")])
def test_bad_parameterised_names_say_what_is_wrong(bad, words):
    with pytest.raises(ValueError, match=words.replace("[", r"\[")):
        SweepSpec(methods=(bad,))


def test_a_parameter_reaches_the_calibration():
    problem = Problem(n=4000, dim=20, classes=3, teachers=50, budget=10)
    m = get_method("confident_gnmax[threshold_fraction=0.6,sigma_ratio=2]")
    s = m.calibrate(PrivacyBudget(1.0, 1e-5), problem)
    d = REGISTRY["confident_gnmax"].calibrate(PrivacyBudget(1.0, 1e-5), problem)
    assert s.threshold == pytest.approx(30.0) and d.threshold == pytest.approx(40.0)
    assert s.test_noise == pytest.approx(2.0 * s.sigma)


# ---------------------------------------------------------------- candidates

def test_candidates_start_with_the_configured_knobs_and_skip_the_swept_axis():
    spec = _spec(teachers=6)
    c = candidates("subsample_aggregate", spec, 4000)
    assert dict(c[0].knobs) == {"teachers": 6} and len(c) == 1 + len(REGISTRY["subsample_aggregate"].tuning_grid["teachers"])
    assert candidates("subsample_aggregate", _spec(vary="teachers", values=(4, 8)), 4000) == [
        candidates("subsample_aggregate", _spec(vary="teachers", values=(4, 8)), 4000)[0]]
    assert all(dict(x.knobs)["teachers"] <= 40 for x in candidates("subsample_aggregate", spec, 40))
    knn = candidates("private_knn", _spec(methods=("private_knn",)), 4000)
    assert len(knn) == 9 and knn[0].method == "private_knn"


# ---------------------------------------------------------------- the two variants

@pytest.mark.slow  # 7-9 s: the full suite runs it; the quick loop keeps the soundness checks
def test_held_out_is_at_least_as_configured_and_says_it_is_not_private(tmp_path):
    spec = _spec()
    cache = ResultCache(tmp_path)
    plain = {(r.method, r.epsilon): r.accuracy_mean for r in run_tuned(spec, "configured", cache=cache).rows}
    tuned = run_tuned(spec, "held-out", cache=cache)
    assert {(r.method, r.epsilon) for r in tuned.rows} == set(plain)
    for r in tuned.rows:
        assert r.accuracy_mean >= plain[(r.method, r.epsilon)]
        if r.method != "non_private":
            assert r.tuned.startswith("best on the test queries (not private): ")


def test_private_rows_spend_the_release_budget_and_report_the_total(tmp_path):
    spec = _spec(epsilons=(1.0, 10.0))
    rows = run_tuned(spec, "private", cache=ResultCache(tmp_path)).rows
    for r in rows:
        if r.method == "non_private":
            continue
        assert r.tuned.startswith("private: ") and r.epsilon in spec.epsilons and r.delta == spec.delta
        knobs = dict(kv.split("=") for kv in r.tuned[len("private: "):].split(" (")[0].split(", "))
        problem = Problem(n=r.n, dim=r.dim, classes=r.classes, lam=float(knobs.get("lam", r.lam)),
                          teachers=int(knobs.get("teachers", r.teachers)), budget=r.budget)
        want = get_method(r.method).calibrate(release_budget(PrivacyBudget(r.epsilon, r.delta)), problem)
        assert r.sigma == pytest.approx(want.sigma, rel=1e-12) or r.beta == pytest.approx(want.beta, rel=1e-12)
        # The total, by an independent sum: k selection releases of (eps_s / k) and the release.
        k = int(r.tuned.split("among ")[1].split(" ")[0])
        spent = k * selection_budget(PrivacyBudget(r.epsilon, r.delta), k).epsilon + \
            release_budget(PrivacyBudget(r.epsilon, r.delta)).epsilon
        assert spent <= r.epsilon * (1 + 1e-12) and math.isclose(spent, r.epsilon, rel_tol=1e-12)
    assert SELECTION_FRACTION < 1


def test_private_choice_does_not_depend_on_the_other_methods(tmp_path):
    alone = run_tuned(_spec(methods=("subsample_aggregate",)), "private", cache=ResultCache(tmp_path / "a")).rows
    both = run_tuned(_spec(), "private", cache=ResultCache(tmp_path / "b")).rows
    pick = {(r.method, r.epsilon): (r.tuned, r.accuracy_mean) for r in both}
    for r in alone:
        assert pick[(r.method, r.epsilon)] == (r.tuned, r.accuracy_mean)


def test_the_selection_seed_is_its_own():
    seeds = {tuned_seed(0), selection_seed(0), 0}
    assert len(seeds) == 3 and tuned_seed(0) != tuned_seed(1)


def test_a_cached_selection_is_reused_and_secure_noise_is_never_cached(tmp_path):
    cache = ResultCache(tmp_path)
    spec = _spec(methods=("subsample_aggregate",), epsilons=(1.0,))
    first = run_tuned(spec, "private", cache=cache)
    keys = set(cache.keys())
    again = run_tuned(spec, "private", cache=cache)
    assert [r.accuracy_mean for r in again.rows] == [r.accuracy_mean for r in first.rows] and set(cache.keys()) == keys
    secure = run_tuned(_spec(methods=("subsample_aggregate",), epsilons=(1.0,), secure_noise=True), "private",
                       cache=cache)
    assert secure.rows and set(cache.keys()) == keys


def test_unknown_mode_is_named():
    with pytest.raises(ValueError, match="tuning"):
        run_tuned(_spec(), "best")


def test_tuning_is_a_spec_field_that_keeps_the_configured_keys(tmp_path):
    from privcore.engine.runner import read_cached, run_sweep

    spec = _spec(methods=("subsample_aggregate",), epsilons=(1.0,))
    assert "tuning" not in spec.to_json() and '"tuning": "private"' in _spec(tuning="private").to_json()
    tuned = SweepSpec.from_json(_spec(tuning="held-out").to_json())
    assert tuned.tuning == "held-out"
    with pytest.raises(ValueError, match="tuning"):
        _spec(tuning="best")
    cache = ResultCache(tmp_path)
    via_sweep = run_sweep(_spec(methods=("subsample_aggregate",), epsilons=(1.0,), tuning="held-out"), cache=cache)
    from privcore.engine import tuned

    direct = tuned.run_tuned(spec, "held-out", cache=cache, run=run_sweep)
    assert [r.to_dict() | {"seconds": 0, "cached": 0} for r in via_sweep.rows] == \
        [r.to_dict() | {"seconds": 0, "cached": 0} for r in direct.rows]
    assert via_sweep.spec.tuning == "held-out" and read_cached(via_sweep.spec, cache) is None


def test_copy_as_code_carries_the_tuning():
    from privcore.engine.code import cli_command, python_code

    spec = _spec(tuning="private")
    assert "--tuning private" in cli_command(spec) and "tuning='private'" in python_code(spec)
    assert "--tuning" not in cli_command(_spec()) and "tuning" not in python_code(_spec())


def _pick_first(gap: float, b: float) -> float:
    """P(s_0 + L_0 > s_1 + L_1) for Laplace(b) noise and s_0 - s_1 = gap (exact: the difference of
    two Laplace(b) variables has CDF 1 - (1 + x/(2b)) e^(-x/b) / 2 for x >= 0)."""
    def cdf(x: float) -> float:
        tail = 0.5 * (1.0 + abs(x) / (2.0 * b)) * math.exp(-abs(x) / b)
        return 1.0 - tail if x >= 0 else tail
    return cdf(gap)


@pytest.mark.parametrize("n_val, eps", [(800, 0.1), (200, 0.3), (50, 1.0)])
def test_report_noisy_max_meets_its_epsilon_exactly_and_the_monotone_scale_does_not(n_val, eps):
    from privcore.engine.tuning import noisy_max_scale

    delta_score = 1.0 / n_val  # a replaced validation row: candidate 0 right -> wrong, candidate 1 wrong -> right
    worst = {}
    for name, b in (("ours", noisy_max_scale(n_val, eps)), ("monotone scale (known-bad)", 1.0 / (n_val * eps))):
        ratios = []
        for i in range(-400, 401):
            gap = i * b / 40.0
            p, q = _pick_first(gap, b), _pick_first(gap - 2 * delta_score, b)  # both outcomes, both directions
            ratios += [p / q, (1 - q) / (1 - p)]
        worst[name] = max(ratios)
    assert worst["ours"] <= math.exp(eps) * (1 + 1e-12)
    assert worst["monotone scale (known-bad)"] > math.exp(1.5 * eps)
    # The ratio reaches e^(2 Delta / b) only as the gap goes to minus infinity: the limit, checked directly,
    # catches a scale even slightly below 2 Delta / eps (c = 1.9), which the finite grid above would not.
    for c, ok in ((2.0, True), (1.9, False)):
        b = c / (n_val * eps)
        assert (2 * delta_score / b <= eps * (1 + 1e-12)) is ok
    assert noisy_max_scale(n_val, eps) == pytest.approx(2.0 / (n_val * eps), rel=1e-15)


def test_the_selection_uses_the_scale_of_its_share_and_of_the_validation_part(monkeypatch, tmp_path):
    """private_choice itself: its noisy max is called with |V| of the public split and f eps."""
    import privcore.engine.tuning as tuning

    seen = []
    real = tuning.noisy_max_scale
    monkeypatch.setattr(tuning, "noisy_max_scale", lambda n, e: seen.append((n, e)) or real(n, e))
    spec = _spec(methods=("subsample_aggregate",), epsilons=(1.0, 10.0))
    run_tuned(spec, "private", cache=ResultCache(tmp_path))
    from privcore.data import load_dataset

    ds = load_dataset("synthetic", seed=0)
    n_val = ds.n - int(round(0.8 * ds.n))
    assert {n for n, _ in seen} == {n_val}
    assert sorted(e for _, e in seen) == pytest.approx([SELECTION_FRACTION * e for e in spec.epsilons])


def test_a_statement_of_a_tuned_row_states_the_picked_knobs_and_the_selection():
    from privcore.statement import STATEMENT_FIELDS, privacy_statement, statement_markdown

    problem = Problem(n=4000, dim=784, classes=10, teachers=16, budget=10)
    text = ("private: neighbours=50, sample_rate=0.2 (chosen among 9 candidates with 0.1 of (ε, δ); the release "
            "used the rest; ε and δ are the totals)")
    s = privacy_statement("private_knn", 3.0, 1e-5, problem, tuned=text)
    assert tuple(s) == STATEMENT_FIELDS
    variant = get_method("private_knn[neighbours=50,sample_rate=0.2]")
    want = variant.calibrate(release_budget(PrivacyBudget(3.0, 1e-5)), problem)
    assert s["noise"]["sigma"] == pytest.approx(want.sigma, rel=1e-12)
    assert s["epsilon"] == pytest.approx(3.0, rel=1e-12) and s["delta"] == pytest.approx(1e-5, rel=1e-12)
    assert s["knob_selection"]["candidates"] == 9 and s["setting"]["neighbours"] == 50
    held = privacy_statement("subsample_aggregate", 3.0, 1e-5, problem, tuned="best on the test queries (not private): teachers=64")
    assert held["setting"]["teachers"] == 64 and held["epsilon"] == 3.0
    assert "NOT covered" in statement_markdown(held)
    assert privacy_statement("subsample_aggregate", 3.0, 1e-5, problem)["knob_selection"] is None


def test_a_candidate_its_share_cannot_calibrate_scores_zero_and_the_rest_still_run(tmp_path):
    # Private-kNN at eps = 0.05: each of 9 candidates gets 0.05 * 0.1 / 9 for |V| answers, beyond any
    # noise multiplier; the selection still picks, and the release runs at 90 % of eps.
    spec = _spec(methods=("private_knn",), epsilons=(0.05, 10.0))
    rows = [r for r in run_tuned(spec, "private", cache=ResultCache(tmp_path)).rows if r.method == "private_knn"]
    assert {r.epsilon for r in rows} <= {0.05, 10.0} and any(r.epsilon == 10.0 for r in rows)


def test_methods_whose_answers_couple_queries_get_no_private_selection(tmp_path):
    from privcore.data import load_dataset
    from privcore.engine.tuning import LAM_AUTO_COUPLED_NOTE, private_choice
    from privcore.engine.runner import run_sweep

    assert REGISTRY["sparse_vector"].couples_queries and REGISTRY["pate_student"].couples_queries
    assert not any(REGISTRY[m].couples_queries for m in REGISTRY if m not in ("sparse_vector", "pate_student"))
    ds = load_dataset("synthetic", seed=0)
    with pytest.raises(ValueError, match="sparse_vector cannot be selected privately"):
        private_choice([(REGISTRY["sparse_vector"], lambda d: Problem(n=d.n, dim=d.dim, classes=d.classes))], ds, 0,
                       "corrected", [PrivacyBudget(1.0, 1e-5)], "cpu", 1, lambda j: j, ("x", "y"))
    spec = _spec(methods=("sparse_vector",), epsilons=(10.0,), teachers=64)
    rows = run_tuned(spec, "private", cache=ResultCache(tmp_path)).rows
    sv = next(r for r in rows if r.method == "sparse_vector")
    assert sv.tuned.startswith("private: as configured") and sv.teachers == 64 and sv.epsilon == 10.0
    auto = run_sweep(_spec(methods=("sparse_vector",), epsilons=(10.0,), lam="auto"), cache=ResultCache(tmp_path))
    row = next(r for r in auto.rows if r.method == "sparse_vector")
    assert LAM_AUTO_COUPLED_NOTE in row.note and row.sigma is None
    full = REGISTRY["sparse_vector"].calibrate(PrivacyBudget(10.0, 1e-5), Problem(
        n=row.n, dim=row.dim, classes=row.classes, teachers=row.teachers, budget=row.budget))
    assert row.beta == pytest.approx(full.beta, rel=1e-12)  # the whole budget: nothing was spent on a choice


def test_a_tuned_estimate_counts_the_candidates(tmp_path, monkeypatch):
    from privcore.engine.cost import estimate_spec
    from privcore.engine.tuned import estimate_seconds

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))  # nothing cached: every candidate is predicted
    plain = estimate_spec(_spec()).seconds
    held = estimate_seconds(_spec(tuning="held-out"))
    private = estimate_seconds(_spec(tuning="private"))
    assert held > plain and private > plain


def _answers_with_one_test_row_replaced(method: str):
    """(answers, answers with test row 7 replaced, other rows' indices) of ``method`` under the same
    seed, released the way a selection's candidate is: on a context whose test set is the queries."""
    import torch

    from privcore.context import TrainContext
    from privcore.data import Dataset, load_dataset

    ds = load_dataset("synthetic", seed=0)
    x_other = ds.x_test.copy()
    x_other[7] = ds.x_test[300]
    other = Dataset(ds.name, ds.x_train, ds.y_train, x_other, ds.y_test, ds.classes, ds.fingerprint + ":r7", ds.notes)
    m = REGISTRY[method]
    problem = Problem(n=ds.n, dim=ds.dim, classes=ds.classes, lam=1e-2, teachers=8, budget=ds.x_test.shape[0],
                      batch_size=64, epochs=1)
    scales = [m.calibrate(PrivacyBudget(3.0, 1e-5), problem)]
    out = []
    for d in (ds, other):
        ctx = TrainContext.from_dataset(d, problem, 0, torch.device("cpu"))
        got = m.release(ctx, scales, 2)
        if m.releases == "model":
            got = ctx.logits(got.view(-1, *got.shape[-2:]), ctx.x_test).argmax(-1)
        elif m.releases == "logits":
            got = got.argmax(-1)
        out.append(got)
    return out[0], out[1], [i for i in range(ds.x_test.shape[0]) if i != 7]


@pytest.mark.parametrize("method", [m for m in REGISTRY if not REGISTRY[m].couples_queries])
def test_each_answer_depends_on_its_own_query_alone(method):
    """What report noisy max's 1/|V| sensitivity needs (Method.couples_queries False): under the same noise,
    replacing one query row changes no answer to another row."""
    import torch

    a, b, others = _answers_with_one_test_row_replaced(method)
    assert torch.equal(a[..., others], b[..., others]), method


def test_the_answer_coupling_check_catches_the_student():
    a, b, others = _answers_with_one_test_row_replaced("pate_student")  # trained on the query rows' features
    assert not bool((a[..., others] == b[..., others]).all())



@pytest.mark.slow  # 7-9 s: the full suite runs it; the quick loop keeps the soundness checks
def test_the_cli_switch_prints_the_knobs_picked_and_warns_that_held_out_is_not_private(tmp_path, monkeypatch, capsys):
    import csv
    import io

    from privcore.cli import main

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    base = ["sweep", "--dataset", "synthetic", "--methods", "subsample_aggregate,private_knn[neighbours=10]",
            "--epsilons", "1,10", "--repeats", "1", "--teachers", "8", "--quiet"]
    assert main(base + ["--tuning", "held-out"]) == 0
    out, err = capsys.readouterr()
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {r["method"] for r in rows} == {"subsample_aggregate", "private_knn[neighbours=10]", "non_private"}
    assert all(r["tuned"].startswith("best on the test queries (not private): ") for r in rows if r["method"] != "non_private")
    assert "not a private result" in err
    assert main(base + ["--tuning", "private"]) == 0
    out, err = capsys.readouterr()
    assert all(r["tuned"].startswith("private: ") for r in csv.DictReader(io.StringIO(out)) if r["method"] != "non_private")
    assert "not a private result" not in err
    assert main(base + ["--tuning", "best"]) == 2


@pytest.mark.parametrize("tuning", ["held-out", "private"])
def test_the_reference_of_a_tuned_chart_is_the_best_non_private_model(tmp_path, tuning):
    """A walk-through saw tuned private methods above the non-private line, which stayed at the configured
    lambda: in both tuned modes the reference is the best over its lambda grid, picked on the test queries,
    and says so."""
    digits = dict(data=DataSpec(name="digits", n=400), methods=("dpsgd",), epochs=1)
    spec = _spec(lam=0.5, **digits)
    store = ResultCache(tmp_path / "c")
    ref = [r for r in run_tuned(spec, tuning, cache=store).rows if r.method == "non_private"]
    each = {lam: next(r for r in run_sweep(_spec(lam=lam, **digits), cache=store).rows
                      if r.method == "non_private").accuracy_mean
            for lam in get_method("non_private").tuning_grid["lam"]}
    assert len(ref) == 1 and ref[0].accuracy_mean == max(each.values()) > each[0.5]
    assert ref[0].tuned.startswith("best on the test queries (not private): lam=")
    assert each[float(ref[0].tuned.rsplit("=", 1)[1])] == ref[0].accuracy_mean
    configured = [r for r in run_sweep(spec, cache=store).rows if r.method == "non_private"]
    assert configured[0].accuracy_mean == each[0.5] and configured[0].tuned is None
