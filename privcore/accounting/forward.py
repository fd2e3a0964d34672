"""Forward accounting: the epsilon a given noise really spends, under replace-one neighbours.

The calibrations go from (epsilon, delta) to noise; this module goes back, like TF Privacy's
``compute_dp_sgd_privacy``: given the noise of a method (sigma, beta, DP-SGD's multiplier, the vote
methods' scales) and the other knobs, the epsilon at ``delta`` that the method's accountant
certifies for replace-one neighbours. It serves two purposes:

* the "what epsilon does this noise give?" question (Calibrate page, ``privcore epsilon``);
* the real epsilon of a ``paper`` calibration: the published noise scales assume add/remove
  neighbours, an exact minimiser or a one-query exponential mechanism of beta rather than 2 beta
  (docs/spec.md), so their epsilon under this project's relation is computed here with the
  ``corrected`` accountant (adaptive queries, certified solver sensitivity).

Each method says which of its noise numbers the question needs, names its accountant and computes the
epsilon in its own module, beside its calibration (:mod:`privcore.methods.forward`: ``noise_inputs``,
``accountant``, ``spent_epsilon``); :func:`spent_epsilon` here asks it, naming no method. The math they
share is here: each function inverts a calibration exactly where a closed form exists (Laplace-like
noise, the analytic Gaussian, the zCDP of a bounded-range vote, loss perturbation's privacy-loss
bound, sparse vector's split); the methods otherwise reuse the accountant's own epsilon function
(:func:`privcore.accounting.dpsgd.dpsgd_epsilon_replace_one`, :func:`privcore.accounting.pate.gnmax_epsilon`,
:func:`privcore.accounting.bounded_range.br_composition_epsilon`) or, for prediction
sensitivity's basic/advanced composition, :func:`bisect_epsilon` on the calibration itself (upper
end). Every value returned is an upper bound on what the accountant certifies for that noise.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Callable, Mapping, Sequence

from ..types import K_LIPSCHITZ, L_HESSIAN, NoiseScale, Problem
from ..validation import check_choice, check_int, check_real, epsilon_up

__all__ = ["spent_epsilon", "replace_one_epsilon", "accountant_text", "FORWARD_MODES",
           "laplace_like_epsilon", "gaussian_epsilon", "exponential_vote_epsilon", "loss_perturbation_epsilon",
           "sparse_vector_epsilon", "bisect_epsilon", "judging_accounting",
           "real_guarantee", "claims_more", "real_epsilon_summary"]

#: Accounting modes the forward direction uses; ``paper`` scales are judged by ``corrected``.
FORWARD_MODES: tuple[str, ...] = ("corrected", "tight")


def laplace_like_epsilon(beta: float, sensitivity: float, queries: int = 1) -> float:
    """Pure epsilon of ``queries`` Laplace-like draws (density exp(-beta ||b||)) at L2 sensitivity
    Delta: queries * beta * Delta (paper Theorem 1 and basic composition)."""
    beta = check_real("beta", beta, low=0.0, low_open=True)
    return check_int("queries", queries, low=1) * beta * check_real("sensitivity", sensitivity, low=0.0)


def gaussian_epsilon(sigma: float, delta: float, sensitivity: float, queries: int = 1) -> float:
    """Epsilon at ``delta`` of ``queries`` Gaussian releases of std ``sigma`` at L2 sensitivity Delta.

    The composition of Gaussian mechanisms is a Gaussian mechanism of sensitivity sqrt(queries) Delta
    (also for adaptively chosen queries: Dong, Roth and Su 2019), so this is the analytic Gaussian
    epsilon (Balle and Wang 2018) at that sensitivity: exact, not a bound of a bound.
    """
    from .gaussian import analytic_gaussian_epsilon

    q = check_int("queries", queries, low=1)
    return analytic_gaussian_epsilon(sigma, delta, math.sqrt(q) * sensitivity)


def exponential_vote_epsilon(beta: float, budget: int, delta: float, accounting: str = "corrected") -> float:
    """Epsilon of ``budget`` noisy votes (exponential mechanism, inverse temperature beta; one example
    moves one vote, so each answer is 2 beta-DP and 2 beta-bounded-range).

    delta = 0: 2 beta B. ``corrected`` (adaptive queries): the smaller of 2 beta B and the zCDP bound
    rho + 2 sqrt(rho ln(1/delta)), rho = B beta^2 / 2. ``tight`` (queries fixed in advance): the
    optimal bounded-range composition (Dong, Durfee and Rogers 2020).
    """
    beta = check_real("beta", beta, low=0.0, low_open=True)
    b = check_int("budget", budget, low=1)
    dlt = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    check_choice("accounting", accounting, FORWARD_MODES)
    pure = 2.0 * beta * b
    if dlt == 0.0:
        return pure
    if accounting == "tight":
        from .bounded_range import br_composition_epsilon

        return min(pure, br_composition_epsilon(2.0 * beta, b, dlt))
    rho = b * beta * beta / 2.0
    return min(pure, rho + 2.0 * math.sqrt(rho * math.log(1.0 / dlt)))


def loss_perturbation_epsilon(noise: str, scale: float, rho: float, classes: int, delta: float, *,
                              n: int | None = None, lam: float | None = None, solver_tolerance: float | None = None,
                              output_scale: float | None = None, output_share: float = 0.01) -> float:
    """Replace-one epsilon of loss perturbation (objective noise ``scale``: 1/beta or sigma; extra L2 weight rho).

    The Jacobian term costs L C / rho (docs/spec.md; rho = 2 L C / eps gives eps / 2). The noise term:
    Laplace-like, ||b - b'|| <= 2K gives 2 K beta; Gaussian, the loss 2 K r / sigma + 2 K^2 / sigma^2
    whenever chi_{2C} <= r, r its upper delta_1-quantile (:func:`multiclass_gaussian_sigma`'s bound).
    ``output_scale`` (approximate minima perturbation): the output draw at sensitivity
    2 g / (lam + rho / n) with its own ``output_share`` of delta; without it the exact minimiser is assumed.
    """
    from ..methods.loss_perturbation import gamma_upper_quantile

    check_choice("noise", noise, ("laplace_like", "gaussian"))
    scale = check_real("scale", scale, low=0.0, low_open=True)
    rho = check_real("rho", rho, low=0.0, low_open=True)
    c = check_int("classes", classes, low=1)
    dlt = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    has_out = output_scale is not None
    d1 = dlt * (1.0 - output_share) if has_out else dlt
    jacobian = L_HESSIAN * c / rho
    if noise == "laplace_like":
        part = 2.0 * K_LIPSCHITZ / scale
    else:
        if d1 <= 0.0:
            raise ValueError(f"delta must be > 0 for Gaussian loss perturbation, got {dlt!r}")
        r = math.sqrt(2.0 * gamma_upper_quantile(c, d1))
        part = 2.0 * K_LIPSCHITZ * r / scale + 2.0 * K_LIPSCHITZ ** 2 / scale ** 2
    total = part + jacobian
    if has_out:
        if n is None or lam is None or solver_tolerance is None:
            raise ValueError("output_scale needs n, lam and solver_tolerance (the output noise's sensitivity)")
        out_sens = 2.0 * solver_tolerance / (lam + rho / n)
        if noise == "laplace_like":
            total += out_sens / check_real("output_scale", output_scale, low=0.0, low_open=True)
        else:
            total += gaussian_epsilon(output_scale, dlt * output_share, out_sens)
    return total


def sparse_vector_epsilon(beta: float, threshold: float, query_scale: float, cap: int, budget: int,
                          delta: float) -> float:
    """Epsilon at ``delta`` of sparse-vector aggregation (:func:`privcore.accounting.pate.svt_calibration`).

    Query noise Lap(2c / eps_2) and threshold noise Lap(1/eps_1) with eps_1 = eps_2 / (2c)^(2/3) (the
    calibration's fixed ratio); the threshold w = t_1 + t_2 fixes the delta_s of the free majorities
    (ln(1/delta_s) = (w - s ln B) / (s + 1/eps_1), s = query scale); the c fallback votes get the rest of
    delta (their epsilon by :func:`exponential_vote_epsilon`, adaptive). Total eps_1 + eps_2 + eps_f.
    """
    b, c = check_int("budget", budget, low=1), check_int("cap", cap, low=1)
    s = check_real("query_scale", query_scale, low=0.0, low_open=True)
    w = check_real("threshold", threshold)
    dlt = check_real("delta", delta, low=0.0, high=1.0, low_open=True, high_open=True)
    eps2 = 2.0 * c / s
    eps1 = eps2 / (2.0 * c) ** (2.0 / 3.0)
    log_inv_ds = (w - s * math.log(b)) / (s + 1.0 / eps1)
    delta_s = math.exp(-log_inv_ds) if log_inv_ds > 0 else 1.0
    if delta_s >= dlt:
        raise ValueError(f"threshold={w:g} leaves the free majorities a delta of {delta_s:.3g}, not below "
                         f"delta={dlt:g}: raise the threshold or delta")
    return eps1 + eps2 + exponential_vote_epsilon(beta, c, dlt - delta_s, "corrected")


def bisect_epsilon(noise_at: "Callable[[float], float]", target: float, lo: float = 1e-9, rel_tol: float = 1e-7) -> float:
    """Smallest epsilon whose calibrated noise ``noise_at(eps)`` (decreasing in eps) is <= ``target``.

    ``lo``: a starting guess at or below the answer. The upper end of the final bracket is returned:
    the given noise meets it. A noise function that returns NaN is an error (every comparison with NaN is
    false, so the search ran to its bottom and returned 2e-9).
    """
    import math

    def noise(eps: float) -> float:
        value = noise_at(eps)
        if not isinstance(value, (int, float)) or math.isnan(value):
            raise ValueError(f"the noise at epsilon = {eps:g} is not a number ({value!r}): no epsilon can be found")
        return value

    hi = lo * 2.0
    while noise(hi) > target:
        lo, hi = hi, hi * 2.0
        if hi > 1e6:
            raise ValueError(f"noise {target:g} is too small for any epsilon up to 1e6")
    while noise(lo) <= target and lo > 1e-300:
        lo /= 2.0
    while hi - lo > rel_tol * hi:
        mid = 0.5 * (lo + hi)
        if noise(mid) <= target:
            hi = mid
        else:
            lo = mid
    return hi


def spent_epsilon(method: str, noise: Mapping[str, Any], problem: Problem, delta: float,
                  accounting: str = "corrected") -> float:
    """Epsilon at ``delta`` (replace-one) that ``method`` spends with ``noise`` on ``problem``.

    ``noise``: the noise fields of a :class:`~privcore.types.NoiseScale` (``noise`` kind and the numbers
    the method's :attr:`~privcore.methods.forward.ForwardAccounting.noise_inputs` name, e.g. ``sigma``,
    ``beta``, ``noise_multiplier``, its own scale fields); ``accounting``: ``corrected`` or ``tight`` (the
    accountant that judges it). The method's own hook computes it
    (:meth:`~privcore.methods.forward.ForwardAccounting.spent_epsilon`, beside its calibration): this
    function checks the mode and delta, and gives epsilon = inf for no noise.
    """
    from ..methods import get_method

    check_choice("accounting", accounting, FORWARD_MODES)
    dlt = check_real("delta", delta, low=0.0, high=1.0, high_open=True)
    entry = get_method(method)
    if noise.get("noise") == "none":
        return math.inf
    noise = {**noise, "method": method}  # named in the message of a missing field
    return entry.spent_epsilon(noise, problem, dlt, accounting)


def replace_one_epsilon(scale: NoiseScale, problem: Problem) -> float:
    """The epsilon at ``scale.delta`` that ``scale`` really reaches under replace-one neighbours.

    Judged by :func:`judging_accounting` (a sound accountant for adaptive queries, certified
    sensitivity): for ``paper`` scales this is the honest number beside the nominal one (e.g.
    subsample-and-aggregate at delta = 0: 2 epsilon).
    """
    return spent_epsilon(scale.method, scale.to_dict(), problem, scale.delta,
                         judging_accounting(scale.method, scale.accounting))


def accountant_text(method: str, delta: float) -> str:
    """One phrase naming the accountant of ``method`` at ``delta`` (pure or approximate DP): its declaration."""
    from ..methods import get_method

    return get_method(method).accountant_text(delta)


def judging_accounting(method: str, accounting: str) -> str:
    """The sound accountant that judges a scale of ``method`` calibrated under ``accounting``.

    ``paper`` scales: ``tight`` (exact Gaussian composition and PLD hold for adaptive queries too), unless
    the method's tight accountant assumes more (subsample-and-aggregate's, queries fixed in advance: then
    ``corrected``, zCDP, for its ``tight`` scales too). The method says
    (:meth:`~privcore.methods.forward.ForwardAccounting.judging_accounting`).
    """
    from ..methods import get_method

    check_choice("accounting", accounting, ("paper", "corrected", "tight"))
    return get_method(method).judging_accounting(accounting)


def claims_more(method: str, accounting: str, delta: float) -> bool:
    """Whether a row of ``method`` under ``accounting`` claims more than the sound accountant gives: ``paper``
    rows, and rows at delta > 0 whose mode is judged by another accountant (a tight one assuming more)."""
    return accounting == "paper" or (float(delta) > 0 and judging_accounting(method, accounting) != accounting)


@functools.lru_cache(maxsize=4096)
def _real_cached(method: str, noise: tuple, problem: Problem, delta: float, accounting: str) -> float:
    return spent_epsilon(method, dict(noise), problem, delta, accounting)


def real_guarantee(method: str, noise: Mapping[str, Any], problem: Problem, delta: float,
                   accounting: str) -> tuple[float | None, str | None]:
    """(real epsilon, one sentence) for a row whose header epsilon is not what it guarantees; (None, None) otherwise.

    ``noise``: the row's stored :class:`~privcore.types.NoiseScale` fields. Rows under ``paper``
    accounting and tight subsample-and-aggregate rows (non-adaptive assumption) get the epsilon
    that their noise reaches at ``delta`` under replace-one neighbours with adaptive queries.
    """
    if noise.get("noise") in (None, "none") or not claims_more(method, accounting, delta):
        return None, None
    judge = judging_accounting(method, accounting)
    key = tuple(sorted((k, v) for k, v in noise.items() if isinstance(v, (int, float, str)) or v is None))
    try:
        real = _real_cached(method, key, problem, float(delta), judge)
    except (ValueError, ArithmeticError) as err:
        return None, f"real epsilon not computable here: {err}"
    why = ("paper accounting (as published)" if accounting == "paper"
           else "tight accounting assumes the B queries are fixed in advance")
    exact = ""
    if accounting == "paper":
        from ..methods import get_method

        if get_method(method).paper_assumes_exact_minimiser:  # an independent audit found this unsaid
            exact = (" for the exact minimiser; the solver's output, which is what is released, is not covered "
                     "(corrected accounting adds its residual)")
    return real, (f"{why}: under replace-one neighbours with adaptive queries this noise guarantees "
                  f"epsilon = {epsilon_up(real):g} at delta = {float(delta):g}{exact}")


def real_epsilon_summary(rows: Sequence[Mapping[str, Any]], label=None) -> str:  # noqa: ANN001 - a name -> label callable
    """One sentence for rows whose header epsilon is not what they guarantee (``real_epsilon`` set), else "".

    Per method, the real epsilon at the rows' largest ratio to the stated one, e.g. "real ε under
    replace-one neighbours: subsample-and-aggregate 6 (stated 3), DP-SGD 4.09 (stated 3)".
    """
    worst: dict[str, tuple[float, float]] = {}
    for r in rows:
        real, eps = r.get("real_epsilon"), r.get("epsilon")
        if real is None or eps is None or not math.isfinite(float(eps)):
            continue
        ratio = float(real) / float(eps)
        if r["method"] not in worst or ratio > worst[r["method"]][0] / worst[r["method"]][1]:
            worst[r["method"]] = (float(real), float(eps))
    if not worst:
        return ""
    name = label or (lambda m: m)
    parts = [f"{name(m)} ε = {epsilon_up(real):g} where {eps:g} is stated" for m, (real, eps) in worst.items()]
    return ("What is really guaranteed (replace-one, adaptive queries), at each method's point furthest from its "
            "stated ε: " + "; ".join(parts))
