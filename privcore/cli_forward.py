"""``privcore epsilon`` (the epsilon a given noise spends) and ``privcore statement`` (a privacy statement).

Registered by :func:`privcore.cli.build_parser`; the forward accounting is
:mod:`privcore.accounting.forward`, the statement :mod:`privcore.statement`. The noise flags are the
registered methods' declared noise inputs (:mod:`privcore.methods.forward`), read when the parser is built.
"""

from __future__ import annotations

import argparse
import json
from typing import Callable

from . import knobs, methods

__all__ = ["add_forward_parsers", "run_epsilon_command", "run_statement_command", "noise_flags"]


def noise_flags() -> dict[str, list]:
    """The noise flags of ``privcore epsilon``: each registered method's declared noise inputs
    (:attr:`privcore.methods.forward.ForwardAccounting.noise_inputs`) by name -> [(method, input)]."""
    from .methods.forward import declared_noise_inputs

    return declared_noise_inputs(methods.ENTRIES.values())


def _flag_help(declared: list) -> str:
    """Each distinct help line of a flag's declarations, after the methods that declare it."""
    by_help: dict[str, list[str]] = {}
    for m, inp in declared:
        text = inp.help + (f" (not given: {inp.absent})" if inp.absent else "")
        by_help.setdefault(text, []).append(m.short_label)
    return "; ".join(f"{', '.join(who)}: {text}" for text, who in by_help.items())


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
    fwd.add_argument("--method", required=True, choices=methods.METHOD_NAMES)
    for name in ("delta", "n"):
        knobs.add_argument(fwd, name)
    knobs.add_argument(fwd, "lam", allow_auto=False)
    add_problem_args(fwd)
    for name, declared in noise_flags().items():  # the methods' own noise inputs, each name once
        aliases = dict.fromkeys(a for _, inp in declared for a in inp.aliases)
        fwd.add_argument(declared[0][1].flag, *("--" + a.replace("_", "-") for a in aliases), dest=name,
                         type=number(int if declared[0][1].integer else float), default=None,
                         help=_flag_help(declared))
    fwd.add_argument("--json", action="store_true", help="print one JSON object")

    st = sub.add_parser("statement", help="privacy statement of one calibrated method (Markdown or JSON)",
                        description="Calibrate --method at (--epsilon, --delta) and print what is guaranteed: epsilon, "
                        "delta, neighbouring relation, accountant, mechanism, preprocessing, assumptions.")
    st.add_argument("--method", required=True, choices=methods.METHOD_NAMES)
    knobs.add_argument(st, "epsilon", default=None, required=True, type=epsilon_type)
    for name in ("delta", "n"):
        knobs.add_argument(st, name)
    knobs.add_argument(st, "lam", allow_auto=False)
    add_problem_args(st)
    st.add_argument("--preprocessing", action="append", default=[], metavar="TEXT",
                    help="a preprocessing step to state as NOT covered by the guarantee (repeatable), e.g. 'PCA "
                         "fitted on the training split'")
    st.add_argument("--public-preprocessing", action="append", default=[], metavar="TEXT",
                    help="a preprocessing step computed from public knowledge alone, never from the data (e.g. "
                         "'features clipped to the sensor range 0-10'): stated as covered (repeatable)")
    st.add_argument("--secure-noise", action="store_true", help="the noise is drawn from fresh OS entropy (release mode)")
    st.add_argument("--json", action="store_true", help="print the statement as JSON (default: Markdown)")


def run_epsilon_command(args: argparse.Namespace) -> int:
    """The epsilon of the given noise: the method's declared inputs, completed and judged by its own
    forward hook (:mod:`privcore.methods.forward`) through :func:`privcore.accounting.forward.spent_epsilon`."""
    from .accounting.forward import accountant_text, judging_accounting, spent_epsilon
    from .methods import get_method

    problem = _problem(args)
    method = get_method(args.method)
    inputs = method.noise_inputs
    if not inputs:
        raise ValueError(f"{args.method} declares no noise inputs: it has no forward direction")
    given = {name: getattr(args, name) for name in noise_flags() if getattr(args, name, None) is not None}
    mine = {i.name for i in inputs}
    flags = ", ".join(i.flag for i in inputs)
    other = [n for n in given if n not in mine]
    if other:
        raise ValueError(f"{args.method} takes the noise {flags}; got {', '.join(sorted(other))}")
    if not given:
        raise ValueError(f"give the noise: {flags} (see privcore epsilon --help)")
    if {"sigma", "beta"} <= set(given):  # a Gaussian or a Laplace-like noise: --beta was ignored but printed
        raise ValueError("give one noise: --sigma (Gaussian) or --beta (Laplace-like), not both")
    noise = method.forward_noise(given, problem)
    judge = judging_accounting(args.method, args.accounting)
    eps = spent_epsilon(args.method, noise, problem, args.delta, judge)
    # The accountant of the noise given: a Laplace-like --beta is pure DP at any delta (it was named the
    # analytic Gaussian's at delta > 0)
    laplace = "beta" in given and "sigma" not in given
    out = {"method": args.method, "epsilon": eps, "delta": args.delta, "accounting": judge,
           "neighbouring_relation": "replace-one",
           "accountant": accountant_text(args.method, 0.0 if laplace else args.delta),
           **{k: v for k, v in noise.items() if k != "noise"}}
    notes = [f"no {i.flag}: {i.absent}" for i in inputs if i.absent and noise.get(i.name) is None]
    if judge != args.accounting:
        notes.append(f"{args.accounting} accounting is judged by the {judge} accountant: the epsilon this noise "
                     "really spends under replace-one neighbours")
    if notes:
        out["note"] = "; ".join(notes)
    if args.json:
        print(json.dumps({k: ("inf" if isinstance(v, float) and v == float("inf") else v) for k, v in out.items()}))
    else:
        for key, value in out.items():
            print(f"{key:>22}: {value}")
    return 0


def run_statement_command(args: argparse.Namespace) -> int:
    from .statement import privacy_statement, statement_json, statement_markdown

    steps = [*args.preprocessing, *({"step": t, "covered": True} for t in args.public_preprocessing)]
    s = privacy_statement(args.method, args.epsilon, args.delta, _problem(args), args.accounting,
                          preprocessing=steps, secure_noise=args.secure_noise)
    print(statement_json(s) if args.json else statement_markdown(s), end="" if not args.json else "\n")
    return 0
