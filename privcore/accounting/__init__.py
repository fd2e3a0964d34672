"""Privacy accounting: pure functions from (epsilon, delta, setting) to noise parameters.

gaussian: analytic Gaussian mechanism (Balle and Wang 2018). composition: basic, advanced and exact
Gaussian composition over B queries. bounded_range: zCDP and optimal composition of
bounded-range mechanisms (subsample-and-aggregate). dpsgd: DP-SGD noise multipliers under
replace-one neighbours (dp_accounting PLD, the default; imported only when used) and, for the
paper's add/remove variant, Opacus RDP/PRV. pld_approx: a fast approximate replace-one PLD, only a
starting point for dpsgd's verified search. memo: verified DP-SGD multipliers kept on disk (JSON).
Every method's default calibration but DP-SGD's imports no scipy (tests/test_cli_startup.py).
"""

from .bounded_range import br_composition_delta, optimal_beta, zcdp_beta
from .composition import advanced_composition_epsilon, advanced_gaussian_sigma, basic_per_query, exact_gaussian_sigma, zcdp_per_query_epsilon
from .dpsgd import dpsgd_epsilon, dpsgd_epsilon_replace_one, dpsgd_noise_multiplier
from .gaussian import analytic_gaussian_epsilon, analytic_gaussian_sigma, classical_gaussian_sigma, gaussian_delta

__all__ = [
    "analytic_gaussian_sigma", "analytic_gaussian_epsilon", "classical_gaussian_sigma", "gaussian_delta",
    "basic_per_query", "advanced_composition_epsilon", "zcdp_per_query_epsilon", "advanced_gaussian_sigma",
    "exact_gaussian_sigma", "zcdp_beta", "optimal_beta", "br_composition_delta", "dpsgd_epsilon",
    "dpsgd_epsilon_replace_one", "dpsgd_noise_multiplier",
]
