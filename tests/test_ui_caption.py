"""ui/caption.py + ui/export.py: charts carry their settings, and a paper and a corrected export differ."""

from __future__ import annotations

import json
import re
import struct
import zlib

import pytest

from privcore.engine.specs import DataSpec, SweepSpec
from ui.caption import add_caption, caption_text, meta_json, rows_n, settings_of
from ui.export import browser_available, embed_metadata, figure_bytes, figure_html
from ui.figures import curve_figure


def _rows(accounting: str, n: int = 800) -> list[dict]:
    out = []
    for method, acc in (("model_sensitivity", 0.7), ("subsample_aggregate", 0.6 if accounting == "paper" else 0.5),
                        ("non_private", 0.9)):
        for eps in (1.0, 10.0):
            out.append(dict(method=method, epsilon=eps if method != "non_private" else float("inf"), delta=0.0,
                            budget=10, n=n, dim=64, classes=2, lam=1e-3, teachers=50, accounting=accounting,
                            accuracy_mean=acc, accuracy_std=0.01, repeats=3))
    return out


def _fig(accounting: str):
    spec = SweepSpec(data=DataSpec(name="digits", classes=2), methods=("model_sensitivity", "subsample_aggregate"),
                     epsilons=(1.0, 10.0), accounting=accounting, repeats=3, seed=7)
    rows = _rows(accounting)
    fig = curve_figure(rows, "epsilon", title=f"acc (N = {rows_n(rows):,})", log_x=True)
    return add_caption(fig, settings_of(spec, rows))


def test_caption_lists_every_setting_with_the_true_n():
    meta = json.loads(meta_json(_fig("paper")))
    assert meta["n"] == 800 and meta["classes"] == 2 and meta["dim"] == 64 and meta["lam"] == 1e-3
    assert meta["teachers"] == 50 and meta["repeats"] == 3 and meta["seed"] == 7 and meta["accounting"] == "paper"
    text = meta["caption"]
    for part in ("data: digits", "N = 800", "C = 2", "D = 64", "λ = 0.001", "T = 50", "R = 3", "accounting: paper",
                 "seed = 7"):
        assert part in text, (part, text)
    fig = _fig("paper")
    assert fig.layout.title.text == "acc (N = 800)"
    shown = [a.text for a in fig.layout.annotations if a.name == "privcore-settings"]
    assert shown and shown[0].replace("<br>", " · ") == text  # the caption rows inside the figure


def test_a_varied_axis_shows_its_range():
    rows = _rows("corrected") + [dict(r, n=4000) for r in _rows("corrected")]
    assert "N = 800–4,000" in caption_text({"n": "800–4,000"})
    spec = SweepSpec(data=DataSpec(name="digits"))
    assert settings_of(spec, rows)["n"] == "800–4,000"
    assert rows_n(rows) == 4000


def test_paper_and_corrected_html_exports_differ_in_caption_and_metadata():
    a, b = figure_html(_fig("paper")).decode(), figure_html(_fig("corrected")).decode()
    meta = re.compile(r'<meta name="privcore-settings" content="([^"]*)">')
    ma, mb = meta.search(a).group(1), meta.search(b).group(1)
    assert "paper" in ma and "corrected" in mb and ma != mb
    assert "accounting: paper" in a and "accounting: corrected" in b


def _png_text(data: bytes) -> dict[str, str]:
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert crc == zlib.crc32(kind + body)  # every chunk, ours included, is well formed
        if kind == b"tEXt":
            k, _, v = body.partition(b"\x00")
            out[k.decode()] = v.decode("latin-1")
        pos += 12 + length
    return out


def test_png_metadata_chunk_is_valid_without_a_browser():
    ihdr = b"\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
    png = (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
           + struct.pack(">I", 0) + b"IEND" + struct.pack(">I", zlib.crc32(b"IEND")))
    out = embed_metadata(png, "png", '{"accounting": "paper"}')
    assert _png_text(out) == {"privcore-settings": '{"accounting": "paper"}'}


@pytest.mark.skipif(not browser_available(), reason="static export needs Chromium")
@pytest.mark.parametrize("fmt", ["svg", "png", "pdf"])
def test_paper_and_corrected_image_exports_differ(fmt):
    a, b = figure_bytes(_fig("paper"), fmt), figure_bytes(_fig("corrected"), fmt)
    assert a != b
    if fmt == "svg":
        assert "accounting: paper" in a.decode() and "accounting: corrected" in b.decode()  # the caption row
        assert '<desc id="privcore-settings">' in a.decode()
    if fmt == "png":
        assert '"accounting": "paper"' in _png_text(a)["privcore-settings"]
        assert '"accounting": "corrected"' in _png_text(b)["privcore-settings"]
    if fmt == "pdf":
        assert b'"accounting": "paper"' in a and b'"accounting": "corrected"' in b
        offsets = [int(o) for o in re.findall(rb"(\d{10}) \d{5} n", a[int(re.search(rb"startxref\s+(\d+)", a).group(1)):])]
        assert offsets and all(re.match(rb"\d+ 0 obj", a[o:o + 12]) for o in offsets)  # xref still points at objects


# ---------------------------------------------------------------- readable by everyone (ui/figures.py, registry)

def test_every_method_has_its_own_marker_and_dash():
    from privcore.methods import BASELINE, REGISTRY

    markers = [m.marker for m in REGISTRY.values()]
    dashes = [m.dash for m in REGISTRY.values()]
    assert len(set(markers)) == len(markers) and len(set(dashes)) == len(dashes)
    assert BASELINE.dash not in dashes  # the reference alone is drawn "dash"
    lp, sa = REGISTRY["loss_perturbation"], REGISTRY["subsample_aggregate"]
    assert (lp.marker, lp.dash) != (sa.marker, sa.dash) and lp.marker != sa.marker and lp.dash != sa.dash
    grey = lambda h: 0.299 * int(h[1:3], 16) + 0.587 * int(h[3:5], 16) + 0.114 * int(h[5:7], 16)  # noqa: E731
    assert abs(grey(lp.colour) - grey(sa.colour)) > 30  # the two oranges differ in greyscale too
    fig = curve_figure(_rows("corrected"), "epsilon", title="t", log_x=True)
    drawn = {t.name: (t.marker.symbol, t.line.dash) for t in fig.data if t.mode == "lines+markers"}
    assert drawn["Subsample-and-aggregate"] == (sa.marker, sa.dash)


def test_log_ticks_are_plain_numbers():
    from ui.figures import log_tickvals

    vals, text = log_tickvals([1e-10, 1e-5, 1e-3])
    assert text == ["1e-10", "1e-9", "1e-8", "1e-7", "1e-6", "1e-5", "1e-4", "1e-3"]
    assert log_tickvals([0.1, 100])[1] == ["0.1", "1", "10", "100"]
    fig = curve_figure(_rows("paper"), "epsilon", title="t", log_x=True)
    assert list(fig.layout.xaxis.ticktext)[:4] == ["1", "2", "5", "10"]  # one decade: 1-2-5 labels


def test_bands_sd_or_confidence_interval_of_the_mean():
    from ui.figures import band_halfwidth

    assert band_halfwidth(0.04, 4, "sd") == 0.04
    assert band_halfwidth(0.04, 4, "ci95") == pytest.approx(1.96 * 0.02)
    sd = curve_figure(_rows("paper"), "epsilon", title="t", log_x=True, band="sd")
    ci = curve_figure(_rows("paper"), "epsilon", title="t", log_x=True, band="ci95")
    top = lambda f: [t for t in f.data if t.name.endswith("band top")][0].y[0]  # noqa: E731
    assert top(sd) == pytest.approx(0.71) and top(ci) == pytest.approx(0.7 + 1.96 * 0.01 / 3 ** 0.5)


def test_n_under_a_class_filter_is_the_true_one():
    from ui.setting import Setting, build_data_info, setting_problem

    info = build_data_info("digits")
    assert sum(info.class_counts) == info.n_train and len(info.class_counts) == 10
    s = Setting(classes=2, n=None)
    from privcore.data import load_dataset

    assert s.effective_n(info) == load_dataset("digits", classes=2).n  # what the runner trains on
    assert setting_problem(info, s).n == s.effective_n(info) < info.n_train


def test_leaders_text_names_who_leads_stretch_by_stretch():
    """A walk-through read 'A at the low end; B at the high end; B leads in between' while A led up to
    ε = 3: the sentence now follows the lead from left to right."""
    from privcore.methods import BASELINE
    from ui.caption import MOST_STRETCHES, leaders_text

    def rows(table):  # {eps: {method: accuracy}}
        return [{"method": m, "epsilon": e, "accuracy_mean": a} for e, acc in table.items() for m, a in acc.items()]

    fmt = "{:g}".format
    same = rows({0.1: {"A": 0.15, "B": 0.10}, 1: {"A": 0.5, "B": 0.4}, 100: {"A": 0.84, "B": 0.8}})
    assert leaders_text(same, "epsilon", "ε", str, fmt) == "A leads from ε = 0.1 to 100 (0.15 to 0.84)"
    flat = [{**r, "budget": r.pop("epsilon")} for r in rows({3: {"A": 0.821, "B": 0.5}, 1000: {"A": 0.819, "B": 0.6}})]
    assert leaders_text(flat, "budget", "B", str, fmt) == "A leads from B = 3 to 1000 (0.82)"  # not "0.82 to 0.82"
    walk = rows({0.1: {"A": 0.21, "B": 0.10}, 1: {"A": 0.6, "B": 0.3}, 3: {"A": 0.8, "B": 0.56},
                 10: {"A": 0.85, "B": 0.92}, 100: {"A": 0.9, "B": 0.95}})
    walk.append({"method": BASELINE.name, "epsilon": 100, "accuracy_mean": 0.97})  # never a leader
    assert leaders_text(walk, "epsilon", "ε", str, fmt) == ("A leads from ε = 0.1 to 3 (0.21 to 0.80); then B leads "
                                                           "from ε = 10 to 100 (0.92 to 0.95)")
    dip = rows({0.1: {"A": 0.15, "B": 0.10}, 10: {"A": 0.7, "B": 0.75}, 5000: {"A": 0.86, "B": 0.83}})
    assert leaders_text(dip, "epsilon", "ε", str, fmt) == ("A leads at ε = 0.1 (0.15); then B leads at ε = 10 (0.75); "
                                                          "then A leads at ε = 5000 (0.86)")
    # Level stretches (all at chance, all at the top): no leader named there (a walk-through read "the
    # best is Model sensitivity (0.10)" at chance as a recommendation).
    chance = rows({0.1: {"A": 0.11, "B": 0.10}, 0.3: {"A": 0.12, "B": 0.11}, 10: {"A": 0.5, "B": 0.7},
                   1000: {"A": 0.94, "B": 0.95}})
    assert leaders_text(chance, "epsilon", "ε", str, fmt) == (
        "Every method scores about 0.11 to 0.12 from ε = 0.1 to 0.3; then B leads at ε = 10 (0.70); "
        "then every method scores about 0.95 at ε = 1000")
    zigzag = rows({float(k): ({"A": 0.5, "B": 0.1} if k % 2 else {"A": 0.1, "B": 0.5}) for k in range(1, 8)})
    text = leaders_text(zigzag, "epsilon", "ε", str, fmt)
    assert text.count("leads") == MOST_STRETCHES and text.endswith("the lead changes 3 more times (among A, B)")
    once_more = rows({float(k): ({"A": 0.5, "B": 0.1} if k % 2 else {"A": 0.1, "B": 0.5}) for k in range(1, 6)})
    assert leaders_text(once_more, "epsilon", "ε", str, fmt).endswith("; then A leads at ε = 5 (0.50)")  # not "1 more times"
    flat = rows({0.1: {"A": 0.111, "B": 0.105}, 0.3: {"A": 0.112, "B": 0.104}, 10: {"A": 0.5, "B": 0.7}})
    assert leaders_text(flat, "epsilon", "ε", str, fmt).startswith("Every method scores about 0.11 from")  # not "0.11 to 0.11"
    assert leaders_text([], "epsilon", "ε", str, fmt) == ""


def test_try_this_hint_follows_the_controls():
    """The ε curve's hint gives the next step from where the controls stand, not always the first."""
    from ui.caption import try_this

    first, second, third = try_this(1e-5, 10), try_this(0.0, 10), try_this(0.0, 100)
    assert "set δ = 0" in first
    assert "set δ = 0" not in second and "raise B to 100" in second
    assert "raise B" not in third and "λ" in third
    assert len({first, second, third}) == 3
    # another data set: the steps without the bundled data's outcomes
    other = [try_this(1e-5, 10, bundled=False), try_this(0.0, 10, bundled=False)]
    assert all("bundled" not in t and "ε ≈" not in t for t in other) and "set δ = 0" in other[0]
    # no DP-SGD on the chart: the first step says nothing of it (a walk-through saw "DP-SGD drops out")
    without = try_this(1e-5, 10, methods=["model_sensitivity", "subsample_aggregate"])
    assert "set δ = 0" in without and "DP-SGD" not in without and "bundled" not in without
    assert "DP-SGD drops out" in try_this(1e-5, 10, methods=["dpsgd", "model_sensitivity"])


def test_a_dpsgd_chart_records_its_knobs_in_caption_metadata_and_csv():
    # The walk-through found two DP-SGD charts at 5 and 50 epochs exported alike (issue 32, item 5).
    from ui.export import csv_context, rows_csv

    spec = SweepSpec(data=DataSpec(name="digits", classes=2), methods=("dpsgd", "model_sensitivity"),
                     epochs=7, batch_size=64, clip=0.25, learning_rate=2.0, seed=3)
    meta = settings_of(spec, _rows("corrected"), dataset="digits")
    assert {k: meta[k] for k in ("epochs", "batch_size", "clip", "learning_rate")} == {
        "epochs": 7, "batch_size": 64, "clip": 0.25, "learning_rate": 2.0}
    text = caption_text(meta)
    assert "DP-SGD epochs = 7" in text and "batch = 64" in text and "clip = 0.25" in text and "learning rate = 2" in text
    fig = add_caption(curve_figure(_rows("corrected"), "epsilon", title="t", log_x=True), meta)
    assert json.loads(meta_json(fig))["epochs"] == 7                      # PNG/SVG/HTML/PDF metadata
    context = csv_context(fig)
    assert context["epochs"] == 7 and context["learning_rate"] == 2.0
    header, first = rows_csv(_rows("corrected"), context=context).decode().splitlines()[:2]
    assert "epochs" in header.split(",") and "batch_size" in header.split(",")
    assert first.split(",")[header.split(",").index("clip")] == "0.25"
    without = settings_of(SweepSpec(data=DataSpec(name="digits", classes=2), methods=("model_sensitivity",)),
                          _rows("corrected"), dataset="digits")
    assert not set(without) & {"epochs", "batch_size", "clip", "learning_rate"}  # no DP-SGD: not stated


def test_a_tuned_chart_says_so_in_its_caption():
    from privcore.engine.specs import DataSpec, SweepSpec
    from ui.caption import caption_text, settings_of

    spec = SweepSpec(data=DataSpec(name="synthetic"), methods=("subsample_aggregate",), tuning="held-out")
    assert "not private" in caption_text(settings_of(spec, []))
    assert "knobs" not in caption_text(settings_of(SweepSpec(data=DataSpec(name="synthetic"),
                                                             methods=("subsample_aggregate",)), []))


def test_the_title_stays_above_the_caption_rows():
    """A walk-through saw the title drawn over the caption's first row: plotly centres an unpinned title in
    the top margin, which the caption grows. The title is pinned to the figure's top and the caption's
    rows (11 px text, ~14.3 px a row, 6 px above the plot) start below the title's 17 px line."""
    fig = _fig("corrected")
    title = fig.layout.title
    assert title.yref == "container" and title.y == 1.0 and title.yanchor == "top"
    rows = next(a.text for a in fig.layout.annotations if a.name == "privcore-settings").count("<br>") + 1
    caption_top = fig.layout.margin.t - 6 - rows * 11 * 1.3
    title_bottom = title.pad.t + 17 * 1.3
    assert caption_top >= title_bottom, (caption_top, title_bottom)


def test_a_tuned_chart_states_no_configured_value_for_a_tuned_knob_and_its_csv_rows_carry_their_own():
    """A walk-through saw "clip = 0.5" on a privately tuned chart (and its PNG, SVG, PDF and CSV) whose DP-SGD ran
    at clip 2.0: the configured value of a knob some method tunes is not the chart's. Each CSV row carries the
    knobs it ran at, read from its tuned text."""
    from privcore.engine.specs import DataSpec, SweepSpec
    from ui.caption import settings_of
    from ui.export import rows_csv

    spec = SweepSpec(data=DataSpec(name="digits"), methods=("dpsgd", "model_sensitivity"), tuning="private", clip=0.5)
    meta = settings_of(spec, [], dataset="digits")
    assert "clip" not in meta and "learning_rate" not in meta and meta["epochs"] == spec.epochs
    configured = settings_of(SweepSpec(data=DataSpec(name="digits"), methods=("dpsgd",), clip=0.5), [], dataset="digits")
    assert configured["clip"] == 0.5
    rows = [{"method": "dpsgd", "epsilon": 1.0, "lam": 0.01, "accuracy_mean": 0.8,
             "tuned": "best on the test queries (not private): clip=2.0, learning_rate=10.0"},
            {"method": "model_sensitivity", "epsilon": 1.0, "lam": 0.5, "accuracy_mean": 0.7,
             "tuned": "best on the test queries (not private): lam=0.5"}]
    import csv

    header, dp, ms = list(csv.reader(rows_csv(rows, context={"epochs": 5}).decode().splitlines()))[:3]
    assert float(dp[header.index("clip")]) == 2.0 and float(dp[header.index("learning_rate")]) == 10.0
    assert ms[header.index("clip")] == "" and ms[header.index("lam")] == "0.5"


def test_a_two_line_title_keeps_its_first_line_above_the_caption():
    """The leakage chart's title has two lines; the top margin held one, so its first line was cut off."""
    import plotly.graph_objects as go

    from ui.caption import CAPTION_LINE_PX, TITLE_LINE_PX, add_caption

    one = add_caption(go.Figure(layout=dict(title=dict(text="One line"), margin=dict(t=60))), {"dataset": "digits"})
    two = add_caption(go.Figure(layout=dict(title=dict(text="First<br>second"), margin=dict(t=60))), {"dataset": "digits"})
    assert two.layout.margin.t - one.layout.margin.t == TITLE_LINE_PX
    assert two.layout.title.pad.t - one.layout.title.pad.t == TITLE_LINE_PX  # plotly draws the other lines above the first
    assert one.layout.margin.t >= 16 + TITLE_LINE_PX + CAPTION_LINE_PX + 10
