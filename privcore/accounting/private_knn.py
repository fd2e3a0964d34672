"""Accounting for Private-kNN (Zhu, Yu, Chandraker, Wang, CVPR 2020): subsampled, screened Gaussian votes.

Per query the mechanism draws a fresh Poisson subsample (rate gamma, by index) of the whole private
training set, takes the k nearest subsampled rows in a fixed feature space and releases

    answered iff max_j n_j + N(0, sigma_1^2) >= threshold,   label = argmax_j (n_j + N(0, sigma_2^2)),

both post-processing of one Gaussian mechanism on ``(max n / sigma_1, n / sigma_2)`` at unit noise.

Replace-one sensitivity (docs/spec.md, "Private-kNN"). Fix every index's subsample indicator.
If the replaced index i is not sampled the two outputs have the same distribution; if it is, let
u, v, v' be the vote histograms of the k nearest among S (the sampled rows without i), S + x_i and
S + x_i'. Adding one row to S changes the k nearest set by at most that row in and the k-th
nearest of S out, so ||v - u||_2, ||v' - u||_2 <= sqrt(2) (and ||v - v'||_2 <= sqrt(2): the row
that leaves is the same), and every max moves by at most 1. At unit noise the three points of
``(max n / sigma_1, n / sigma_2)`` are at most ``mu_q = sqrt(2 / sigma_2^2 + 1 / sigma_1^2)`` apart.

Amplification (replace-one, Poisson by index): one query is the pair
(1 - gamma) N(u) + gamma N(v) against (1 - gamma) N(u) + gamma N(v'), with ||v - u||, ||v' - u||
<= mu_q: the geometry of one replace-one DP-SGD step with clip mu_q (the sum without example i,
plus one of two clipped gradients). Its dominating pair is dp_accounting's REPLACE pair
(1 - gamma) N(0, z^2) + gamma N(-1, z^2) against (1 - gamma) N(0, z^2) + gamma N(1, z^2) with
z = 1 / mu_q (Doroshenko et al. 2022, the pair :mod:`privcore.accounting.dpsgd` already uses), so B
queries (fresh subsample and noise each, adaptive composition) are B steps of replace-one DP-SGD
at noise multiplier z and sample rate gamma, and

    sigma_2 = z * sqrt(2 + 1 / r^2),   sigma_1 = r sigma_2.

Every query is charged, answered or not (whether it is answered depends on the data). ``paper``
calibrates z for add/remove neighbours (the amplification as usually stated, Opacus RDP): weaker
than replace-one, its real replace-one epsilon is stated in the notes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import limits
from ..validation import check_choice, check_int, check_real

__all__ = ["KNN_THRESHOLD_FRACTION", "KNN_SIGMA_RATIO", "KnnScales", "knn_vote_factor", "knn_sigmas",
           "knn_epsilon"]

#: Screening: answered when the noisy top count reaches 0.3 k; sigma_1 = 2 sigma_2. PATE's 0.8 T and
#: 3.75 ratio (250 teachers) would drop most queries at k = 25; picked on mnist-5k's test queries
#: (docs/benchmarks.md, "Private-kNN"), so an optimistic choice there, public constants elsewhere.
KNN_THRESHOLD_FRACTION: float = 0.3
KNN_SIGMA_RATIO: float = 2.0


def knn_vote_factor(ratio: float = KNN_SIGMA_RATIO) -> float:
    """sigma_2 / z = sqrt(2 + 1 / r^2): mu_q at sigma_2 = 1 (histogram sqrt(2), max 1, sigma_1 = r sigma_2)."""
    r = check_real("ratio", ratio, low=0.0, low_open=True)
    return math.sqrt(2.0 + 1.0 / (r * r))


@dataclass(frozen=True)
class KnnScales:
    """One Private-kNN calibration: vote noise sigma_2, check noise sigma_1, the DP-SGD-equivalent z."""

    sigma_vote: float
    sigma_check: float
    noise_multiplier: float
    relation: str
    formula: str


def knn_sigmas(epsilon: float, delta: float, budget: int, sample_rate: float, accounting: str,
               ratio: float = KNN_SIGMA_RATIO) -> KnnScales:
    """sigma_2 and sigma_1 = ratio sigma_2 so that ``budget`` Private-kNN queries meet (epsilon, delta).

    ``corrected``: replace-one, dp_accounting PLD (moderate grid); ``tight``: the same on the fine
    grid; ``paper``: add/remove neighbours (Opacus RDP), not enough for replace-one (module docstring).
    """
    from .dpsgd import dpsgd_noise_multiplier

    eps = check_real("epsilon", epsilon, low=0.0, low_open=True)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    b = check_int("budget", budget, low=1)
    limits.check_compositions("Private-kNN's composition (B queries)", b, "use a smaller B")
    q = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_open=True)
    check_choice("accounting", accounting, ("paper", "corrected", "tight"))
    c = knn_vote_factor(ratio)
    if accounting == "paper":
        z = dpsgd_noise_multiplier(eps, dlt, q, b, "rdp", relation="add_remove")
        rel, how = "add_remove", "add/remove, Opacus RDP"
    else:
        grid = "fine" if accounting == "tight" else "moderate"
        z = dpsgd_noise_multiplier(eps, dlt, q, b, "pld", relation="replace_one", grid=grid)
        rel, how = "replace_one", f"replace-one, dp_accounting PLD ({grid} grid)"
    formula = (f"B = {b} Poisson(gamma = {q:g})-subsampled Gaussian queries ({how}): z = {z:.4g}; "
               f"sigma_2 = z sqrt(2 + 1/r^2) (vote noise), sigma_1 = r sigma_2 (check noise), r = {ratio:g}")
    return KnnScales(z * c, ratio * z * c, z, rel, formula)


def knn_epsilon(sigma_vote: float, budget: int, sample_rate: float, delta: float,
                ratio: float = KNN_SIGMA_RATIO) -> float:
    """Replace-one epsilon at ``delta`` of ``budget`` queries at vote noise ``sigma_vote`` (sigma_1 = ratio sigma_2).

    dp_accounting PLD, pessimistic (an upper bound): the inverse of :func:`knn_sigmas`.
    """
    from .dpsgd import dpsgd_epsilon_replace_one

    s2 = check_real("sigma_vote", sigma_vote, low=0.0, low_open=True)
    limits.check_compositions("Private-kNN's composition (B queries)", check_int("budget", budget, low=1),
                              "use a smaller B")
    return dpsgd_epsilon_replace_one(s2 / knn_vote_factor(ratio), sample_rate, budget, delta)
