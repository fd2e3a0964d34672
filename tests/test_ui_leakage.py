"""ui/leakage.py: the per-method table reads honestly. An audit whose trials saw no false positive has an
infinite plug-in estimate for any method; it is said in words, never shown as 'estimate ∞' beside a claim."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

pytest.importorskip("pandas")
from privcore.leakage.stats import EpsilonBound
from ui.leakage import leakage_table, no_estimate_note


def _result(method: str, epsilon: float, fp: int, fn: int, n: int = 32):
    from privcore.leakage.stats import epsilon_from_rates

    bound = EpsilonBound(lower=0.0, estimate=epsilon_from_rates(fp / n, fn / n, 1e-5), upper=math.inf,
                         confidence=0.95, threshold=0.5, fpr=fp / n, fnr=fn / n, n_in=n, n_out=n, n_select=n,
                         delta=1e-5)

    def attack(name: str):
        raise KeyError(name)

    return SimpleNamespace(method=method, accuracy=0.8, epsilon=epsilon, audit=bound, attack=attack, cached=True,
                           seconds=0.0)


def test_zero_false_positives_give_no_infinite_estimate():
    results = [_result("dpsgd", 3.0, fp=0, fn=20), _result("model_sensitivity", 3.0, fp=8, fn=20),
               _result("non_private", math.inf, fp=0, fn=2)]
    table = leakage_table(results)
    assert list(table["Measured ε ≥ (95 %)"]) == [0.0, 0.0, 0.0]  # the bound: a number
    estimates = list(table["ε estimate"])
    assert estimates[0] == "none" and estimates[2] == "none" and not any("∞" in e for e in estimates), estimates
    assert float(estimates[1]) > 0, estimates
    # why there is none is said below the table, not in a cell (cut off at 800 and 1,400 px)
    # The trials named are those that bound ε, said as such (a walk-through read 256 beside a caption's 512).
    assert no_estimate_note(results) == ("No point estimate of ε where an error rate was 0 in the trials that bound "
                                         "ε (half of each data set's releases; the other half chose the threshold): "
                                         "DP-SGD, no false positive in 32 trials; Non-private (no noise), no false "
                                         "positive in 32 trials.")
    assert no_estimate_note(results[1:2]) == ""
    claimed = list(table["Claimed ε"])
    assert claimed == ["3", "3", "none (∞)"], claimed  # short enough for the column


def test_leakage_table_cells_are_short_and_the_method_is_pinned():
    """Every cell is one short value (a phrase in a cell was cut off); long explanations are hover help."""
    pytest.importorskip("streamlit")
    from ui.leakage import LEAKAGE_HEADERS, leakage_table_config

    table = leakage_table([_result("dpsgd", 3.0, fp=0, fn=20), _result("non_private", math.inf, fp=0, fn=2)])
    cells = [str(v) for c in table.columns if c != "Method" for v in table[c]]
    assert max(len(v) for v in cells) <= 9, cells
    config = leakage_table_config(table.columns)
    assert config["Method"]["pinned"] is True
    assert config["Measured ε ≥ (95 %)"]["label"] == "Measured ε ≥" and "95 %" in config["Measured ε ≥ (95 %)"]["help"]
    assert all(config[c].get("help") for c in table.columns if c != "Method")
    assert all(len(LEAKAGE_HEADERS[c][0]) <= 15 for c in LEAKAGE_HEADERS)


# ---------------------------------------------------------------- the page's texts agree (browser walk-through)


def _groups():  # (methods that retrain per release, methods that train once), from the registry
    from privcore.methods import REGISTRY

    return ([n for n, m in REGISTRY.items() if m.trains_per_release],
            [n for n, m in REGISTRY.items() if not m.trains_per_release])


def test_audit_texts_name_the_same_groups_in_the_same_words():
    """The help said "Loss perturbation and DP-SGD train once per release; the other methods get 8 times
    more" (missing PATE student), the caption "8x more for the methods that train once": "train once"
    named both groups. Every text now uses the same two phrases, the list from the registry."""
    from privcore.leakage import NON_PRIVATE, audit_trials_for
    from privcore.methods import get_method
    from ui.leakage import QUICK_WORDS, RETRAIN_WORDS, audit_caption, audit_help, pending_text

    retrain, once = _groups()
    assert retrain and once
    help_text = audit_help()
    labels = ", ".join(get_method(m).label for m in retrain)
    assert f"This many for the {RETRAIN_WORDS}: {labels}. The {QUICK_WORDS}" in help_text  # PATE student was missing
    assert not any(get_method(m).label in help_text for m in once)
    assert f"{QUICK_WORDS} (and the non-private model) get 8 times more, up to 1,024" in help_text
    assert "one stream of B queries for sparse vector" in help_text and "one student" in help_text
    specs = [SimpleNamespace(method=m, audit_trials=audit_trials_for(m, 64)) for m in (NON_PRIVATE, *once, *retrain)]
    caption = audit_caption(specs)
    assert caption.startswith(f"a 95 % lower bound from 512 releases for the {QUICK_WORDS}"), caption
    assert caption.endswith(f"and 64 for the {RETRAIN_WORDS} — {labels} —"), caption
    shown = [SimpleNamespace(method=sp.method) for sp in specs[:2]]  # the quick view: only those results
    assert RETRAIN_WORDS not in audit_caption(specs, shown)
    slow = [sp for sp in specs if sp.method in retrain]
    pending = pending_text(slow, 64)
    assert RETRAIN_WORDS in pending and "64 audit releases" in pending and f"512 for the {QUICK_WORDS}" in pending
    for text in (help_text, caption, pending):
        assert "train once per release" not in text and "8× more for the methods that train once" not in text


def _leak(method: str, *, family: str, lower: float, canary_in, canary_out, epsilon: float = 3.0):
    from privcore.leakage.stats import roc

    bound = EpsilonBound(lower=lower, estimate=1.0, upper=math.inf, confidence=0.95, threshold=0.5, fpr=0.1,
                         fnr=0.1, n_in=32, n_out=32, n_select=32, delta=1e-5)
    curve = roc(canary_in, canary_out)

    def attack(name: str):
        if name != "canary":
            raise KeyError(name)
        return SimpleNamespace(roc=curve, auc=curve.auc)

    return SimpleNamespace(method=method, family=family, accuracy=0.8, epsilon=epsilon, audit=bound, attack=attack,
                           cached=True, seconds=0.0)


def _canary_results(lower: float = 0.0):
    """One private method whose single top-scoring member canary beats all 40 non-member canaries."""
    from privcore.leakage import NON_PRIVATE

    retrain, once = _groups()
    rng = np.random.default_rng(0)
    lucky_in = np.concatenate([[10.0], rng.normal(size=39)])
    return [_leak(NON_PRIVATE, family="baseline", lower=4.2, canary_in=rng.normal(3, 1, 40),
                  canary_out=rng.normal(size=40), epsilon=math.inf),
            _leak(once[0], family="training", lower=lower, canary_in=lucky_in, canary_out=rng.normal(size=40)),
            _leak(retrain[0], family="training", lower=lower, canary_in=rng.normal(size=40),
                  canary_out=rng.normal(size=40))]


def test_a_curve_above_the_bound_from_few_canaries_is_explained_beside_the_chart():
    """LiRA on canaries: a curve lay above the "DP bound" at FPR 1e-4..1e-3 while the text said no method
    leaked beyond its claim, unexplained. One member found among 40 non-members is a chance hit: the
    caption says so and that the verdict rests on the Clopper-Pearson bound; the chart marks 1/40."""
    from privcore.methods import get_method
    from ui.leakage import bound_crossings, roc_caption, roc_figure

    results = _canary_results()
    once = get_method(results[1].method).label
    crossing, fewest = bound_crossings(results, "canary", 3.0, 1e-5)
    assert crossing == [once] and fewest == (40, 40)  # the non-private model is not counted
    caption = roc_caption(results, "canary", 3.0, 1e-5)
    assert f"({once} here). That is sampling noise, not a measured violation" in caption, caption
    assert "1/40 ≈ 0.025" in caption and "Clopper-Pearson 95 % lower bound" in caption
    assert "no test can leave" not in caption
    fig = roc_figure(results, "canary", 3.0, 1e-5)
    names = [t.name for t in fig.data]
    assert names[0] == "DP bound at ε = 3 (on the true rates)", names
    line = next(t for t in fig.data if t.name.startswith("1 false positive in 40 non-members"))
    assert list(line.x) == [1 / 40, 1 / 40]
    # Nothing crosses: the caption still says what the curves are, without naming a method.
    calm = roc_caption(results[:1] + results[2:], "canary", 3.0, 1e-5)
    assert "here)" not in calm and "Whether a method leaked beyond its claim rests on" in calm


def test_describe_names_no_method_when_every_lower_bound_is_zero():
    """"largest measured lower bound ε ≥ 0.00, Model sensitivity" named one method of a tie at 0."""
    from ui.leakage import describe

    text = describe(_canary_results(lower=0.0), 3.0)
    assert "no method's lower bound on ε is above 0" in text and "largest measured" not in text, text
    text = describe(_canary_results(lower=0.5), 3.0)
    assert "largest measured lower bound ε ≥ 0.50" in text, text
    # A bound above the claim: a violation at 95 %, said with its error rate.
    text = describe(_canary_results(lower=3.5), 3.0)
    assert "measured more leakage than claimed" in text and "at most one audit in 20" in text, text


def test_roc_legend_is_below_the_plot_and_the_title_wraps():
    """At 800 px the legend beside the plot left it ~125 px wide and cut the x-axis title."""
    from ui.leakage import roc_figure

    fig = roc_figure(_canary_results(), "canary", 3.0, 1e-5)
    assert fig.layout.legend.orientation == "v" and fig.layout.legend.y < 0 and fig.layout.legend.x == 0
    shown = sum(1 for t in fig.data if t.showlegend is not False)
    assert fig.layout.margin.b >= 22 * shown and fig.layout.height - fig.layout.margin.t - fig.layout.margin.b >= 360
    assert all(len(line) <= 50 for line in fig.layout.title.text.split("<br>")), fig.layout.title.text


def test_the_page_uses_the_shared_texts(app_env):
    """The page itself: the audit control's help and the captions come from the functions above."""
    import json

    from streamlit.testing.v1 import AppTest

    from privcore.methods import REGISTRY
    from ui.leakage import QUICK_WORDS, RETRAIN_WORDS, audit_help

    quick = [n for n, m in REGISTRY.items() if not m.trains_per_release and m.supports(0.0)][:1]
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app_pages" / "measured_leakage.py"),
                           default_timeout=240)
    at.query_params.update({"dataset": '"synthetic"', "n": "300", "teachers": "4", "budget": "5", "eps": "10.0",
                            "lk_refs": "8", "lk_audit": "32", "lk_attack": "canary", "methods": json.dumps(quick)})
    at.run()
    assert not at.exception, at.exception
    control = at.select_slider(key="lk_audit_w")
    assert control.label == "Audit trials per data set (retraining methods)" and control.help == audit_help()
    captions = " ".join(c.value for c in at.caption)
    assert f"from 256 releases for the {QUICK_WORDS}" in captions and RETRAIN_WORDS not in captions
    assert "Clopper-Pearson 95 % lower bound on ε" in captions and "no test can leave" not in captions


def test_the_aucs_come_before_the_true_positive_rates():
    """The summary above the table quotes the canary attack's AUC, which sat after six other columns,
    off-screen at 1280 px: every AUC now comes first."""
    roc = SimpleNamespace(auc=0.6, tpr_at_0_1=0.01, tpr_at_1=0.02)
    result = _result("dpsgd", 3.0, fp=0, fn=20)
    result.attack = lambda name: SimpleNamespace(roc=roc)
    columns = list(leakage_table([result]).columns)
    aucs = [columns.index(f"AUC {s}") for s in ("loss", "LiRA", "canary")]
    assert max(aucs) < min(i for i, c in enumerate(columns) if c.startswith("TPR@")), columns


def test_each_methods_roc_curve_has_its_own_dash_and_marker():
    """Every ROC curve was a solid line (the PATE student's grey like the bound's): each method's curve now has
    the dash and marker of its card, as on every other chart."""
    from ui.figures import method_style
    from ui.leakage import roc_figure

    results = _canary_results()
    fig = roc_figure(results, "canary", 3.0, 1e-5)
    curves = [t for t in fig.data if "(AUC" in (t.name or "")]
    styles = [(t.line.dash, t.marker.symbol) for t in curves]
    assert len(curves) == len(results) and len(set(styles)) == len(styles), styles
    assert styles == [(method_style(r.method)[1], method_style(r.method)[0]) for r in results]


def test_a_leakage_csv_row_carries_its_setting():
    """The CSV had the method's result and epsilon, delta, accounting only: no data set, B, N, seed or the
    attack's sizes. Each row now carries its spec's settings; the chart's settings name the attack."""
    from types import SimpleNamespace

    from privcore.engine.specs import DataSpec
    from privcore.leakage import LeakageSpec
    from ui.leakage_export import ROW_SETTINGS, leakage_rows, leakage_settings

    specs = [LeakageSpec(method=m, data=DataSpec(name="digits", n=300, augment=False), epsilon=2.0, budget=7,
                         references=8, audit_trials=a) for m, a in (("model_sensitivity", 64), ("dpsgd", 8))]
    results = [SimpleNamespace(method=sp.method, delta=sp.delta, n_train=160, accounting=sp.accounting,
                               summary=lambda sp=sp: {"method": sp.method, "epsilon": 2.0}) for sp in specs]
    rows = leakage_rows(specs, results)
    assert set(ROW_SETTINGS) <= set(rows[0]) and rows[0]["budget"] == 7 and rows[1]["audit_trials"] == 8
    assert rows[0]["data_n"] == 300
    meta = leakage_settings(specs, results, "LiRA", "digits")
    assert meta["dataset"] == "digits" and meta["budget"] == 7 and meta["n"] == 160 and meta["attack"] == "LiRA"
    assert meta["audit trials"] == "8–64" and meta["reference models"] == 8
