"""app_pages/learn.py run on its own (AppTest; settings through URL query parameters, as a link carries them)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("streamlit")
from apptest import PAGES, run, texts
from streamlit.testing.v1 import AppTest

PAGE = str(PAGES / "learn.py")
FAST = {"dataset": '"synthetic"', "repeats": "2"}

pytestmark = pytest.mark.usefixtures("app_env")  # fresh result cache, no warm-ups (conftest.py)


def page(path: str = PAGE, **params):  # AppTest of the page run on its own (it draws the sidebar)
    return run(path, FAST, **params)


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def test_learn_every_section_runs():
    at = page(PAGE).run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    sections = at.segmented_control(key="w:learn").options
    assert len(sections) == 5
    for section in sections:
        at.segmented_control(key="w:learn").set_value(section).run()
        assert not at.exception, (section, at.exception)
        assert not at.error, (section, texts(at.error))
        if "Method cards" in section:
            cards = "\n".join(texts(at.markdown))
            for label in ("Model sensitivity", "Loss perturbation", "DP-SGD", "Prediction sensitivity",
                          "Subsample-and-aggregate"):
                assert label in cards
            assert "Wins when" in cards and "`corrected`" in cards
        else:
            assert len(at.get("plotly_chart")) == 1, section
            assert metrics(at), section
            # its settings in a caption row and the exports' metadata (a Learn export had none)
            settings = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["meta"]["privcore"]
            assert "delta" in settings and "caption" in settings, section


def test_learn_controls_change_numbers():
    at = page(PAGE, eps="1.0", delta="1e-05", budget="100").run()
    assert not at.exception, at.exception
    before = metrics(at)
    assert before["Laplace-like β = ε/Δ"] == "1"
    assert before["Gaussian σ (analytic)"] == "3.731"  # SPEC check value at (1, 1e-5), Delta = 1
    # The shared epsilon slider: every number on the page follows it, and the URL records it.
    at.select_slider(key="w:eps").set_value(2.0).run()
    after = metrics(at)
    assert after["Laplace-like β = ε/Δ"] == "2"
    assert after["Gaussian σ (analytic)"] != before["Gaussian σ (analytic)"]
    assert at.query_params["eps"] == "2.0"
    # A local control: the dimension moves the mean noise length.
    at.select_slider(key="learn_dim").set_value(1000).run()
    assert metrics(at)["Laplace-like mean ||b|| (d = 1000)"] == "500"
    # delta = 0: the Gaussian disappears and the page says why.
    at.select_slider(key="w:delta").set_value(0.0).run()
    assert not at.exception
    assert "Gaussian σ (analytic)" not in metrics(at)
    assert any("δ = 0" in t for t in texts(at.info))


def test_learn_composition_follows_budget():
    at = page(PAGE, eps="1.0", delta="1e-05", budget="10").run()
    at.segmented_control(key="w:learn").set_value("2 · Composition over B").run()
    m10 = metrics(at)
    at.select_slider(key="w:budget").set_value(100).run()
    assert not at.exception
    m100 = metrics(at)
    tight10 = float(m10["tight (exact Gaussian)"])
    tight100 = float(m100["tight (exact Gaussian)"])
    assert tight100 == pytest.approx(tight10 * 10 ** 0.5, rel=1e-3)  # exact composition: sigma grows as sqrt(B)
    assert float(m100["paper (advanced)"]) > tight100


def test_learn_metric_arrows_mean_what_their_words_say():
    """"2.95× less noise than the paper" showed a grey up arrow: a gain in noise now points down in green, a
    larger β (less noise) up in green, and a plain note (the classical σ, the Laplace-like ratio) has no arrow."""
    from streamlit.proto.Metric_pb2 import Metric

    at = page(PAGE, eps="1.0", delta="1e-05", budget="10").run()
    seen = []
    for section in ("1 · Laplace-like vs Gaussian", "2 · Composition over B"):
        at.segmented_control(key="w:learn").set_value(section).run()
        assert not at.exception
        seen += [(m.proto.delta, m.proto.direction, m.proto.color) for m in at.metric if m.proto.delta]
    for delta, direction, color in seen:
        if "less noise" in delta:
            assert (direction, color) == (Metric.MetricDirection.DOWN, Metric.MetricColor.GREEN), delta
        elif "β″" in delta:
            assert (direction, color) == (Metric.MetricDirection.UP, Metric.MetricColor.GREEN), delta
        else:
            assert direction == Metric.MetricDirection.NONE, delta
    assert sum("less noise" in d for d, _, _ in seen) == 1 and sum("β″" in d for d, _, _ in seen) == 1, seen
    assert all(len(d) <= 20 for d, _, _ in seen if "×" in d), seen  # cut at the column's width when longer
    at.select_slider(key="w:delta").set_value(0.0).run()
    assert not at.exception
    published = next(m.proto for m in at.metric if m.label.startswith("as published"))
    assert published.direction == Metric.MetricDirection.NONE and published.color == Metric.MetricColor.RED


def test_learn_states_the_release_mode():
    """Issue 29: the teaching page says that a published release needs secure noise (its seed never
    shown or stored), on load and beside the method cards."""
    at = page(PAGE).run()
    assert not at.exception
    assert any("secure noise" in t and "never shown or stored" in t for t in texts(at.caption))
    at.segmented_control(key="w:learn").set_value(at.segmented_control(key="w:learn").options[-1]).run()
    assert any("--secure-noise" in t for t in texts(at.caption))


def test_the_section_lives_in_the_url():
    """A walk-through found Learn's section lost on a shared link: ``learn=3`` opens Subsampling, and a click
    writes the section's number into the URL."""
    at = run(PAGE, FAST, learn="3").run()
    assert not at.exception, at.exception
    assert at.segmented_control(key="w:learn").value == "3 · Subsampling"
    at.segmented_control(key="w:learn").set_value("2 · Composition over B").run()
    assert not at.exception, at.exception
    assert at.query_params["learn"] == "2"
    at.segmented_control(key="w:learn").set_value(None).run()  # a click on the chosen segment deselects it
    assert at.segmented_control(key="w:learn").value == "2 · Composition over B"


def test_the_classical_gaussian_formula_is_shown_only_where_it_holds():
    """A course teacher saw "classical formula: 1.615" at ε = 3: that formula is proved for ε < 1 only."""
    big = page(eps="3.0", delta="1e-05").run()
    small = page(eps="0.5", delta="1e-05").run()
    assert not big.exception and not small.exception
    said = {m.label: m.proto.delta for m in big.metric}
    assert said["Gaussian σ (analytic)"] == "classical formula: holds only for ε < 1"
    assert next(m.proto.delta for m in small.metric if m.label == "Gaussian σ (analytic)").startswith("classical formula: ")
    assert "only for ε < 1" not in next(m.proto.delta for m in small.metric if m.label == "Gaussian σ (analytic)")
