"""app_pages/measured_leakage.py (AppTest) (synthetic data, small N, two quick methods, K = 8)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("streamlit")
from streamlit.testing.v1 import AppTest

ROOT = Path(__file__).resolve().parents[1]
PAGE = str(ROOT / "app_pages" / "measured_leakage.py")
FAST = {"dataset": '"synthetic"', "n": "300", "teachers": "4", "budget": "5", "eps": "10.0", "lk_refs": "8",
        "lk_audit": "32", "methods": json.dumps(["model_sensitivity", "prediction_sensitivity"])}

pytestmark = pytest.mark.usefixtures("app_env")  # fresh result cache, no warm-ups (conftest.py)


def page(**params) -> AppTest:
    at = AppTest.from_file(PAGE, default_timeout=240)
    at.query_params.update({**FAST, **{k: str(v) for k, v in params.items()}})
    return at


def texts(elements) -> list[str]:
    return [e.value for e in elements]


def test_leakage_page_shows_roc_table_and_reading():
    at = page().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.get("plotly_chart")) == 1
    table = at.dataframe[0].value
    assert list(table["Method"]) == ["Non-private (no noise)", "Model sensitivity", "Prediction sensitivity"]
    assert {"Accuracy", "Claimed ε", "Measured ε ≥ (95 %)", "AUC LiRA", "TPR@0.1% LiRA", "AUC canary"} <= set(table.columns)
    assert table["Claimed ε"].iloc[1] == "10"
    reading = " ".join(texts(at.markdown))
    assert "Without noise the model is attacked with AUC" in reading
    assert "ε = 10" in at.subheader[0].value
    # The page's own controls come from the URL and stay there.
    assert at.select_slider(key="lk_refs_w").value == 8
    assert at.query_params["lk_refs"] == "8"
    # The chart carries its setting, as Explore's and Reproduce's do (caption row and file metadata); it had none.
    settings = json.loads(at.get("plotly_chart")[0].proto.spec)["layout"]["meta"]["privcore"]
    assert settings["dataset"] == "synthetic" and settings["budget"] == 5 and settings["reference models"] == 8
    assert {"n", "delta", "seed", "attack", "canaries", "audit trials", "caption"} <= set(settings)


def test_switching_attack_and_bad_url_values():
    at = page(lk_refs="7", lk_attack="bogus").run()  # invalid values fall back to the defaults
    assert not at.exception, at.exception
    assert at.select_slider(key="lk_refs_w").value == 16
    at.segmented_control(key="lk_attack_w").set_value("canary").run()
    assert not at.exception, at.exception
    assert at.query_params["lk_attack"] == "canary"
    fig = at.get("plotly_chart")[0].proto.spec
    assert "canaries" in fig


def test_reached_through_the_app_navigation():
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=240)
    at.query_params.update({**FAST, "methods": json.dumps(["model_sensitivity"])})
    at.run()
    at.switch_page("app_pages/measured_leakage.py").run()
    assert not at.exception, at.exception
    assert at.title[0].value == "Measured leakage beside the bound"
    assert list(at.dataframe[0].value["Method"]) == ["Non-private (no noise)", "Model sensitivity"]


def test_slow_methods_follow_the_quick_ones():
    at = page(methods=json.dumps(["model_sensitivity", "dpsgd"]), batch_size="32", epochs="1").run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert len(at.get("plotly_chart")) == 1  # the quick chart was replaced in place
    assert list(at.dataframe[0].value["Method"]) == ["Non-private (no noise)", "Model sensitivity", "DP-SGD"]
    assert not any("follow below" in t for t in texts(at.caption))


def test_bad_page_parameters_are_reported_not_silently_replaced():
    # Once: lk_refs=abc / lk_attack=nope fell back to the defaults without a word.
    at = page(lk_refs="abc", lk_audit="33", lk_attack="nope").run()
    assert not at.exception, at.exception
    shown = " ".join(w.value for w in at.warning).replace("\\", "")
    for name in ("lk_refs=abc", "lk_audit=33", "lk_attack=nope"):
        assert f"URL parameter {name} ignored: must be one of" in shown, shown
    assert "lk_refs" not in at.query_params and "lk_attack" not in at.query_params


def test_an_expensive_measurement_waits_for_compute_with_its_estimate(monkeypatch):
    monkeypatch.setenv("PRIVCORE_COMPUTE_THRESHOLD_S", "0.001")  # everything is "expensive"
    monkeypatch.setenv("PRIVCORE_SLOWDOWN", "1")
    at = page(eps="9.0").run()  # a setting no other test cached
    assert not at.exception, at.exception
    buttons = [b for b in at.button if b.label.startswith("Compute (about")]
    assert buttons and not at.dataframe  # nothing measured before the click
    assert any("waits for you" in t for t in texts(at.info))
    buttons[0].click().run()
    assert not at.exception, at.exception
    assert at.dataframe and len(at.dataframe[0].value) == 3  # measured after the click


def test_leakage_estimate_counts_shared_contexts_once_and_skips_nothing_it_needs():
    from privcore.engine.cost import DataSizes
    from privcore.leakage import LeakageSpec
    from privcore.leakage.cost import estimate_seconds

    sizes = DataSizes(4000, 784, 10)
    a = LeakageSpec(method="model_sensitivity", epsilon=3.0)
    b = LeakageSpec(method="prediction_sensitivity", epsilon=3.0)
    one, both = estimate_seconds([a], sizes), estimate_seconds([a, b], sizes)
    assert 0 < one < both < 2 * one  # worlds, references and the non-private solves are shared
    slow = LeakageSpec(method="dpsgd", epsilon=3.0, audit_trials=256)
    assert estimate_seconds([slow], sizes) > 2 * estimate_seconds([replace_trials(slow, 16)], sizes)


def replace_trials(spec, trials):
    from dataclasses import replace

    return replace(spec, audit_trials=trials)
