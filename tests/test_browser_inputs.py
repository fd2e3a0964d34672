"""Typed values, the cost warning, N = 100, a chance-level verdict and Cancel, in a real browser.

Starts ``streamlit run app.py`` (fresh result cache, mnist-5k, 2 repetitions, 1 DP-SGD epoch)
and drives Chromium with Playwright, as a user would:

1. types ε = 8 in the box under the ε slider: the slider and the URL follow;
2. types λ = 1e-6: the cost model predicts more than the threshold (set for this server between
   the default view's prediction and λ = 1e-6's, both read from privcore's cost model), so the page
   shows "Compute (about N s)" and keeps the previous chart; one click computes it;
3. types N = 100 (below DP-SGD's batch of 256): DP-SGD is left out with its reason, the others run;
4. opens ε = 0.01, δ = 0, B = 10,000 on digits: "No method is useful at this setting";
5. asks for an expensive setting, clicks Compute, then Cancel: the previous chart stays.

Skipped, with the reason, when Chromium or the playwright package is missing. About a minute on CPU.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import replace

from browser_helpers import chromium, idle, needs_browser, no_exception, streamlit_server

METHODS = "%5B%22model_sensitivity%22%2C%22loss_perturbation%22%2C%22dpsgd%22%2C%22subsample_aggregate%22%5D"
FAST = f"dataset=%22mnist-5k%22&repeats=2&epochs=1&eps_min=1.0&eps_max=10.0&methods={METHODS}"
CHANCE = (f"dataset=%22digits%22&repeats=40&epochs=1&eps=0.01&delta=0&budget=10000&eps_min=1.0&eps_max=10.0"
          f"&methods={METHODS}")
COMPUTE = re.compile(r"^Compute \(about")
CHARTS = "() => document.querySelectorAll('[data-testid=\"stPlotlyChart\"] .js-plotly-plot').length"


def _threshold() -> float:
    """Seconds between what the cost model predicts for the default view and for λ = 1e-6 (mnist-5k).

    As the page will see them: the default view is computed first (everything, the accountant's
    import included); at λ = 1e-6, DP-SGD (which ignores λ) is already cached and its accountant
    imported, so the gate weighs the other methods' solves."""
    from privcore.engine import cost
    from ui.setting import build_data_info, explore_specs
    from ui.state import DEFAULTS

    info = build_data_info("mnist-5k")
    base = {**DEFAULTS, "dataset": "mnist-5k", "repeats": 2, "epochs": 1, "eps_min": 1.0, "eps_max": 10.0,
            "methods": ["model_sensitivity", "loss_perturbation", "dpsgd", "subsample_aggregate"]}
    import privcore.solver as solver

    sizes = cost.DataSizes(info.n_train, info.dim, info.classes)
    runs = solver.SOLVES_RUN
    try:
        solver.SOLVES_RUN = 0  # the fresh server's first view pays its first solve
        cheap = max(cost.estimate(s, sizes).seconds for s in explore_specs(info, base))
    finally:
        solver.SOLVES_RUN = runs
    if "dp_accounting.pld" in sys.modules:  # imported in this process, not yet in the fresh server's
        from privcore.methods.dpsgd import ACCOUNTANT_IMPORT_S

        cheap += ACCOUNTANT_IMPORT_S * cost.DEFAULT_COEFFS["import"]
    warm = {**cost.DEFAULT_COEFFS, "import": 0.0}  # by then: accountant imported, solver warm
    dear = min(cost.estimate(replace(s, methods=tuple(m for m in s.methods if m != "dpsgd")), sizes,
                             coeffs=warm).seconds for s in explore_specs(info, {**base, "lam": 1e-6}))
    # The estimates are deterministic here (PRIVCORE_SLOWDOWN=1): a margin of 1.3 between the two
    # views leaves about 14 % either side of the threshold.
    assert dear > 1.3 * cheap, (cheap, dear)
    return math.sqrt(cheap * dear)


def _compute_all(page) -> None:
    """Click "Compute (about N s)" until the page asks no more (the point, then the curve)."""
    for _ in range(3):
        more = page.get_by_role("button", name=COMPUTE)
        if more.count() == 0:
            return
        more.first.click()
        idle(page)


def _type(page, label: str, value: str) -> None:
    box = page.get_by_role("textbox", name=f"{label} (type a value)", exact=True)
    box.fill(value)
    box.press("Enter")
    idle(page)


def _expander(page) -> None:
    box = page.get_by_role("textbox", name="Training examples N (type a value)", exact=True)
    if box.count() == 0 or not box.is_visible():
        page.get_by_text("More settings: N, T, λ, D, C and DP-SGD").click()
        page.wait_for_timeout(300)


@needs_browser
def test_typed_values_cost_warning_and_cancel_in_chromium(tmp_path):
    # the page's estimates, unscaled by this machine's load (the threshold is computed unscaled)
    threshold = {"PRIVCORE_COMPUTE_THRESHOLD_S": f"{_threshold():.4f}", "PRIVCORE_SLOWDOWN": "1"}
    with streamlit_server(tmp_path, threshold, viewer_toolbar=False) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 1900})
        page.goto(f"{base}/?{FAST}")
        idle(page)
        page.wait_for_function(CHARTS + " >= 1", timeout=120_000)
        no_exception(page, "Explore")

        # 1. a typed ε: the slider and the URL follow
        _type(page, "Privacy loss ε", "8")
        slider = page.get_by_test_id("stSlider").filter(has_text="Privacy loss ε").get_by_role("slider")
        assert slider.get_attribute("aria-valuetext") == "8"
        assert "eps=8.0" in page.url
        page.wait_for_function(CHARTS + " >= 1", timeout=120_000)

        # 2. λ = 1e-6 costs more than the threshold: it waits for a click, the chart stays
        _expander(page)
        _type(page, "L2 weight λ (average form)", "1e-6")
        no_exception(page, "Explore at λ = 1e-6")
        button = page.get_by_role("button", name=COMPUTE).first
        button.wait_for(timeout=30_000)
        assert page.get_by_text("waits for you", exact=False).count() >= 1
        assert page.get_by_text("Previous chart", exact=False).count() >= 1
        assert page.evaluate(CHARTS) >= 1
        _compute_all(page)  # the point, then the curve asks in turn
        page.get_by_text("Recommended:", exact=False).first.wait_for(timeout=120_000)
        no_exception(page, "Explore after Compute")

        # 3. N = 100 (below DP-SGD's batch 256): DP-SGD is left out, the others still run
        _type(page, "L2 weight λ (average form)", "0.001")
        _expander(page)
        _type(page, "Training examples N", "100")
        _compute_all(page)
        no_exception(page, "Explore at N = 100")
        assert page.get_by_text("DP-SGD is left out", exact=False).count() >= 1
        table = page.get_by_test_id("stDataFrame").first
        table.wait_for(timeout=60_000)
        assert "n=100" in page.url

        # 4. a chance-level setting gets an honest verdict (a fresh session)
        page.goto(f"{base}/?{CHANCE}")
        idle(page)
        _compute_all(page)
        page.get_by_text("No method is useful at this setting", exact=False).first.wait_for(timeout=120_000)
        page.wait_for_function(CHARTS + " >= 1", timeout=120_000)
        no_exception(page, "chance-level verdict")

        # 5. an expensive setting: Compute, then Cancel; the previous chart stays
        page.goto(f"{base}/?{FAST}")  # the default view, cached: its chart is drawn at once
        idle(page)
        page.wait_for_function(CHARTS + " >= 1", timeout=120_000)
        _expander(page)
        _type(page, "L2 weight λ (average form)", "1e-7")  # not computed yet (step 2 cached 1e-6)
        page.get_by_role("button", name=COMPUTE).first.click()
        cancel = page.get_by_role("button", name="Cancel").first
        cancel.wait_for(timeout=30_000)
        cancel.click()
        page.get_by_text("cancelled", exact=False).first.wait_for(timeout=60_000)
        idle(page)
        no_exception(page, "after Cancel")
        assert page.get_by_role("button", name="Resume").count() >= 1
        assert page.get_by_text("Previous chart", exact=False).count() >= 1
        assert page.evaluate(CHARTS) >= 1
