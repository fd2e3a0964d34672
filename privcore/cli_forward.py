"""``privcore epsilon`` (the epsilon a given noise spends) and ``privcore statement`` (a privacy statement).

Registered by :func:`privcore.cli.build_parser`; the forward accounting is
:mod:`privcore.accounting.forward`, the statement :mod:`privcore.statement`.
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

from . import knobs
from .methods import METHOD_NAMES

__all__ = ["add_forward_parsers", "run_epsilon_command", "run_statement_command"]

#: Noise flags of ``privcore epsilon``: flag -> NoiseScale field.
NOISE_FLAGS = {"sigma": "Gaussian std (model/prediction sensitivity, loss perturbation, the GNMax vote noise)",
               "beta": "inverse scale of Laplace-like noise, or the vote's inverse temperature (exponential "
                       "mechanism: subsample-and-aggregate, sparse vector's fallback votes)",
               "noise_multiplier": "DP-SGD noise multiplier (noise std / clip)",
               "rho": "loss perturbation's extra L2 weight rho",
               "output_scale": "loss perturbation's output noise scale (approximate minima perturbation; "
                               "without it the exact minimiser is assumed)",
               "sigma_check": "Confident-GNMax's check noise std (default: the calibration's fixed ratio to --sigma)",
               "threshold": "sparse vector's threshold w",
               "test_noise": "sparse vector's query noise (Laplace scale)",
               "cap": "sparse vector's cap on unstable answers (default ceil(B/4))"}


def _problem(args: argparse.Namespace):  # noqa: ANN202 - a Problem
    from .types import Problem

    return Problem(n=args.n, dim=knobs.default("dim") if args.dim is None else args.dim,
                   classes=knobs.default("classes") if args.classes is None else args.classes, lam=args.lam,
                   budget=args.budget, teachers=args.teachers, batch_size=args.batch_size, epochs=args.epochs,
                   clip=args.clip, learning_rate=args.lr)


def add_forward_parsers(sub, add_problem_args: Callable, number: Callable, epsilon_type: Callable) -> None:  # noqa: ANN001
    """Add ``epsilon`` and ``statement`` to the sub-command parsers ``sub``."""
    fwd = sub.add_parser("epsilon", help="the epsilon a given noise spends (the forward direction; instant, no data)",
                         description="Given a method's noise and the other knobs, the epsilon at --delta that it "
                         "really spends under replace-one neighbours, with the method's accountant.")
    fwd.add_argument("--method", required=True, choices=METHOD_NAMES)
    for name in ("delta", "n"):
        knobs.add_argument(fwd, name)
    knobs.add_argument(fwd, "lam", allow_auto=False)
    add_problem_args(fwd)
    for name, text in NOISE_FLAGS.items():
        fwd.add_argument("--" + name.replace("_", "-"), type=int if name == "cap" else number(float), default=None,
                         help=text)
    fwd.add_argument("--json", action="store_true", help="print one JSON object")

    st = sub.add_parser("statement", help="privacy statement of one calibrated method (Markdown or JSON)",
                        description="Calibrate --method at (--epsilon, --delta) and print what is guaranteed: epsilon, "
                        "delta, neighbouring relation, accountant, mechanism, preprocessing, assumptions.")
    st.add_argument("--method", required=True, choices=METHOD_NAMES)
    knobs.add_argument(st, "epsilon", default=None, required=True, type=epsilon_type)
    for name in ("delta", "n"):
        knobs.add_argument(st, name)
    knobs.add_argument(st, "lam", allow_auto=False)
    add_problem_args(st)
    st.add_argument("--preprocessing", action="append", default=[], metavar="TEXT",
                    help="a preprocessing step to state (repeatable), e.g. 'PCA fitted on the training split: not "
                         "covered by the privacy guarantee'")
    st.add_argument("--secure-noise", action="store_true", help="the noise is drawn from fresh OS entropy (release mode)")
    st.add_argument("--json", action="store_true", help="print the statement as JSON (default: Markdown)")


def run_epsilon_command(args: argparse.Namespace) -> int:
    from .accounting.forward import accountant_text, judging_accounting, spent_epsilon
    from .methods import get_method

    problem = _problem(args)
    method = get_method(args.method)
    given = {name: getattr(args, name) for name in NOISE_FLAGS if getattr(args, name) is not None}
    if not given:
        raise ValueError("give the noise: --sigma, --beta or --noise-multiplier (see privcore epsilon --help)")
    if "sigma_check" in given:
        given["test_noise"] = given.pop("sigma_check")
    elif args.method == "confident_gnmax" and "sigma" in given:
        from .accounting.pate import GNMAX_SIGMA_RATIO

        given["test_noise"] = GNMAX_SIGMA_RATIO * given["sigma"]
    if args.method == "loss_perturbation" and "output_scale" in given:
        from .methods.loss_perturbation import LP_TOLERANCE_FACTOR

        given["solver_tolerance"] = LP_TOLERANCE_FACTOR * problem.solver_tolerance
    kinds = {"noise_multiplier": "gaussian", "sigma": "gaussian", "beta": "laplace_like"}
    kind = next((kinds[k] for k in kinds if k in given), "gaussian")
    if method.name in ("subsample_aggregate", "sparse_vector"):
        kind = "exponential_mechanism"
    judge = judging_accounting(args.method, args.accounting)
    eps = spent_epsilon(args.method, {"noise": kind, **given}, problem, args.delta, judge)
    out = {"method": args.method, "epsilon": eps, "delta": args.delta, "accounting": judge,
           "neighbouring_relation": "replace-one", "accountant": accountant_text(args.method, args.delta), **given}
    if args.method == "loss_perturbation" and "output_scale" not in given:
        out["note"] = "no --output-scale: the exact minimiser is assumed (a solver's output needs the output noise)"
    if args.json:
        print(json.dumps({k: ("inf" if isinstance(v, float) and v == float("inf") else v) for k, v in out.items()}))
    else:
        for key, value in out.items():
            print(f"{key:>22}: {value}")
    return 0


def run_statement_command(args: argparse.Namespace) -> int:
    from .statement import privacy_statement, statement_json, statement_markdown

    s = privacy_statement(args.method, args.epsilon, args.delta, _problem(args), args.accounting,
                          preprocessing=args.preprocessing, secure_noise=args.secure_noise)
    print(statement_json(s) if args.json else statement_markdown(s), end="" if not args.json else "\n")
    return 0
