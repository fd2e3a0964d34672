"""app_pages/who_wins.py, reached through app.py's navigation and on its own (AppTest)."""

from __future__ import annotations

import pytest

pytest.importorskip("streamlit")
from apptest import APP, PAGES, run, texts

FAST = {"dataset": '"synthetic"', "repeats": "2", "epochs": "1", "eps_min": "1.0", "eps_max": "10.0"}

pytestmark = pytest.mark.usefixtures("app_env")  # one fresh result cache per module, no warm-ups (conftest.py)


def app(**params):  # AppTest of app.py (Explore first)
    return run(APP, FAST, **params)


def test_who_wins_maps():
    at = app(map_eps="[1.0,10.0]", methods='["model_sensitivity","loss_perturbation","subsample_aggregate"]').run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.get("plotly_chart")) == 2
    assert at.query_params["map_eps"] == "[1.0,10.0]"
    code = [c.value for c in at.code]  # copy as code under each map
    assert sum("python -m privcore sweep" in c and "--vary" in c for c in code) == 2
    assert sum("run_sweep(spec)" in c for c in code) == 2
    # the secure-noise flag is explained beside it (a walk-through found it unexplained)
    assert all(c.startswith("# --secure-noise: fresh noise") for c in code if "--secure-noise" in c)


def test_who_wins_with_augmentation_shows_the_group_privacy_caveat():
    # digits is an image data set (8x8), so N may grow with deformed copies; small and fast.
    at = app(dataset='"digits"', augment="true", map_eps="[1.0,10.0]",
             methods='["model_sensitivity","subsample_aggregate"]').run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception, at.exception
    assert any("group privacy" in w and "deformed copies" in w for w in texts(at.warning))
    assert len(at.get("plotly_chart")) == 2


def test_who_wins_clamps_n_from_the_url():
    at = run(str(PAGES / "who_wins.py"), {"dataset": '"digits"', "repeats": "2", "n": "10000000",
                                          "methods": '["prediction_sensitivity"]', "map_eps": "[1.0]"})
    at.run()
    assert not at.exception, at.exception
    assert any("N = 10,000,000 is not available" in w.value for w in at.warning)


def test_who_wins_at_n_below_the_dpsgd_batch_still_maps_the_others():
    at = app(n="100", map_eps="[1.0,10.0]", methods='["dpsgd","model_sensitivity","subsample_aggregate"]').run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert any("DP-SGD is left out" in w for w in texts(at.warning)), texts(at.warning)
    assert len(at.get("plotly_chart")) >= 1                    # the epsilon x B map, without DP-SGD


def test_who_wins_offers_the_answered_only_scoring_and_keeps_it_in_the_url():
    at = app(map_eps="[3.0]", methods='["confident_gnmax","subsample_aggregate"]', teachers="40").run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception, at.exception
    before = [f.proto.spec for f in at.get("plotly_chart")]
    at.toggle(key="w:answered_only").set_value(True).run()
    assert not at.exception, at.exception
    assert at.query_params["answered_only"] == "true"
    after = [f.proto.spec for f in at.get("plotly_chart")]
    assert len(after) == 2 and after != before  # Confident-GNMax abstains here: its scores change


def test_who_wins_lists_standing_caveats_in_one_collapsed_expander_not_as_warnings():
    at = app(map_eps="[10.0]", methods='["confident_gnmax"]').run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception, at.exception
    assert not any("abstains" in w for w in texts(at.warning)), texts(at.warning)
    notes = [e for e in at.expander if e.label.startswith("Caveats")]
    assert len(notes) == 1 and "abstains" in " ".join(texts(notes[0].markdown))
    # in its column the ε multiselect wraps its chips (else those after the first few are hidden at 800 px)
    assert at.multiselect(key="w:map_eps").proto.wrap


def test_emptying_the_epsilon_columns_asks_for_one():
    """'Clear all' on the ε columns swapped 1 and 10 back in without a word (browser walk-through)."""
    at = app(map_eps="[3.0]", methods='["model_sensitivity"]').run()
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception
    box = [m for m in at.multiselect if m.label.startswith("ε values")][0]
    box.set_value([]).run()
    assert not at.exception
    assert "Choose at least one ε value." in texts(at.error), texts(at.warning) + texts(at.error)
    again = [m for m in at.multiselect if m.label.startswith("ε values")][0]
    assert not at.get("plotly_chart") and again.value == []  # nothing swapped in behind the user's back


def test_who_wins_keeps_the_settings_it_uses_in_its_url():
    """A second walk-through: from Explore with λ = 0.01 and T = 32, Who wins' URL kept only the data set
    and R, so a reload or a shared link drew the maps at λ = 0.001 and T = 16."""
    at = app(lam="0.01", teachers="32", epochs="2", map_eps="[1.0]", methods='["model_sensitivity"]').run()
    at.query_params.clear()  # Streamlit clears the URL on a page switch
    at.switch_page("app_pages/who_wins.py").run()
    assert not at.exception
    assert at.query_params.get("lam") == "0.01" and at.query_params.get("teachers") == "32"
    assert at.query_params.get("epochs") == "2"
    assert any("λ = 0.01, T = 32" in c for c in texts(at.caption))
