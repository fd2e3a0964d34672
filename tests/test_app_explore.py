"""app_pages/explore.py through app.py (AppTest, CPU, small settings set through URL query parameters,
which also exercises the URL state; synthetic data, 2 repetitions, 1 DP-SGD epoch, ε from 1 to 10)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from apptest import APP, open_more_settings, run, texts

FAST = {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "eps_min": "1.0", "eps_max": "10.0"}

pytestmark = pytest.mark.usefixtures("app_env")  # one fresh result cache per module, no warm-ups (conftest.py)


def app(**params):  # AppTest of app.py (Explore first)
    return run(APP, FAST, **params)


def recommendation(at) -> str:  # an AppTest
    boxes = [t for t in texts(at.success) + texts(at.info) if "Recommended" in t]
    assert boxes, f"no recommendation box; errors: {texts(at.error)}"
    return boxes[0]




def _paths_of(node, text: str, path: tuple = ()) -> list[tuple]:  # an AppTest node
    """Positions (child indices from the main area) of the elements whose value contains ``text``."""
    children = getattr(node, "children", None)
    if children:
        return [p for i in sorted(children) for p in _paths_of(children[i], text, path + (i,))]
    value = getattr(node, "value", None) if getattr(node, "type", "") != "unknown" else None
    return [path] if isinstance(value, str) and text in value else []


def test_the_recommendation_keeps_its_place_between_runs():
    """The first run of a session draws the current setting's progress bar, a later one (memoised)
    does not: the recommendation stays at the same position all the same. In the browser the
    previous run's elements stay, faded, until the new run replaces them at their position: when
    the box moved up a slot, a second, faded "Recommended" box showed below it while a tab computed."""
    at = app().run()
    assert not at.exception, at.exception
    first = _paths_of(at.main, "Recommended:")
    at.run()  # e.g. another tab chosen: the point comes from the memo, no bar
    assert not at.exception, at.exception
    assert len(first) == 1 and _paths_of(at.main, "Recommended:") == first


def test_explore_runs_and_shows_results():
    at = app().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    rec = recommendation(at)
    assert "margin over" in rec
    table = at.dataframe[0].value
    assert list(table["Method"])[-1].startswith("Non-private")
    assert {"σ (Gaussian std)", "β (inverse scale)", "Formula", "Accuracy"} <= set(table.columns)
    assert len(at.get("plotly_chart")) == 1                       # the active tab's curve
    assert any("Shaded bands" in t for t in texts(at.markdown))    # the sentence under the chart
    assert any("Neighbouring datasets differ by replacing one example" in t for t in texts(at.caption))
    # URL keeps the parameters it was given
    assert at.query_params["repeats"] == "2"


def test_default_view_shows_no_permanent_warning_boxes():
    """Standing caveats (true of a method or the data whatever the setting) sit in one collapsed
    expander; warning boxes are kept for the user's current setting."""
    at = app().run()
    assert not at.exception, at.exception
    assert not at.warning, texts(at.warning)
    notes = [e for e in at.expander if e.label.startswith("Caveats")]
    assert len(notes) == 1 and not notes[0].proto.expanded
    shown = " ".join(texts(notes[0].markdown))
    assert "abstains" in shown and "public rows" in shown
    # a warning about the setting is still a warning box, beside the caveats
    at = app(eps="0.01").run()
    assert any("extremely small" in w for w in texts(at.warning))
    assert not any("abstains" in w for w in texts(at.warning))


def test_moving_epsilon_changes_the_numbers_and_the_url():
    at = app().run()
    before = at.dataframe[0].value.copy()
    rec_before = recommendation(at)
    at.select_slider(key="w:eps").set_value(30.0).run()
    assert not at.exception
    after = at.dataframe[0].value
    assert not before["Accuracy"].equals(after["Accuracy"])
    assert not before["σ (Gaussian std)"].equals(after["σ (Gaussian std)"])
    assert at.query_params["eps"] == "30.0"
    assert "ε = 30" in at.subheader[0].value
    assert recommendation(at) != rec_before


def test_url_sets_the_widgets():
    at = open_more_settings(app(eps="10", delta="0", budget="100", lam='"auto"', teachers="8",
                                methods='["model_sensitivity","subsample_aggregate"]'))
    at.run()
    assert not at.exception
    assert at.select_slider(key="w:eps").value == 10.0
    assert at.select_slider(key="w:delta").value == 0.0
    assert at.select_slider(key="w:budget").value == 100
    assert at.select_slider(key="w:lam").value == "auto"
    assert at.select_slider(key="w:teachers").value == 8
    assert at.multiselect(key="w:methods").value == ["model_sensitivity", "subsample_aggregate"]
    assert at.selectbox(key="w:dataset").value == "synthetic"
    assert set(at.dataframe[0].value["Method"]) == {"Model sensitivity", "Subsample-and-aggregate", "Non-private (no noise)"}


def test_closed_more_settings_draw_nothing_and_use_the_same_values_as_open():
    """The expander's sliders are drawn only while it is open; closed, its values still come from the
    URL and are normalised as the sliders would (dim beyond the data's 20 features means all), and the
    page computes with them. Opening it reruns the page and shows the same values."""
    params = {"lam": '"auto"', "teachers": "8", "dim": "5000", "clip": "0.5"}
    closed = app(**params)
    closed.run()
    assert not closed.exception, closed.exception
    keys = {w.key for w in closed.select_slider} | {t.key for t in closed.text_input}
    assert not keys & {"w:lam", "w:teachers", "w:dim", "w:clip", "t:lam", "t:teachers", "t:clip"}, keys
    assert "w:eps" in keys and "t:eps" in keys                       # the first row is always drawn
    got = {name: closed.session_state[f"v:{name}"] for name in ("lam", "teachers", "dim", "clip")}
    assert got == {"lam": "auto", "teachers": 8, "dim": None, "clip": 0.5}, got
    assert any("adjusted to all" in t for t in texts(closed.warning) + texts(closed.info) + texts(closed.caption)) \
        or closed.query_params.get("dim") is None                     # the adjustment is said or the URL cleaned
    table = closed.dataframe[0].value                                # computed with those values
    opened = open_more_settings(app(**params))
    opened.run()
    assert not opened.exception, opened.exception
    assert opened.select_slider(key="w:lam").value == "auto" and opened.select_slider(key="w:teachers").value == 8
    assert opened.select_slider(key="w:dim").value == "all" and opened.select_slider(key="w:clip").value == 0.5
    assert {name: opened.session_state[f"v:{name}"] for name in got} == got
    assert table.equals(opened.dataframe[0].value)


def test_dpsgd_at_delta_zero_is_an_inline_warning():
    at = app(delta="0", methods='["dpsgd","loss_perturbation"]').run()
    assert not at.exception
    assert any("DP-SGD needs δ > 0" in w for w in texts(at.warning))
    assert "DP-SGD" not in set(at.dataframe[0].value["Method"])
    assert "Loss perturbation" in set(at.dataframe[0].value["Method"])


def test_more_teachers_than_examples_leaves_out_only_that_method():
    at = app(n="100", teachers="256", methods='["subsample_aggregate","model_sensitivity"]').run()
    assert not at.exception
    assert any("Subsample-and-aggregate is left out" in w and "N = 100" in w for w in texts(at.warning))
    shown = set(at.dataframe[0].value["Method"])
    assert "Model sensitivity" in shown and "Subsample-and-aggregate" not in shown  # the others still run


def test_only_unavailable_methods_is_an_inline_error():
    at = app(n="100", teachers="256", methods='["subsample_aggregate"]').run()
    assert not at.exception
    assert any("None of the chosen methods can run" in e for e in texts(at.error))
    assert not at.dataframe                                     # nothing ran


def test_extreme_epsilon_warns():
    at = app(eps="0.01", methods='["model_sensitivity"]', tab='"budget"').run()
    assert not at.exception
    assert any("extremely small" in w for w in texts(at.warning))
    assert len(at.get("plotly_chart")) == 1                    # the B curve


def test_start_up_warm_up_computes_exactly_what_explore_shows_first(tmp_path, monkeypatch):
    """ui.warmup computes the Explore page's first specs; the page then finds every point cached,
    and its specs are the ones explore_specs builds (so identical runs are shared, not repeated)."""
    import json

    from privcore.engine.cache import ResultCache
    from ui.warmup import warm_default_view
    from ui.setting import build_data_info, explore_specs

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    values = {k: json.loads(v) for k, v in FAST.items()}
    computed = warm_default_view(values)
    stored = len(ResultCache())
    assert computed > 0 and stored == computed
    at = app().run()
    assert not at.exception and recommendation(at)
    assert len(ResultCache()) == stored                          # the page computed nothing new
    page_specs = set(at.session_state["_sweep_memo"].keys())
    assert {s.to_json() for s in explore_specs(build_data_info("synthetic"), values)} <= page_specs
    assert warm_default_view(values) == 0                        # a second start finds it all cached


def test_explore_draws_the_quick_methods_first_unless_all_is_cached(tmp_path, monkeypatch):
    import json

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    methods = '["model_sensitivity","loss_perturbation","subsample_aggregate"]'
    at = app(methods=methods).run()
    assert not at.exception and recommendation(at)
    ran = [json.loads(k)["methods"] for k in at.session_state["_sweep_memo"].keys()]
    assert ["model_sensitivity", "subsample_aggregate"] in ran          # the quick part ran first
    assert len(at.get("plotly_chart")) == 1                              # and its chart was replaced
    again = app(methods=methods).run()                                   # a new session, same disk cache
    ran = [json.loads(k)["methods"] for k in again.session_state["_sweep_memo"].keys()]
    assert ["model_sensitivity", "subsample_aggregate"] not in ran      # all cached: no quick pass
    assert len(again.get("plotly_chart")) == 1


def test_answered_only_toggle_inverse_view_and_risk_line():
    at = app(methods='["confident_gnmax","subsample_aggregate"]', budget="10", teachers="40").run()
    assert not at.exception, at.exception
    assert any("catches at most" in t for t in texts(at.caption))  # the plain-words risk line
    table = at.dataframe[0].value
    row = table[table["Method"].str.contains("Confident")].iloc[0]
    assert row["Answered"].endswith("%") and row["ε data-dependent (not a guarantee)"] not in ("", "-")
    assert float(row["ε to publish the data-dependent ε"]) > 0  # a second short cell, not "(… to publish)"
    target = at.dataframe[1].value  # the inverse view under the epsilon curve
    assert list(target.columns) == ["Method", "Smallest ε", "Band (mean ± std crosses)"]
    assert any("Which ε reaches" in h.value for h in at.subheader)
    before = row["Accuracy"]
    at.toggle(key="w:answered_only").set_value(True).run()
    assert not at.exception
    after = at.dataframe[0].value
    row_after = after[after["Method"].str.contains("Confident")].iloc[0]
    assert at.query_params["answered_only"] == "true"
    assert float(row["Answered"].rstrip("%")) < 100.0  # it abstains here (eps = 3, T = 40 on synthetic data)
    assert row_after["Accuracy"] != before  # scored on answered queries only
    assert row_after["Answered"] == row["Answered"]  # the answered fraction stays beside it
    at.number_input(key="w:target").set_value(0.3).run()
    assert at.query_params["target"] == "0.3"


def test_n_below_the_dpsgd_batch_leaves_out_only_dpsgd():
    # N = 100 with DP-SGD's default batch 256 (issue 14): DP-SGD is shown as unavailable, the others compute
    at = app(n="100", methods='["dpsgd","model_sensitivity","subsample_aggregate"]').run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert any("DP-SGD is left out" in w and "256" in w for w in texts(at.warning)), texts(at.warning)
    shown = set(at.dataframe[0].value["Method"])
    assert {"Model sensitivity", "Subsample-and-aggregate"} <= shown and "DP-SGD" not in shown
    assert len(at.get("plotly_chart")) == 1


def test_chance_level_gets_an_honest_verdict():
    at = app(eps="0.01", delta="0", budget="10000", methods='["model_sensitivity","subsample_aggregate"]').run()
    assert not at.exception, at.exception
    assert any("No method is useful at this setting" in t for t in texts(at.warning)), texts(at.warning)
    assert not [t for t in texts(at.success) if "Recommended" in t]


def test_the_epsilon_curve_says_how_its_range_was_taken():
    """A link with the range crossed (eps_min 50, eps_max 1) or a current ε outside it: the tab says what
    the curve covers (a walk-through saw the sliders at 50 and 1, or 100 with ε = 5,000, and no word)."""
    at = app(eps_min="50.0", eps_max="1.0").run()
    assert not at.exception
    assert any("is above the largest" in w and "runs from 1 to 50" in w for w in texts(at.warning))
    at = app(eps="300.0").run()
    assert any("The curve runs from ε = 1 to 300" in c and "current ε = 300" in c for c in texts(at.caption)), texts(at.caption)
    at = app().run()  # inside the sliders' range: nothing to say
    assert not any("The curve runs from" in c for c in texts(at.caption))


def test_paper_accounting_states_the_real_epsilon_in_the_box_the_table_and_the_risk_line():
    """Issue 32 item 1: at ?accounting=paper the page says what is really guaranteed, computed (S&A at δ = 0: 2ε)."""
    at = app(methods='["subsample_aggregate","model_sensitivity"]', delta="0", accounting="paper", eps="3.0",
             budget="10").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    real = table[table["Method"] == "Subsample-and-aggregate"]["Real ε (replace-one)"].iloc[0]
    assert float(real) == pytest.approx(6.0)
    assert any("really guaranteed" in w and "Subsample-and-aggregate ε = 6" in w for w in texts(at.warning))
    rec = [t for t in texts(at.markdown) if "really guarantees ε" in t]
    assert rec, "the recommendation's reason does not state the real epsilon"
    assert any("real ε" in t and "not the stated 3" in t for t in texts(at.caption))  # the attacker sentence
    # A walk-through read the green "Recommended" box alone: a winner whose noise overspends gets none.
    assert not any(t.startswith("**Recommended") for t in texts(at.success) + texts(at.info))
    assert any(t.startswith("**Not a recommendation at ε = 3:** Subsample-and-aggregate") and "ε = 6" in t
               for t in texts(at.warning))
    assert at.selectbox(key="statement_method").value == "subsample_aggregate"  # the winner's statement first
    labels = [b.proto.label for b in at.get("download_button")]
    assert "Statement (Markdown)" in labels and "Statement (JSON)" in labels


def test_pca_caveat_is_stated_in_the_recommendation_box():
    at = app(methods='["model_sensitivity","subsample_aggregate"]', dim="10").run()  # synthetic: D = 20
    assert not at.exception, at.exception
    assert any(t.startswith("What the guarantee covers: D = 10 uses PCA") for t in texts(at.caption))


def test_one_compute_click_computes_the_current_setting_and_the_curve(monkeypatch):
    # The walk-through's first Compute covered only the current setting; the curve waited for a second click.
    import json

    monkeypatch.setenv("PRIVCORE_COMPUTE_THRESHOLD_S", "0.001")  # everything is "expensive"
    at = app(eps="2.0", lam="0.01", methods='["model_sensitivity","loss_perturbation"]').run()
    assert not at.exception, at.exception
    assert [b.key for b in at.button if b.key.endswith("_compute")] == ["point_compute"]
    # The button prices what the click starts, the curve included (it said 26 s where 80 s followed)
    import re

    box = next(t for t in texts(at.info) if t.startswith("Current setting:"))
    found = re.search(r"about (.+?) to compute .*the “Accuracy vs ε” curve about (.+?) more: about (.+?) in all", box)
    assert found, box
    assert at.button(key="point_compute").label == f"Compute (about {found.group(3)})"
    at.button(key="point_compute").click().run()
    assert not at.exception, at.exception
    assert not [b.key for b in at.button if b.key.endswith("_compute")], [b.key for b in at.button]
    ran = [json.loads(k) for k in at.session_state["_sweep_memo"].keys()]
    assert any(len(r["epsilons"]) > 1 for r in ran), ran                  # the ε curve ran on the same click
    assert at.get("plotly_chart")


def test_the_kept_chart_records_the_dpsgd_knobs():
    # The chart kept while a new setting waits (ui.progress.show_previous) is the captioned figure: DP-SGD's
    # epochs, batch, clip and learning rate are in its caption row and metadata (issue 32, item 5).
    at = app(methods='["dpsgd","model_sensitivity"]', clip="0.25").run()
    assert not at.exception, at.exception
    fig = at.session_state["_last_figures"]["fig_epsilon"]
    meta = fig.layout.meta["privcore"]
    assert meta["epochs"] == 1 and meta["clip"] == 0.25 and {"batch_size", "learning_rate"} <= set(meta), meta
    assert "DP-SGD epochs = 1" in meta["caption"] and "clip = 0.25" in meta["caption"]


def test_paper_accounting_shows_a_real_epsilon_at_one_rounding_never_below_it():
    """A walk-through saw DP-SGD's real ε under paper accounting as 3.27583, 3.28 and 3.276 on one page: every
    place now shows it rounded up to 3 significant digits (privcore.validation.epsilon_up)."""
    import re

    from privcore.validation import epsilon_up

    at = app(methods='["dpsgd","model_sensitivity"]', accounting="paper", eps="3.0", delta="1e-5").run()
    assert not at.exception, at.exception
    table = at.dataframe[0].value
    shown = table[table["Method"] == "DP-SGD"]["Real ε (replace-one)"].iloc[0]
    everything = " ".join(texts(at.markdown) + texts(at.caption) + texts(at.warning) + texts(at.success))
    found = set(re.findall(r"(?:real ε = |really guarantees ε = |At ε = |DP-SGD ε = )([0-9.]+)", everything))
    assert found == {shown}, (found, shown)
    assert float(shown) == epsilon_up(float(shown)) and float(shown) > 3.0


def test_epsilon_up_rounds_up_to_three_digits():
    from privcore.validation import epsilon_up

    assert [epsilon_up(v) for v in (3.27583, 3.271, 3.0, 0.0123401, float("inf"))] == [3.28, 3.28, 3.0, 0.0124,
                                                                                        float("inf")]
