"""app_pages/reproduce.py run on its own (AppTest; settings through URL query parameters, as a link carries them)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from apptest import APP, PAGES, run, texts

PAGE = str(PAGES / "reproduce.py")
FAST = {"dataset": '"synthetic"', "repeats": "2"}

pytestmark = pytest.mark.usefixtures("app_env")  # fresh result cache, no warm-ups (conftest.py)


def page(path: str = PAGE, **params):  # AppTest of the page run on its own (it draws the sidebar)
    return run(path, FAST, **params)


def test_reproduce_runs_and_waits_for_the_button():
    at = page(PAGE).run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.selectbox(key="w:figure").options) == 10
    assert any("not computed yet" in t for t in texts(at.info))
    assert not at.get("plotly_chart")
    # Every figure can be selected without computing anything.
    for key in at.selectbox(key="w:figure").options:
        at.selectbox(key="w:figure").set_value(key).run()
        assert not at.exception, (key, at.exception)
        assert not at.error, (key, texts(at.error))


def test_reproduce_computes_a_small_figure_paper_and_corrected():
    at = page(PAGE).run()
    at.selectbox(key="w:figure").set_value("1a").run()
    at.button(key="repro_compute").click().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    charts = at.get("plotly_chart")
    assert len(charts) == 2  # as published, then corrected
    assert not [c for c in at.columns if c.get("plotly_chart")]  # full width: side by side they were unreadable at 800 px
    assert all(not str(v).startswith("-0.000") for v in at.dataframe[0].value["Mean change"])
    assert any("What the paper found" in t for t in texts(at.markdown))
    gaps = at.dataframe[0].value
    sa = gaps[gaps["Method"] == "Subsample-and-aggregate"]
    assert len(sa) == 1 and float(sa["Mean change"].iloc[0]) <= 0.0  # the correction halves beta at delta = 0
    ms = gaps[gaps["Method"] == "Model sensitivity"]
    # changed only by the certified solver residual (1 % more sensitivity): at most a point of accuracy
    assert abs(float(ms["Mean change"].iloc[0])) <= 0.01
    # The results are cached: a new session shows the figure at once, without the button.
    fresh = page(PAGE).run()
    fresh.selectbox(key="w:figure").set_value("1a").run()
    assert not fresh.exception
    assert len(fresh.get("plotly_chart")) == 2
    assert not [b for b in fresh.button if b.key == "repro_compute"]
    # Adding the tight accounting needs only that column.
    fresh.multiselect(key="w:repro_acc").set_value(["paper", "corrected", "tight"]).run()
    compute = [b for b in fresh.button if b.key == "repro_compute"]
    assert compute and "tight" in compute[0].label and "paper" not in compute[0].label


def test_reproduce_shows_only_the_controls_of_the_chosen_figure():
    at = page(PAGE).run()
    at.selectbox(key="w:figure").set_value("1a").run()  # S&A is in it: T applies
    assert [s for s in at.select_slider if s.key == "w:repro_t"]
    at.selectbox(key="w:figure").set_value("6a").run()  # loss perturbation vs lambda: no teachers
    assert not at.exception
    assert not [s for s in at.select_slider if s.key == "w:repro_t"]
    assert not any("T = " in t for t in texts(at.caption) if t.startswith("Data:"))


def test_a_method_that_cannot_run_is_left_out_alone_with_its_reason():
    # Issue 14, point 4: DP-SGD's batch (2,048) exceeds the 1,600 training examples of synthetic. DP-SGD is
    # shown as unavailable, with its reason, and the other methods of the figure still compute.
    at = page(PAGE, batch_size="2048").run()
    at.multiselect(key="w:repro_acc").set_value(["corrected"]).run()
    for key in ("1b", "3"):  # epsilon on the axis; delta on the axis (DP-SGD used to reach the runner there)
        at.selectbox(key="w:figure").set_value(key).run()
        assert not at.exception, (key, at.exception)
        assert not at.error, (key, texts(at.error))
        notes = [w for w in texts(at.warning) if "DP-SGD is left out" in w]
        assert notes and "2,048" in notes[0] and "N = 1,600" in notes[0], (key, texts(at.warning))
        assert not any("dpsgd" in w for w in texts(at.warning)), (key, texts(at.warning))  # no code names
    at.button(key="repro_compute").click().run()  # Figure 3: the others compute
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.get("plotly_chart")) == 1
    assert not any("dpsgd" in w.lower() and "batch" in w for w in texts(at.warning) if "DP-SGD is left out" not in w)


def test_a_cancelled_figure_says_so():
    """The rerun that a Cancel click starts draws no progress bar here (the figure computes only on its
    button), so the page itself says the figure was cancelled instead of 'not computed yet'."""
    at = page(PAGE, repeats="3").run()  # R = 3: not cached by the other tests of this module
    at.selectbox(key="w:figure").set_value("1a").run()
    at.session_state["repro_1a_paper_cancel"] = True  # the Cancel button's value in that rerun
    at.run()
    assert not at.exception, at.exception
    info = texts(at.info)
    assert any("cancelled" in t and "Finished points are cached" in t for t in info), info
    assert not any("not computed yet" in t for t in info), info


def test_reproduce_says_its_accounting_choice_replaces_the_sidebars():
    """A walk-through chose 'tight' in the sidebar and saw Reproduce draw paper and corrected, no word why."""
    at = run(APP, {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "accounting": '"tight"'}).run()
    at.switch_page("app_pages/reproduce.py").run()
    assert not at.exception
    assert any("a chart for each accounting chosen here" in c and "“tight” applies to the other pages" in c
               for c in texts(at.caption)), texts(at.caption)


def test_the_figure_accountings_and_teachers_live_in_the_url():
    """A walk-through found Reproduce's figure choice lost on a shared link: it is in the URL now, with the
    accountings drawn side by side and T, and a link opens them."""
    from ui.paper import paper_figures
    from ui.state import PAPER_FIGURES

    assert tuple(f.key for f in paper_figures(4000, 784, 10, image=True, augment=False, min_n=16)) == PAPER_FIGURES
    at = page().run()
    at.selectbox(key="w:figure").set_value("3").run()
    at.multiselect(key="w:repro_acc").set_value(["corrected", "tight"]).run()
    assert not at.exception, at.exception
    assert at.query_params["figure"] == '"3"', at.query_params
    link = page(figure="3", repro_acc='["tight"]').run()  # as typed by hand, and as encoded
    assert link.selectbox(key="w:figure").value == "3"
    assert link.multiselect(key="w:repro_acc").value == ["tight"]


def test_no_accounting_chosen_says_which_one_is_drawn():
    """A bad-input hunt: repro_acc=[] in a link (or every chip removed) drew "corrected" without a word."""
    at = page(repro_acc="[]").run()
    assert not at.exception, at.exception
    assert any("None is chosen: the chart is drawn with “corrected”" in c for c in texts(at.caption)), texts(at.caption)
    chosen = page(repro_acc='["tight"]').run()
    assert not any("None is chosen" in c for c in texts(chosen.caption))
