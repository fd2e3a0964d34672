"""What the DP-SGD calibration table shipped with privcore can and cannot catch (prints figures; not a test).

    python bench/bench_bundle.py [--step 1] [--lower 0.998]

For every ``--step``-th entry of privcore/accounting/calibrations_bundled.json: the smallest factor f
by which its multiplier z can be lowered and still pass the re-check on reading
(pld_approx ``recheck``, bisection to 1e-4), and dp_accounting's epsilon at f z on the search's own
grid, as a share over the target: how much a tampered entry could under-protect if only the re-check
stood in its way. Then the whole table lowered by ``--lower``: how many entries the every-entry test
of tests/accounting/test_bundle.py (epsilon at most the target on the search's grid) would refuse.
"""

from __future__ import annotations

import argparse
import statistics
import warnings


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--step", type=int, default=1, help="every step-th entry (1: all)")
    ap.add_argument("--lower", type=float, default=0.998, help="factor applied to the whole table")
    args = ap.parse_args()
    from privcore.accounting import bundle, dpsgd, memo
    from privcore.accounting.pld_approx import recheck

    entries = []
    for setting in bundle.settings()[:: args.step]:
        z = memo.bundled_value("dpsgd_noise_multiplier", setting)
        if z is not None:
            entries.append((setting, z))
    if not entries:
        raise SystemExit("the table answers nothing here (other library versions than requirements.txt pins?)")

    def eps_at(setting: tuple, s: float) -> float:
        eps, delta, q, steps, rel, _, grid = setting
        return dpsgd._pld_epsilon(s, q, steps, delta, rel, dpsgd.pld_interval(eps, steps, s, q, rel, grid))

    factors, excess, caught = [], [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the re-check warns at every refusal
        for setting, z in entries:
            eps, delta, q, steps = setting[:4]
            lo, hi = 0.9, 1.0  # recheck(hi z) holds (a verified entry); find the smallest accepted factor
            if not recheck(z, eps, delta, q, steps):
                print(f"a verified entry is refused by the re-check: {setting}")
                continue
            while hi - lo > 1e-4:
                mid = (lo + hi) / 2
                lo, hi = (lo, mid) if recheck(z * mid, eps, delta, q, steps) else (mid, hi)
            factors.append(hi)
            excess.append(eps_at(setting, z * hi) / eps - 1.0)
            caught += eps_at(setting, z * args.lower) > eps
    worst = min(range(len(factors)), key=factors.__getitem__)
    print(f"{len(factors)} entries of {len(bundle.settings())} settings (step {args.step})")
    print(f"smallest factor the re-check accepts: median {statistics.median(factors):.4f}, worst {factors[worst]:.4f} "
          f"(epsilon {entries[worst][0][0]:g}, q {entries[worst][0][2]:.4g})")
    print(f"epsilon over target at that factor (search's grid): median {statistics.median(excess):.2%}, "
          f"largest {max(excess):.2%}")
    print(f"table lowered by factor {args.lower}: {caught} of {len(factors)} entries fail the every-entry test")


if __name__ == "__main__":
    main()
