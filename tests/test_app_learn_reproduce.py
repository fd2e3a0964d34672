"""Streamlit AppTest over the Learn and Reproduce pages (CPU, small settings, fresh result cache).

Each page is run on its own (AppTest.from_file on the page script: it draws the shared sidebar
itself); settings go in through URL query parameters, as a user's link would carry them.
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
LEARN = str(ROOT / "pages" / "4_Learn.py")
REPRODUCE = str(ROOT / "pages" / "3_Reproduce.py")
FAST = {"dataset": '"synthetic"', "repeats": "2"}


pytestmark = pytest.mark.usefixtures("app_env")  # fresh result cache, no warm-ups (conftest.py)


def page(path: str, **params) -> AppTest:
    at = AppTest.from_file(path, default_timeout=240)
    at.query_params.update({**FAST, **{k: str(v) for k, v in params.items()}})
    return at


def metrics(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def texts(elements) -> list[str]:
    # Messages quoting user text are Markdown-escaped (ui/text.py): compare the text as shown.
    return [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(e.value)) for e in elements]


# ---------------------------------------------------------------- Learn


def test_learn_every_section_runs():
    at = page(LEARN).run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    sections = at.segmented_control(key="learn_section").options
    assert len(sections) == 5
    for section in sections:
        at.segmented_control(key="learn_section").set_value(section).run()
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


def test_learn_controls_change_numbers():
    at = page(LEARN, eps="1.0", delta="1e-05", budget="100").run()
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
    at = page(LEARN, eps="1.0", delta="1e-05", budget="10").run()
    at.segmented_control(key="learn_section").set_value("2 · Composition over B").run()
    m10 = metrics(at)
    at.select_slider(key="w:budget").set_value(100).run()
    assert not at.exception
    m100 = metrics(at)
    tight10 = float(m10["tight (exact Gaussian)"])
    tight100 = float(m100["tight (exact Gaussian)"])
    assert tight100 == pytest.approx(tight10 * 10 ** 0.5, rel=1e-3)  # exact composition: sigma grows as sqrt(B)
    assert float(m100["paper (advanced)"]) > tight100


# ---------------------------------------------------------------- Reproduce


def test_reproduce_runs_and_waits_for_the_button():
    at = page(REPRODUCE).run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.selectbox(key="repro_figure").options) == 10
    assert any("not computed yet" in t for t in texts(at.info))
    assert not at.get("plotly_chart")
    # Every figure can be selected without computing anything.
    for key in at.selectbox(key="repro_figure").options:
        at.selectbox(key="repro_figure").set_value(key).run()
        assert not at.exception, (key, at.exception)
        assert not at.error, (key, texts(at.error))


def test_reproduce_computes_a_small_figure_paper_and_corrected():
    at = page(REPRODUCE).run()
    at.selectbox(key="repro_figure").set_value("1a").run()
    at.button(key="repro_compute").click().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # as published | corrected
    assert any("What the paper found" in t for t in texts(at.markdown))
    gaps = at.dataframe[0].value
    sa = gaps[gaps["Method"] == "Subsample-and-aggregate"]
    assert len(sa) == 1 and float(sa["Mean change"].iloc[0]) <= 0.0  # the correction halves beta at delta = 0
    ms = gaps[gaps["Method"] == "Model sensitivity"]
    # changed only by the certified solver residual (1 % more sensitivity): at most a point of accuracy
    assert abs(float(ms["Mean change"].iloc[0])) <= 0.01
    # The results are cached: a new session shows the figure at once, without the button.
    fresh = page(REPRODUCE).run()
    fresh.selectbox(key="repro_figure").set_value("1a").run()
    assert not fresh.exception
    assert len(fresh.get("plotly_chart")) == 2
    assert not [b for b in fresh.button if b.key == "repro_compute"]
    # Adding the tight accounting needs only that column.
    fresh.multiselect(key="repro_accounting").set_value(["paper", "corrected", "tight"]).run()
    compute = [b for b in fresh.button if b.key == "repro_compute"]
    assert compute and "tight" in compute[0].label and "paper" not in compute[0].label
