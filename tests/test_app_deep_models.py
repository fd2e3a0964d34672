"""app_pages/deep_models.py (AppTest, the page on its own), on a small generated Fashion-MNIST folder."""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("streamlit")
from apptest import APP, PAGES, run, texts

pytestmark = pytest.mark.usefixtures("app_env")
PAGE = str(PAGES / "deep_models.py")  # the page alone: it reads nothing from the shared sidebar


@pytest.fixture()
def tiny_preset(tmp_path, monkeypatch):
    from privcore.deep import fashion
    from privcore.deep.spec import PRESETS

    rng = np.random.default_rng(0)
    for split, k in (("train", 240), ("t10k", 60)):
        y = np.arange(k) % 10
        for kind, arr in (("images-idx3", rng.integers(0, 100, (k, 28, 28)) + 15 * y.reshape(-1, 1, 1)),
                          ("labels-idx1", y)):
            head = (2048 + arr.ndim).to_bytes(4, "big") + b"".join(int(s).to_bytes(4, "big") for s in arr.shape)
            with gzip.open(tmp_path / f"{split}-{kind}-ubyte.gz", "wb") as fh:
                fh.write(head + arr.astype(np.uint8).tobytes())
    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    monkeypatch.setitem(PRESETS, "cpu-small", dict(model="small-cnn", n_train=None, n_test=None, epochs=1,
                                                    batch_size=60, teachers=4, teacher_epochs=1, teacher_batch=30))


def test_deep_page_computes_missing_points_and_draws_figure_7(tiny_preset):
    at = run(PAGE, {}).run()
    assert not at.exception
    assert any("No GPU here" in t and "GPU job" in t for t in texts(at.info))
    button = [b for b in at.button if b.key == "deep_compute"]
    assert button and "missing points" in button[0].label
    assert len(at.get("plotly_chart")) == 2  # empty charts before computing
    import json

    axes = [json.loads(c.proto.spec)["layout"]["xaxis"] for c in at.get("plotly_chart")]
    assert all(10 ** a["range"][1] < 2_000 for a in axes)  # the planned grid, not a log axis to 10^6
    assert [s.options for s in at.selectbox if s.key == "deep_dataset"] == [["Fashion-MNIST", "CIFAR-10"]]
    assert not at.get("download_button")  # nothing to export yet
    button[0].click().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert not [b for b in at.button if b.key == "deep_compute"]  # nothing missing any more
    assert len(at.get("plotly_chart")) == 2
    keys = {b.proto.id for b in at.get("download_button")}
    assert sum("deep_export_a_csv" in k for k in keys) == 1 and sum("deep_export_b_csv" in k for k in keys) == 1


def test_a_cancelled_training_says_so(tiny_preset, monkeypatch):
    from privcore.deep.spec import PRESETS

    monkeypatch.setitem(PRESETS, "cpu-small", dict(PRESETS["cpu-small"], teachers=2))  # not cached by another test
    at = run(PAGE, {})
    at.session_state["deep_run_cancel"] = True  # the Cancel button's value in the rerun it starts
    at.run()
    assert not at.exception, at.exception
    assert any(t.startswith("Cancelled; finished trainings are cached") for t in texts(at.info)), texts(at.info)
    assert [b for b in at.button if b.key == "deep_compute"]  # the rest can still be computed


def test_page_is_in_the_navigation():
    from ui.navigation import PAGES, page_file

    assert ("deep_models.py", "Deep models") in [entry[:2] for entry in PAGES]
    assert page_file("deep_models.py") == Path(PAGE).resolve()


def test_deep_page_without_the_data_says_which_package(tmp_path, monkeypatch):
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    at = run(PAGE, {}).run()
    assert not at.exception
    assert any("dataset-fashion-mnist" in t for t in texts(at.error))


def test_the_gpu_estimate_uses_the_rates_measured_on_an_h100():
    """80 minutes for Fashion-MNIST: 30 M per-example gradients at 8,600/s plus the teachers and the reference."""
    from ui.deep import H100_EXAMPLES_PER_S, gpu_work_text

    text = gpu_work_text("fashion-mnist")
    expect = (30e6 / H100_EXAMPLES_PER_S["dpsgd"] + 30e6 / H100_EXAMPLES_PER_S["teachers"]
              + 30e6 / H100_EXAMPLES_PER_S["reference"]) / 60
    assert f"on one H100 about {expect:.0f} minutes" in text and "has not been measured" not in text
    assert "at least" in gpu_work_text("cifar-10")  # larger images than the ones measured


def test_in_the_app_the_deep_page_has_no_linear_sidebar_controls(tmp_path, monkeypatch):
    """The shared sidebar (linear data set, repetitions, accounting, device) does nothing on this page:
    the app shows a one-line note there instead; the other pages keep it."""
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))  # no data: the page stops early, fast
    at = run(APP, {"dataset": '"synthetic"'}).run()
    assert [s.label for s in at.sidebar.selectbox] == ["Data set"]  # Explore: the shared sidebar
    at.switch_page("app_pages/deep_models.py").run()
    assert not at.exception, at.exception
    side = at.sidebar
    assert not (side.selectbox or side.radio or side.select_slider or side.slider or side.multiselect), (
        [e.label for e in side.selectbox] + [e.label for e in side.radio])
    assert any("own settings" in t for t in texts(side.caption)), texts(side.caption)
    at.switch_page("app_pages/explore.py").run()  # back: the sidebar and its choices are there again
    assert [s.label for s in at.sidebar.selectbox] == ["Data set"] and at.sidebar.selectbox[0].value == "synthetic"
