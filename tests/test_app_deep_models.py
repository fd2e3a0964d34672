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


def _charts(at) -> list[dict]:
    import json

    return [json.loads(c.proto.spec) for c in at.get("plotly_chart")]


def _exports(at, prefix: str) -> list[str]:
    return [b.proto.id for b in at.get("download_button") if f"{prefix}_" in b.proto.id]


def test_deep_page_computes_missing_points_and_draws_figure_7(tiny_preset):
    at = run(PAGE, {}).run()
    assert not at.exception
    assert any("No GPU here" in t and "GPU job" in t for t in texts(at.info))
    button = [b for b in at.button if b.key == "deep_compute"]
    assert button and "missing points" in button[0].label
    assert any(t.startswith("Estimated time: about") for t in texts(at.caption)), texts(at.caption)
    charts = _charts(at)
    assert len(charts) == 4  # the shipped run's two panels, then the two empty ones of training here
    axes = [c["layout"]["xaxis"] for c in charts[2:]]
    assert all(10 ** a["range"][1] < 2_000 for a in axes)  # the planned grid, not a log axis to 10^6
    assert [s.options for s in at.selectbox if s.key == "w:deep_data"] == [["Fashion-MNIST", "CIFAR-10"]]
    assert not _exports(at, "deep_export")  # nothing of this training to export yet
    button[0].click().run()
    assert not at.exception, at.exception
    assert not at.error, texts(at.error)
    assert not [b for b in at.button if b.key == "deep_compute"]  # nothing missing any more
    assert not any(t.startswith("Estimated time") for t in texts(at.caption))
    assert len(at.get("plotly_chart")) == 4
    keys = _exports(at, "deep_export")
    assert sum("deep_export_a_csv" in k for k in keys) == 1 and sum("deep_export_b_csv" in k for k in keys) == 1


def test_the_shipped_figure_7_shows_before_anyone_trains(tmp_path, monkeypatch):
    """Without any training data the page still draws both shipped panels (bands where the teacher methods
    have repetitions), the paper's CIFAR-10 findings beside them and where S&A leads in the shipped run."""
    from privcore.deep import fashion
    from privcore.deep.shipped import read_rows, shipped_runs

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))  # no data: nothing can train
    at = run(PAGE, {}).run()
    assert not at.exception, at.exception
    assert any("dataset-fashion-mnist" in t for t in texts(at.error))  # training says why it cannot
    charts = _charts(at)
    assert len(charts) == 2
    shipped = shipped_runs()[0]
    for chart, path, x in zip(charts, (shipped.panel_a, shipped.panel_b), ("epsilon", "budget")):
        names = [t.get("name", "") for t in chart["data"]]
        assert any(n.startswith("DP-SGD") for n in names) and any("band bottom" in n for n in names), names
        rows = read_rows(path)
        sa = {r[x]: r["accuracy_mean"] for r in rows if r["method"] == "subsample_aggregate" and r["budget"] in
              ((10,) if x == "epsilon" else (r["budget"],))}
        line = next(t for t in chart["data"] if t.get("name", "").startswith("Subsample") and t.get("mode") ==
                    "lines+markers")
        assert dict(zip(line["x"], line["y"])) == pytest.approx(sa)  # the shipped numbers, drawn
        stds = [r["accuracy_std"] for r in rows if r["method"] == "subsample_aggregate"]
        band = next(t for t in chart["data"] if t.get("name", "").startswith("Subsample") and "band top" in t["name"])
        assert any(s > 0 for s in stds) and any(top > y for top, y in zip(band["y"], line["y"]))
    words = " ".join(texts(at.markdown))
    assert "only for a small number of queries B and a large ε" in words and "B = 5" in words
    assert "Here subsample-and-aggregate leads DP-SGD at B = 1 (0.724 against 0.666); DP-SGD from B = 3" \
        in words, words
    assert [s.value for s in at.selectbox if s.key == "w:deep_shipped"] == [shipped.tag]
    assert not [w for w in texts(at.warning) if "deep_shipped" in w]  # a clean visit adjusts nothing
    assert sum("deep_shipped_export_a_csv" in k for k in _exports(at, "deep_shipped_export")) == 1
    # the shipped run predates the exact-tailed samplers: the page says what its epsilon then meant
    assert any("samplers whose tails stop" in t for t in texts(at.warning))


def test_the_shipped_panels_are_full_width(tmp_path, monkeypatch):
    """Both panels stand one under the other, in no column: side by side with the findings in a third column a
    panel was 305 px wide in a 1280 px window (169 px at 800 px), its legend over the x axis's title and its
    caption cut off (tests/test_browser_deep.py measures them)."""
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))  # no data: only the shipped run draws
    at = run(PAGE, {}).run()
    assert not at.exception, at.exception
    assert len(at.get("plotly_chart")) == 2
    assert not [c for c in at.columns if c.get("plotly_chart")]


def test_the_shipped_run_names_its_teacher_epochs(tmp_path, monkeypatch):
    """"teachers 50" read as 50 teachers (the run has 16, each trained 50 epochs): the run's label, both charts'
    captions and their exported settings say "teacher epochs"."""
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    at = run(PAGE, {}).run()
    assert not at.exception, at.exception
    box = next(s for s in at.selectbox if s.key == "w:deep_shipped")
    label = box.format_func(box.value)
    assert "teacher epochs 50" in label and "DP-SGD epochs 10" in label and "teachers 50" not in label, label
    for chart in _charts(at):
        meta = chart["layout"]["meta"]["privcore"]
        assert meta["teacher epochs"] == 50 and meta["epochs"] == 10, meta
        caption = next(a["text"] for a in chart["layout"]["annotations"] if a.get("name") == "privcore-settings")
        assert "teacher epochs: 50" in caption and "DP-SGD epochs = 10" in caption, caption
    words = " ".join(texts(at.markdown))
    assert "teachers 50" not in words and "teacher epochs 50" in words, words


def _second_run(tmp_path):
    """A figures folder holding the shipped run and a copy under another card and the paper's epochs."""
    import shutil

    from privcore.deep.shipped import shipped_runs

    real = shipped_runs()[0]
    for p in (real.panel_a, real.panel_b):
        shutil.copy(p, tmp_path / p.name)
        shutil.copy(p, tmp_path / p.name.replace("_h100_e10_t50", "_h200"))
    return real.tag, "fashion-mnist_resnet20_h200"


def _param(at, name: str) -> str:
    got = at.query_params[name]
    return got[-1] if isinstance(got, list) else got


def test_the_page_choices_live_in_the_url(tmp_path, monkeypatch):
    from privcore.deep import fashion
    from privcore.deep.shipped import FIGURES_ENV

    figures = tmp_path / "figures"
    figures.mkdir()
    old, new = _second_run(figures)
    monkeypatch.setenv(FIGURES_ENV, str(figures))
    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))  # no data: fast
    at = run(PAGE, {}).run()
    assert not at.exception, at.exception
    box = next(s for s in at.selectbox if s.key == "w:deep_shipped")
    assert box.options[0].startswith("Fashion-MNIST, ResNet-20, H200, DP-SGD epochs 100, teacher epochs 500 (the "
                                     "paper's)")
    assert box.value == new and "deep_shipped" not in at.query_params  # the first run is the default
    box.set_value(old).run()
    from ui.state import encode

    assert _param(at, "deep_shipped") == encode(old)
    next(s for s in at.selectbox if s.key == "w:deep_data").set_value("cifar-10").run()
    assert not at.exception, at.exception
    assert _param(at, "deep_data") == encode("cifar-10")
    again = run(PAGE, {"deep_shipped": f'"{old}"', "deep_data": '"cifar-10"'}).run()  # a shared link
    assert not again.exception, again.exception
    assert next(s for s in again.selectbox if s.key == "w:deep_shipped").value == old
    assert next(s for s in again.selectbox if s.key == "w:deep_data").value == "cifar-10"


def test_a_link_to_what_this_machine_cannot_show_is_adjusted_and_said(tmp_path, monkeypatch):
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    at = run(PAGE, {"deep_preset": '"paper"', "deep_shipped": '"no_such_run"'}).run()
    assert not at.exception, at.exception
    warnings = " ".join(texts(at.warning))
    assert "deep_preset" in warnings and "need a GPU" in warnings, warnings
    assert "deep_shipped" in warnings and "no shipped run has that name" in warnings, warnings
    assert next(s for s in at.selectbox if s.key == "w:deep_preset").value == "cpu-small"


def test_a_broken_shipped_csv_is_an_error_not_a_chart(tmp_path, monkeypatch):
    from privcore.deep import fashion
    from privcore.deep.shipped import FIGURES_ENV

    figures = tmp_path / "figures"
    figures.mkdir()
    for panel in "ab":
        (figures / f"fig7{panel}_fashion-mnist_small-cnn.csv").write_text("dataset,model,method\nx,y,z\n")
    monkeypatch.setenv(FIGURES_ENV, str(figures))
    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    at = run(PAGE, {}).run()
    assert not at.exception, at.exception
    assert any("does not read as Figure 7 rows" in t for t in texts(at.error)), texts(at.error)
    assert not at.get("plotly_chart")
    assert " ".join(texts(at.markdown)).count("B = 5") == 1  # the paper's findings still shown


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


def test_a_bad_or_unknown_url_value_is_said_here_too(tmp_path, monkeypatch):
    """``/Deep_models?dataset=bogus&eps=abc`` was kept silently (the page draws no shared sidebar, which is
    where the other pages report a link's values): the page says what it ignored."""
    from privcore.deep import fashion

    monkeypatch.setenv(fashion.FASHION_ENV, str(tmp_path))
    at = run(PAGE, {"dataset": "bogus", "eps": "abc", "batchsize": "3"}).run()
    assert not at.exception, at.exception
    said = " ".join(texts(at.warning))
    assert "dataset=bogus ignored" in said and "eps=abc ignored" in said and "batchsize" in said, said


def test_only_rows_drawn_with_the_old_samplers_are_flagged():
    """A private row carries SAMPLER_FORMULA once its noise comes from privcore.tails (DeepSpec.stated); the
    reference adds no noise and never needs it."""
    from privcore.deep.shipped import drawn_before_exact_tails
    from privcore.deep.spec import PRESETS, SAMPLER_FORMULA, SECURE_FORMULA, DeepSpec

    spec = DeepSpec(**PRESETS["cpu-small"])
    new = {"method": "dpsgd", "formula": spec.stated("noise multiplier: z")}
    assert SAMPLER_FORMULA in new["formula"] and not drawn_before_exact_tails([new, {"method": "non_private"}])
    assert drawn_before_exact_tails([new, {"method": "subsample_aggregate", "formula": "beta = 1"}])
    secure = DeepSpec(**{**PRESETS["cpu-small"], "secure_noise": True}).stated("f")
    assert secure.endswith(SECURE_FORMULA) and SAMPLER_FORMULA in secure
