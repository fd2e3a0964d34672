"""DP-SGD under replace-one neighbours (SPEC "DP-SGD"; issue 8, item 1).

Every multiplier privcore returns is re-checked here with an accountant built independently of
the code under test: a fresh ``dp_accounting.pld.PLDAccountant(REPLACE_ONE)`` on a fine grid,
composed through the DpEvent API (privcore builds the PLD directly with
``from_gaussian_mechanism(...).self_compose``). For q = 1 the mechanism is a plain Gaussian with
sensitivity 2, whose exact noise comes from the analytic Gaussian (Balle and Wang 2018).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from privcore import calibrate
from privcore.accounting import analytic_gaussian_sigma, dpsgd_epsilon_replace_one, dpsgd_noise_multiplier
from privcore.types import CalibrationError, PrivacyBudget, Problem

pytestmark = pytest.mark.filterwarnings("ignore:Optimal order is the largest alpha:UserWarning")

DEFAULT = Problem()  # N = 4,000, batch 256, 5 epochs: q = 0.064, 79 steps


def reference_epsilon(z: float, q: float, steps: int, delta: float, interval: float | None = None) -> float:
    """Replace-one epsilon from a fresh PLDAccountant (DpEvent API), pessimistic, fine grid."""
    from dp_accounting import NeighboringRelation, dp_event
    from dp_accounting.pld import PLDAccountant

    acc = PLDAccountant(neighboring_relation=NeighboringRelation.REPLACE_ONE,
                        value_discretization_interval=interval or 1e-4)
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(z)), steps))
    return acc.get_epsilon(delta)


def _interval(eps: float, steps: int) -> float:
    """A reference grid finer than privcore's (eps * 1e-2 / sqrt(steps) moderate, 4e-3 fine)."""
    return eps * 2e-3 / math.sqrt(steps)


GRID = [Problem(n=4000, batch_size=256, epochs=5),    # q = 0.064, 79 steps (the defaults)
        Problem(n=1000, batch_size=10, epochs=2),     # q = 0.01, 200 steps
        Problem(n=60000, batch_size=600, epochs=1)]   # q = 0.01, 100 steps
# Every problem at every epsilon, with both deltas over the grid (the full product costs 2x).
CASES = [(pb, eps, (1e-5, 1e-6)[(i + j) % 2]) for i, pb in enumerate(GRID) for j, eps in enumerate((0.1, 1.0, 8.0))]


@pytest.mark.parametrize("pb, eps, delta", CASES, ids=lambda v: f"N{v.n}-b{v.batch_size}-e{v.epochs}"
                         if isinstance(v, Problem) else f"{v:g}")
def test_corrected_and_tight_meet_replace_one_target_and_are_not_loose(pb, eps, delta):
    q, k = pb.sample_rate, pb.steps
    zs = {}
    for mode in ("corrected", "tight"):
        ns = calibrate("dpsgd", PrivacyBudget(eps, delta), pb, accounting=mode)
        z = zs[mode] = ns.noise_multiplier
        assert ns.sigma == pytest.approx(z * pb.clip)
        assert "replace-one, dp_accounting PLD" in ns.formula and "replace-one, dp_accounting PLD" in ns.notes[0]
        assert reference_epsilon(z, q, k, delta, _interval(eps, k)) <= eps, mode
    # Not grossly loose: 1 % less noise than tight's already fails the target.
    assert reference_epsilon(zs["tight"] * 0.99, q, k, delta, _interval(eps, k)) > eps
    assert zs["tight"] <= zs["corrected"] <= zs["tight"] * 1.005


def test_defaults_corrected_tight_and_paper():
    q, k = DEFAULT.sample_rate, DEFAULT.steps
    assert (q, k) == (0.064, 79)
    budget = PrivacyBudget(1.0, 1e-5)
    corrected = calibrate("dpsgd", budget, DEFAULT, "corrected").noise_multiplier
    tight = calibrate("dpsgd", budget, DEFAULT, "tight").noise_multiplier
    assert 4.0 < tight <= corrected < 4.5
    assert reference_epsilon(corrected * 0.995, q, k, 1e-5, _interval(1.0, k)) > 1.0  # within 0.5 % of the smallest
    paper = calibrate("dpsgd", budget, DEFAULT, "paper")
    assert paper.noise_multiplier == pytest.approx(2.6, abs=0.05)
    real = reference_epsilon(paper.noise_multiplier, q, k, 1e-5)
    assert real > 1.5
    assert "add/remove" in paper.formula.lower() and "ADD/REMOVE" in paper.notes[0]
    assert f"replace-one epsilon of this noise: {real:.3g}" in paper.notes[0]  # 1.72


def test_add_remove_multiplier_is_still_available_and_too_small():
    q, k = DEFAULT.sample_rate, DEFAULT.steps
    rdp = dpsgd_noise_multiplier(1.0, 1e-5, q, k, "rdp")  # Opacus add/remove: the paper's variant
    assert rdp == dpsgd_noise_multiplier(1.0, 1e-5, q, k, "rdp", relation="add_remove")
    pld_ar = dpsgd_noise_multiplier(1.0, 1e-5, q, k, "pld", relation="add_remove")
    ro = dpsgd_noise_multiplier(1.0, 1e-5, q, k)  # default: replace-one, PLD
    assert pld_ar < rdp < ro
    assert ro == dpsgd_noise_multiplier(1.0, 1e-5, q, k, "pld", relation="replace_one")
    assert dpsgd_epsilon_replace_one(rdp, q, k, 1e-5) > 1.5


@pytest.mark.parametrize("eps", [50.0, 100.0])
@pytest.mark.parametrize("steps", [1, 4])
def test_large_epsilon_tight_matches_exact_gaussian_at_q_1(eps, steps):
    # q = 1: steps Gaussians of std z at sensitivity 2 compose to one of std z / sqrt(steps).
    exact = math.sqrt(steps) * analytic_gaussian_sigma(eps, 1e-5, 2.0)
    z = dpsgd_noise_multiplier(eps, 1e-5, 1.0, steps, grid="fine")
    assert exact <= z <= exact * 1.003  # never below the exact value: sound at eps = 50-100


@pytest.mark.parametrize("eps", [50.0, 100.0])
@pytest.mark.parametrize("q, steps", [(0.064, 79), (0.01, 2000), (0.5, 10)])
def test_large_epsilon_tight_is_sound(eps, q, steps):
    z = dpsgd_noise_multiplier(eps, 1e-5, q, steps, grid="fine")
    # Reference grid 10x finer than the fine grid's relative interval at this epsilon.
    ref = 4e-4 * eps / math.sqrt(steps)
    assert reference_epsilon(z, q, steps, 1e-5, ref) <= eps
    assert reference_epsilon(z * 0.99, q, steps, 1e-5, ref) > eps


def test_epsilon_replace_one_agrees_with_reference():
    for z, q, k in [(4.24, 0.064, 79), (0.8, 0.5, 10)]:
        ours = dpsgd_epsilon_replace_one(z, q, k, 1e-5)
        ref = reference_epsilon(z, q, k, 1e-5, _interval(ours, k))
        assert ours == pytest.approx(ref, rel=2e-3)


def test_cli_json_multiplier_meets_replace_one_target():
    out = subprocess.run([sys.executable, "-m", "privcore", "calibrate", "--method", "dpsgd", "--epsilon", "2",
                          "--delta", "1e-6", "--n", "10000", "--batch-size", "100", "--epochs", "3",
                          "--json"], capture_output=True, text=True, check=True)
    z = json.loads(out.stdout)["noise_multiplier"]
    assert reference_epsilon(z, 0.01, 300, 1e-6, _interval(2.0, 300)) <= 2.0


def test_errors_name_parameter_range_and_value():
    with pytest.raises(CalibrationError, match="delta > 0"):
        dpsgd_noise_multiplier(1.0, 0.0, 0.01, 100)
    with pytest.raises(CalibrationError, match="delta > 0"):
        calibrate("dpsgd", PrivacyBudget(1.0, 0.0), DEFAULT, "corrected")
    with pytest.raises(CalibrationError, match=r"epsilon must be in \(0, inf\), got -1"):
        dpsgd_noise_multiplier(-1.0, 1e-5, 0.01, 100)
    with pytest.raises(CalibrationError, match=r"sample_rate must be in \(0, 1\], got 1.5"):
        dpsgd_noise_multiplier(1.0, 1e-5, 1.5, 100)
    with pytest.raises(CalibrationError, match=r"noise_multiplier must be in \(0, inf\), got 0"):
        dpsgd_epsilon_replace_one(0.0, 0.01, 100, 1e-5)
    with pytest.raises(CalibrationError, match="add/remove neighbours only"):
        dpsgd_noise_multiplier(1.0, 1e-5, 0.01, 100, "rdp", relation="replace_one")
    with pytest.raises(CalibrationError, match="cannot reach epsilon"):
        dpsgd_noise_multiplier(1e-4, 1e-10, 1.0, 100_000)


def test_dp_accounting_is_imported_only_when_dpsgd_is_calibrated():
    code = ("import sys, privcore, privcore.cli, privcore.calibration, privcore.accounting, privcore.methods\n"
            "from privcore import calibrate\nfrom privcore.types import PrivacyBudget, Problem\n"
            "calibrate('model_sensitivity', PrivacyBudget(1.0, 1e-5), Problem())\n"
            "assert 'dp_accounting' not in sys.modules, 'imported eagerly'\n")
    subprocess.run([sys.executable, "-c", code], check=True)
