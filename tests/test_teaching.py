"""Teaching figure builders (ui/teaching.py): expected traces, and numbers consistent with privcore."""

from __future__ import annotations

import math

import numpy as np
import plotly.graph_objects as go
import pytest

from privcore import METHOD_NAMES, REGISTRY, Problem
from privcore.accounting import (
    advanced_gaussian_sigma,
    analytic_gaussian_sigma,
    dpsgd_epsilon,
    exact_gaussian_sigma,
    optimal_beta,
    zcdp_beta,
)
from ui import paper as P
from ui import teaching as T


def _names(fig: go.Figure) -> list[str]:
    return [t.name or "" for t in fig.data]


# ---------------------------------------------------------------- 1. Laplace-like vs Gaussian


def test_noise_summary_uses_privcore_calibrations():
    s = T.noise_summary(1.0, 1e-5, sensitivity=2.0, dim=10)
    assert s["laplace_beta"] == pytest.approx(0.5)
    assert s["laplace_mean_radius"] == pytest.approx(10 / 0.5)
    assert s["gaussian_sigma"] == pytest.approx(analytic_gaussian_sigma(1.0, 1e-5, 2.0))
    assert s["gaussian_sigma"] == pytest.approx(2 * 3.7306, rel=1e-3)  # SPEC check value, times Delta
    assert s["classical_sigma"] > s["gaussian_sigma"]
    # E||b|| of sigma * chi_d lies just under sigma sqrt(d).
    assert s["gaussian_sigma"] * math.sqrt(9.5) < s["gaussian_mean_radius"] < s["gaussian_sigma"] * math.sqrt(10)


def test_noise_figure_traces_and_densities():
    fig = T.noise_figure(1.0, 1e-5, sensitivity=1.0, dim=10, samples=300)
    names = _names(fig)
    assert sum("Laplace-like" in n for n in names) == 5  # D, D', samples, radius, mean radius
    assert sum("Gaussian" in n for n in names) == 5
    assert "1e-05" not in fig.layout.title.text + " ".join(names) and "δ = 1e-5" in fig.layout.title.text  # as titles write it
    rows = T.noise_rows(1.0, 1e-5, sensitivity=1.0, dim=10, samples=300)
    for dist in ("laplace_like", "gaussian"):
        for panel in ("density_1d", "radius"):
            pts = [r for r in rows if r["panel"] == panel and r["distribution"] == dist and r["dataset"] == "D"]
            x = np.array([r["x"] for r in pts])
            y = np.array([r["y"] for r in pts])
            assert np.trapezoid(y, x) == pytest.approx(1.0, abs=0.02), (dist, panel)
        samples = [r for r in rows if r["panel"] == "samples_2d" and r["distribution"] == dist]
        assert len(samples) == 300
    # Mean radius: Laplace-like d/beta grows linearly, the Gaussian as sqrt(d): the Gaussian wins at MNIST size.
    mr = {(r["distribution"], r["x"]): r["y"] for r in rows if r["panel"] == "mean_radius"}
    assert mr[("laplace_like", 1.0)] < mr[("gaussian", 1.0)]
    assert mr[("laplace_like", 10000.0)] > 10 * mr[("gaussian", 10000.0)]


def test_noise_figure_pure_dp_has_no_gaussian():
    fig = T.noise_figure(0.5, 0.0, dim=3, samples=50)
    assert not any("Gaussian" in n for n in _names(fig))
    assert "δ = 0" in fig.layout.title.text


def test_laplace_like_samples_match_radius_law():
    rows = T.noise_rows(2.0, 0.0, sensitivity=1.0, dim=2, samples=4000, seed=3)
    pts = np.array([[r["x"], r["y"]] for r in rows if r["panel"] == "samples_2d"])
    # Radius ~ Gamma(2, 1/beta) with beta = 2: mean 1.
    assert np.linalg.norm(pts, axis=1).mean() == pytest.approx(1.0, rel=0.05)


# ---------------------------------------------------------------- 2. Composition


@pytest.mark.slow
@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.5, 1e-6), (4.0, 1e-3)])
def test_composition_tight_le_advanced_le_basic(eps, delta):
    rows = T.composition_rows(eps, delta, sensitivity=1.0)
    by = {(r["panel"], r["rule"], r["budget"]): r["value"] for r in rows}
    for b in T.DEFAULT_BUDGETS:
        basic, adv, tight = by[("gaussian", "basic", b)], by[("gaussian", "advanced", b)], by[("gaussian", "tight", b)]
        assert tight <= adv * (1 + 1e-9) <= basic * (1 + 1e-9), b
        assert tight == pytest.approx(exact_gaussian_sigma(eps, delta, b, 1.0))
        assert adv == pytest.approx(advanced_gaussian_sigma(eps, delta, b, 1.0).sigma)
        assert basic == pytest.approx(analytic_gaussian_sigma(eps / b, delta / b, 1.0))
        # Exponential mechanism: larger beta = less noise; tight >= zCDP, corrected basic = eps/(2B).
        beta_basic, beta_z, beta_t = (by[("exponential", r, b)] for r in ("basic", "zcdp", "tight"))
        assert beta_basic == pytest.approx(eps / (2 * b))
        assert beta_z == pytest.approx(zcdp_beta(eps, delta, b))
        assert beta_t == pytest.approx(optimal_beta(eps, delta, b))
        assert beta_t >= max(beta_basic, beta_z) * (1 - 1e-9)
        assert by[("exponential", "as published", b)] == pytest.approx(eps / b)
    # SPEC: tight Gaussian composition needs 3 to 5.7 times less noise than the paper's for B = 10..1000.
    if (eps, delta) == (1.0, 1e-5):
        ratios = [r["ratio_to_advanced"] for r in rows if r["rule"] == "tight" and r["panel"] == "gaussian"
                  and 10 <= r["budget"] <= 1000]
        assert 2.5 < min(ratios) and max(ratios) < 6.5


def test_composition_figure_traces():
    fig = T.composition_figure(1.0, 1e-5, budgets=(1, 10, 100), current_budget=10)
    names = _names(fig)
    assert len(fig.data) == 7
    assert any("tight" in n and "Gaussian" in n for n in names)
    assert any("optimal bounded-range" in n for n in names)
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    # Pure DP: only the basic rules and the as-published line.
    fig0 = T.composition_figure(1.0, 0.0, budgets=(1, 10, 100))
    assert len(fig0.data) == 3
    rows0 = T.composition_rows(1.0, 0.0, budgets=(1, 10, 100))
    assert {r["rule"] for r in rows0} == {"basic", "as published"}
    lap = {r["budget"]: r["value"] for r in rows0 if r["panel"] == "gaussian"}
    assert lap[100] == pytest.approx(100.0)  # Laplace-like scale B Delta / eps


@pytest.mark.parametrize("delta", [1e-5, 0.0])
def test_composition_curves_differ_in_a_grey_printout(delta):
    """Every legend entry has its own line dash and marker: basic, advanced, zCDP and tight were all solid
    lines with round markers, told apart by colour alone (a browser walk-through, printed in grey)."""
    fig = T.composition_figure(1.0, delta, budgets=(1, 10, 100), current_budget=10)
    shown = [t for t in fig.data if t.showlegend is not False]
    styles = [(t.line.dash or "solid", t.marker.symbol or "circle") for t in shown]
    assert len(shown) == (7 if delta else 3) and len(set(styles)) == len(styles), styles


def test_composition_changes_with_epsilon():
    a = T.composition_rows(1.0, 1e-5, budgets=(100,))
    b = T.composition_rows(2.0, 1e-5, budgets=(100,))
    va = {(r["panel"], r["rule"]): r["value"] for r in a}
    vb = {(r["panel"], r["rule"]): r["value"] for r in b}
    assert vb[("gaussian", "tight")] < va[("gaussian", "tight")]
    assert vb[("exponential", "tight")] > va[("exponential", "tight")]


# ---------------------------------------------------------------- 3. Amplification


@pytest.mark.slow
def test_amplification_rows_and_figure():
    rates = (1e-3, 1e-2, 0.1, 1.0)
    rows = T.amplification_rows(1.0, 1e-5, rates=rates)
    by = {(r["bound"], r["q"]): r["epsilon"] for r in rows}
    eps0 = by[("no subsampling", 1.0)]
    for q in rates:
        assert by[("RDP (Opacus)", q)] == pytest.approx(dpsgd_epsilon(1.0, q, 1, 1e-5, "rdp"))
        assert by[("classic bound", q)] == pytest.approx(math.log1p(q * math.expm1(eps0)))
        assert by[("classic bound", q)] <= eps0 + 1e-12
    # Subsampling amplifies: epsilon grows with q for every bound.
    for bound in ("classic bound", "RDP (Opacus)", "PRV (Opacus)"):
        vals = [by[(bound, q)] for q in rates if (bound, q) in by]
        assert len(vals) >= 3 and all(x < y for x, y in zip(vals, vals[1:])), bound
    fig = T.amplification_figure(1.0, 1e-5, rates=rates, current_rate=0.01)
    assert len(fig.data) == 4
    assert fig.layout.xaxis.type == "log"
    with pytest.raises(ValueError):
        T.amplification_rows(1.0, 0.0)


# ---------------------------------------------------------------- 4. Hypothesis testing


def test_dp_region_constraints():
    x = np.linspace(0, 1, 101)
    lower, upper = T.dp_region(1.0, 1e-5, x)
    assert np.all(lower <= upper + 1e-12)
    assert np.all(upper <= np.e * x + 1e-5 + 1e-12)
    assert np.all(1 - x <= np.e * (1 - upper) + 1e-5 + 1e-9)
    lower0, upper0 = T.dp_region(1e-9, 0.0, x)
    assert np.allclose(lower0, x, atol=1e-6) and np.allclose(upper0, x, atol=1e-6)


@pytest.mark.parametrize("eps,delta", [(1.0, 1e-5), (0.3, 1e-3), (3.0, 1e-6)])
def test_gaussian_tradeoff_inside_region(eps, delta):
    rows = T.hypothesis_rows(eps, delta)
    gauss = [r for r in rows if r["curve"] == "gaussian"]
    assert gauss and gauss[0]["mu"] == pytest.approx(1 / analytic_gaussian_sigma(eps, delta, 1.0))
    x = np.array([r["fpr"] for r in gauss])
    lower, upper = T.dp_region(eps, delta, x)
    tpr = np.array([r["tpr"] for r in gauss])
    assert np.all(tpr <= upper + 1e-9) and np.all(tpr >= lower - 1e-9)
    # The calibrated sigma is the smallest: the curve touches the boundary somewhere (within 1 %).
    lap = [r for r in rows if r["curve"] == "laplace"]
    xl = np.array([r["fpr"] for r in lap])
    _, up_pure = T.dp_region(eps, 0.0, xl)
    assert np.all(np.array([r["tpr"] for r in lap]) <= up_pure + 1e-9)


def test_hypothesis_figure_traces():
    fig = T.hypothesis_figure(1.0, 1e-5)
    names = " | ".join(_names(fig))
    assert "Gaussian mechanism" in names and "Laplace mechanism" in names and "random guessing" in names
    fig0 = T.hypothesis_figure(1.0, 0.0)
    assert "Gaussian mechanism" not in " | ".join(_names(fig0))


# ---------------------------------------------------------------- 5. Method cards


def test_method_cards_from_registry():
    cards = T.method_cards(1.0, 0.0, Problem(n=1000, dim=20, classes=5, budget=100))
    assert [c["name"] for c in cards] == list(METHOD_NAMES)
    for card in cards:
        m = REGISTRY[card["name"]]
        assert card["summary"] == m.summary and card["assumptions"] == m.assumptions
        assert card["wins_when"] == m.wins_when and card["family"] == m.family
        assert [c["accounting"] for c in card["calibrations"]] == ["paper", "corrected", "tight"]
        md = T.method_card_markdown(card)
        assert m.label in md and m.wins_when in md
    dpsgd = next(c for c in cards if c["name"] == "dpsgd")
    assert all(c["error"] and "delta > 0" in c["error"] for c in dpsgd["calibrations"])
    sa = next(c for c in cards if c["name"] == "subsample_aggregate")
    forms = {c["accounting"]: c["formula"] for c in sa["calibrations"]}
    assert "eps/B" in forms["paper"] and "eps/(2B)" in forms["corrected"]
    assert "β = 0.005" in T.method_card_markdown(sa)  # corrected beta = eps/(2B) at B = 100


def test_invalid_inputs_raise():
    with pytest.raises(ValueError):
        T.noise_summary(-1.0, 0.0)
    with pytest.raises(ValueError):
        T.composition_rows(1.0, 1.5)
    with pytest.raises(ValueError):
        T.composition_rows(1.0, 1e-5, budgets=(0, 1))


# ---------------------------------------------------------------- 6. Paper figures (Reproduce page)


def test_paper_figures_respect_the_data():
    figs = {f.key: f for f in P.paper_figures(1438, 64, 10, image=True, min_n=64)}
    assert list(figs) == ["1a", "1b", "2a", "2b", "3", "4", "5a", "5b", "6a", "6b"]
    for f in figs.values():
        assert f.finding and f.label.startswith(f"Figure {f.key}")
        if f.vary is not None:
            assert f.values
    assert figs["1a"].delta == 0 and "dpsgd" not in figs["1a"].methods
    assert figs["1b"].delta == 1e-5 and "dpsgd" in figs["1b"].methods and max(figs["1b"].epsilons) == 1.0
    assert figs["2a"].vary == "budget" and figs["2a"].epsilons == (1.0,)
    assert figs["3"].vary == "delta" and all(v > 0 for v in figs["3"].values)
    assert max(figs["4"].values) == 1438 and min(figs["4"].values) >= 64       # no N beyond the data, none below T
    assert max(figs["5a"].values) == 64 and figs["5b"].values == tuple(range(2, 11))
    assert figs["6a"].methods == ("loss_perturbation",) and figs["6a"].by_epsilon
    assert max(figs["6b"].values) <= 1438 // 4
    grown = {f.key: f for f in P.paper_figures(1438, 64, 10, image=True, augment=True)}
    assert max(grown["4"].values) > 1438
    no_images = {f.key: f for f in P.paper_figures(1600, 20, 10, image=False, augment=True)}
    assert max(no_images["4"].values) == 1600


def _rows(acc, method, eps, xs, accs):
    return [{"method": method, "epsilon": eps, "lam": x, "accuracy_mean": a, "accuracy_std": 0.01, "accounting": acc}
            for x, a in zip(xs, accs)]


def test_epsilon_curves_figure_and_gaps():
    rows = _rows("paper", "loss_perturbation", 1.0, [1e-3, 1e-2], [0.5, 0.6]) + \
        _rows("paper", "loss_perturbation", 10.0, [1e-3, 1e-2], [0.7, 0.8]) + \
        _rows("paper", "non_private", float("inf"), [1e-3, 1e-2], [0.9, 0.9])
    fig = P.epsilon_curves_figure(rows, "lam", title="t", log_x=True)
    names = [t.name for t in fig.data]
    assert names == ["Loss perturbation, ε = 1", "Loss perturbation, ε = 10", "Non-private (no noise)"]
    assert fig.layout.xaxis.type == "log"
    corrected = _rows("corrected", "loss_perturbation", 1.0, [1e-3, 1e-2], [0.4, 0.6])
    gaps = P.accounting_gaps({"paper": rows, "corrected": corrected}, "lam")
    assert gaps == [{"method": "loss_perturbation", "accounting": "corrected", "mean_change": pytest.approx(-0.05),
                     "max_drop": pytest.approx(0.1), "points": 2}]


def test_cached_sweep_computes_nothing(tmp_path, monkeypatch):
    from privcore.engine.runner import run_sweep
    from privcore.engine.specs import DataSpec, SweepSpec

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    spec = SweepSpec(data=DataSpec(name="synthetic"), methods=("model_sensitivity",), epsilons=(1.0,), repeats=2)
    assert P.cached_sweep(spec) is None
    assert not list((tmp_path / "results").glob("*.val"))  # nothing was stored by the probe
    computed = run_sweep(spec)
    hit = P.cached_sweep(spec)
    assert hit is not None and hit.computed == 0 and hit.cached == len(computed.rows)
    assert [r["accuracy_mean"] for r in hit.rows] == [r["accuracy_mean"] for r in computed.rows]


# ---------------------------------------------------------------- browser walk-through (digits, 800 px)


@pytest.mark.slow
def test_noise_figure_marks_the_current_data_sets_size_inside_the_plot():
    """"MNIST model: D·C = 7840" was shown for digits (D·C = 640), its label touching the plot edge."""
    fig = T.noise_figure(3.0, 1e-5, dim=10, samples=50, reference_dim=640, reference_label="digits")
    notes = [a for a in fig.layout.annotations if "D·C" in (a.text or "")]
    assert [a.text for a in notes] == ["digits: D·C = 640"]
    note = notes[0]
    assert note.x == pytest.approx(math.log10(640)) and note.xref == "x4" and note.yref == "y4 domain"
    assert 0 < note.y < 0.5 and note.yanchor == "bottom" and note.xanchor == "right" and note.xshift < 0  # inside, left of the line, low (the curves rise to the top right)
    assert [s.x0 for s in fig.layout.shapes if s.line.dash == "dot"] == [640]
    assert not [a for a in fig.layout.annotations if "7840" in (a.text or "") or "MNIST" in (a.text or "")]
    low = T.noise_figure(3.0, 1e-5, dim=10, samples=50, reference_dim=20, reference_label="own")
    note = next(a for a in low.layout.annotations if "D·C" in (a.text or ""))
    assert note.xanchor == "left" and note.xshift > 0  # near the left edge: the label goes right of the line
    bare = T.noise_figure(3.0, 1e-5, dim=10, samples=50)
    assert not [a for a in bare.layout.annotations if "D·C" in (a.text or "")]


def test_noise_figure_titles_fit_a_narrow_window():
    """At 800 px (sidebar open) the title was cut ("…vs Gaus"), subplot titles overlapped and the last
    x title was cut: each line is now short (each panel is ~190 px wide there)."""
    fig = T.noise_figure(3.0, 1e-5, dim=10, samples=50)
    title_lines = fig.layout.title.text.split("<br>")
    assert len(title_lines) == 2 and all(len(line) <= 45 for line in title_lines), title_lines
    subplot = [a.text for a in fig.layout.annotations][:4]
    assert all(len(line) <= 32 for t in subplot for line in t.split("<br>")), subplot
    assert all(a.font.size <= 13 for a in list(fig.layout.annotations)[:4])
    assert len(fig.layout.xaxis4.title.text) <= 22, fig.layout.xaxis4.title.text
    assert fig.layout.margin.t >= 130  # two title lines above the subplot titles


def test_method_cards_typeset_their_formulas():
    """The cards showed raw ASCII ("sqrt(2/B)", "lam", "eps", "chi_{2C}"); Explore and Calibrate typeset
    them with ui.formula.display_latex, plain text only where it cannot read one safely."""
    from ui.formula import display_latex

    cards = T.method_cards(3.0, 1e-5, Problem(n=1000, dim=64, classes=10))
    shown = 0
    for card in cards:
        blocks = T.method_card_blocks(card)
        kinds = {k for k, _ in blocks}
        assert kinds <= {"markdown", "latex", "text", "caption"}
        assert blocks[0][0] == "markdown" and card["label"] in blocks[0][1] and card["wins_when"] in blocks[0][1]
        for cal in card["calibrations"]:
            if cal["formula"]:
                latex = display_latex(cal["formula"])
                assert (("latex", latex) if latex else ("text", cal["formula"])) in blocks
        markdown = " ".join(t for k, t in blocks if k == "markdown")
        assert not any(cal["formula"] and cal["formula"] in markdown for cal in card["calibrations"])
        shown += sum(k == "latex" for k, _ in blocks)
    assert shown >= len(cards)  # every card typesets at least one formula
    loss = next(T.method_card_blocks(c) for c in cards if "chi_{2C}" in c["calibrations"][1]["formula"])
    assert any(k == "latex" and r"\chi_{2C}" in t and r"\sqrt{" in t for k, t in loss)


def test_amplification_curves_differ_in_a_grey_printout():
    """Three of the subsampling chart's bounds were solid lines told apart by colour alone (a helper's check
    after the composition chart's fix): each has its own dash and marker now."""
    from ui.amplification import amplification_figure

    fig = amplification_figure(1.0, 1e-5, rates=(0.01, 0.1, 1.0), steps=1, prv=True)
    shown = [t for t in fig.data if t.showlegend is not False]
    styles = [(t.line.dash or "solid", t.marker.symbol or "circle") for t in shown]
    assert len(shown) >= 3 and len(set(styles)) == len(styles), styles


def test_the_composition_title_stays_clear_of_the_two_line_subplot_titles():
    """The right subplot title ran past the chart's edge at 1280 px and, once on two lines, under the main
    title: the subplot titles are two lines and the main title is pinned to the top with room below."""
    fig = T.composition_figure(3.0, 1e-5, budgets=(1, 10, 100), current_budget=10)
    subtitles = [a.text for a in fig.layout.annotations if "less noise" in (a.text or "")]
    assert len(subtitles) == 2 and all("<br>" in t for t in subtitles)
    assert fig.layout.title.yref == "container" and fig.layout.title.yanchor == "top"
    assert fig.layout.margin.t >= 10 + 17 * 1.3 + 2 * 13 * 1.3 + 20  # title, two subtitle lines, a gap
    assert "1e-5" in fig.layout.title.text


def test_the_composition_panels_are_stacked_so_they_fit_a_narrow_column():
    """Side by side at 800 px (a 480 px column) the two panels' titles and axis titles ran into each other and
    the main title was cut: the panels are stacked, the x axis titled once, the main title one short line."""
    fig = T.composition_figure(3.0, 1e-5, budgets=(1, 10, 100), current_budget=10)
    top, bottom = fig.layout.yaxis.domain, fig.layout.yaxis2.domain
    assert bottom[1] < top[0] and tuple(fig.layout.xaxis.domain) == tuple(fig.layout.xaxis2.domain) == (0.0, 1.0)
    assert not fig.layout.xaxis.title.text and fig.layout.xaxis2.title.text
    assert "<br>" not in fig.layout.title.text and len(fig.layout.title.text) <= 45


def test_laplace_and_gaussian_differ_in_a_grey_printout():
    """Section 1 drew the two distributions as solid lines and round points, told apart by colour alone (a
    walk-through printed it in grey): every trace of one distribution differs from the other's in marker or dash."""
    fig = T.noise_figure(1.0, 1e-5)
    by_dist: dict[str, set] = {}
    for t in fig.data:
        dist = "gaussian" if "Gaussian" in (t.name or "") else "laplace"
        by_dist.setdefault(dist, set()).add((getattr(t.line, "dash", None) if hasattr(t, "line") else None,
                                              t.marker.symbol))
    assert by_dist["gaussian"].isdisjoint(by_dist["laplace"]), by_dist
