"""Streamlit AppTest over app.py and the Explore / Who wins / Calibrate pages (CPU, small settings).

Runs on the synthetic data set with 2 repetitions, 1 DP-SGD epoch and a short epsilon range (all
set through URL query parameters, which also exercises the URL state), against a fresh result
cache in a temporary folder.
"""

from __future__ import annotations

import re

from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAST = {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "eps_min": "1.0", "eps_max": "10.0"}


@pytest.fixture(scope="module", autouse=True)
def _env(app_env):
    from streamlit.runtime.pages_manager import PagesManager

    # app.py uses st.navigation, but the repository also has a pages/ folder. A real server switches the
    # legacy "pages/ folder" mode off for good once st.navigation has run; AppTest resets that flag before
    # every run, which would make reruns execute the page without app.py. Mirror the server here.
    original_init = PagesManager.__init__

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        PagesManager.uses_pages_directory = False

    app_env.setattr(PagesManager, "__init__", init)


def app(**params) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update({**FAST, **{k: str(v) for k, v in params.items()}})
    return at


def texts(elements) -> list[str]:
    # Messages quoting user text are Markdown-escaped (ui/text.py): compare the text as shown.
    return [re.sub(r"\\([!-/:-@\[-`{-~])", r"\1", str(e.value)) for e in elements]


def recommendation(at: AppTest) -> str:
    boxes = [t for t in texts(at.success) + texts(at.info) if "Recommended" in t]
    assert boxes, f"no recommendation box; errors: {texts(at.error)}"
    return boxes[0]


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
    at = app(eps="10", delta="0", budget="100", lam='"auto"', teachers="8", methods='["model_sensitivity","subsample_aggregate"]')
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


def test_calibrate_page_is_instant_and_reacts():
    at = app(delta="0").run()
    at.switch_page("pages/5_Calibrate.py").run()
    assert not at.exception
    table = at.dataframe[0].value
    from privcore.methods import METHOD_NAMES
    assert len(table) == len(METHOD_NAMES)  # every registered method, unavailable ones with their reason
    assert any("DP-SGD needs δ > 0" in w for w in texts(at.warning))       # CalibrationError inline
    before = table["β (inverse scale)"].tolist()
    at.select_slider(key="w:eps").set_value(10.0).run()
    assert at.dataframe[0].value["β (inverse scale)"].tolist() != before
    assert at.query_params["eps"] == "10.0"
    assert len(at.get("plotly_chart")) == 1                                     # accounting comparison


def test_calibrate_too_many_teachers_blocks_only_that_method():
    at = app(n="100", teachers="256", batch="512", delta="0").run()
    at.switch_page("pages/5_Calibrate.py").run()
    assert not at.exception
    assert any("teachers must be at most N = 100" in w for w in texts(at.warning))
    # the other methods are still calibrated, even at delta = 0 with a batch larger than N
    assert "Model sensitivity" in set(at.dataframe[0].value["Method"])


def test_who_wins_maps():
    at = app(map_eps="[1.0,10.0]", methods='["model_sensitivity","loss_perturbation","subsample_aggregate"]').run()
    at.switch_page("pages/2_Who_wins.py").run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.get("plotly_chart")) == 2
    assert at.query_params["map_eps"] == "[1.0,10.0]"


def test_who_wins_with_augmentation_shows_the_group_privacy_caveat():
    # digits is an image data set (8x8), so N may grow with deformed copies; small and fast.
    at = app(dataset='"digits"', augment="true", map_eps="[1.0,10.0]",
             methods='["model_sensitivity","subsample_aggregate"]').run()
    at.switch_page("pages/2_Who_wins.py").run()
    assert not at.exception, at.exception
    assert any("group privacy" in w and "deformed copies" in w for w in texts(at.warning))
    assert len(at.get("plotly_chart")) == 2


def test_augmentation_caveat_names_group_privacy():
    from ui.widgets import augmentation_caveat

    text = augmentation_caveat(4000, 16000, 1.0)
    assert "16,000 exceeds the 4,000 real" in text
    assert "about 4.0 rows" in text and "group privacy" in text and "about 4-DP" in text


def test_start_up_warm_up_computes_exactly_what_explore_shows_first(tmp_path, monkeypatch):
    """ui.warmup computes the Explore page's first specs; the page then finds every point cached,
    and its specs are the ones explore_specs builds (so identical runs are shared, not repeated)."""
    import json

    from privcore.engine.cache import ResultCache
    from ui.warmup import warm_default_view
    from ui.widgets import build_data_info, explore_specs

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
