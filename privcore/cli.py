"""Command line: ``privcore`` (or ``python -m privcore``) ``calibrate``, ``epsilon``, ``statement``, ``sweep``,
``leakage``, ``results``, ``deep`` and ``app`` (the dashboard).

Invalid input exits with code 2 and one line on stderr naming the problem (no traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import warnings
from typing import Callable, Sequence

from . import knobs
from .methods import METHOD_NAMES

__all__ = ["main", "build_parser"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as one line (exit 2) instead of usage + message."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise _UsageError(message)


class _UsageError(Exception):
    pass


def _number(kind: Callable[[str], object]) -> Callable[[str], object]:
    """argparse type: an integer, a finite number, or (``kind=_epsilon``) a number or ``inf``."""
    if kind is _epsilon:
        return knobs.cli_type("epsilon", allow_inf=True)
    return knobs._cli_number(int if kind is int else float)


def _epsilon(text: str) -> float:
    """A finite epsilon, or the literal ``inf`` for the non-private baseline (never by overflow)."""
    return knobs.cli_type("epsilon", allow_inf=True)(text)


#: The knobs every sub-command takes, in this order (flags, defaults and help from privcore.knobs).
PROBLEM_KNOBS = ("budget", "classes", "dim", "teachers", "batch_size", "epochs", "clip", "learning_rate", "accounting")


def _add_problem_args(p: argparse.ArgumentParser) -> None:
    for name in PROBLEM_KNOBS:
        if name in ("classes", "dim"):  # not given: the data set's own (calibrate: 10 classes, D = 784)
            knobs.add_argument(p, name, default=None, help="default: the data set's (calibrate: the knob default)")
        else:
            knobs.add_argument(p, name, allow_auto=False)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of both sub-commands."""
    parser = _Parser(prog="privcore", description="Private prediction trade-offs: calibrate, sweep, measure leakage; "
                     "`privcore app` serves the dashboard.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    cal = sub.add_parser("calibrate", help="noise scale of one method (instant, no data)")
    cal.add_argument("--method", required=True, choices=METHOD_NAMES)
    knobs.add_argument(cal, "epsilon", default=None, required=True, type=_number(_epsilon))
    for name in ("delta", "n"):
        knobs.add_argument(cal, name)
    knobs.add_argument(cal, "lam", allow_auto=False)
    _add_problem_args(cal)
    cal.add_argument("--json", action="store_true", help="print one JSON object")

    from .engine.cli_sweep import add_sweep_parser

    add_sweep_parser(sub, _add_problem_args, _number, _epsilon)
    from .leakage.cli import add_leakage_parser

    add_leakage_parser(sub, _add_problem_args, _number, _epsilon)
    from .engine.cli_results import add_results_parser

    add_results_parser(sub)
    from .cli_forward import add_forward_parsers

    add_forward_parsers(sub, _add_problem_args, _number, _epsilon)
    from .deep.cli import add_deep_parser

    add_deep_parser(sub, _number, _epsilon)
    sub.add_parser("app", help="serve the dashboard (Streamlit) at http://localhost:8501",
                   description="Serve the dashboard: the same Streamlit server as `streamlit run app.py` in a "
                   "checkout. Other options go to `streamlit run`, e.g. --server.port 8502.")
    return parser


def _calibrate(args: argparse.Namespace) -> int:
    from .calibration import calibrate
    from .types import PrivacyBudget, Problem

    # None means "not given"; 0 is a value (and is rejected by Problem), never a request for the default.
    problem = Problem(n=args.n, dim=knobs.default("dim") if args.dim is None else args.dim,
                      classes=knobs.default("classes") if args.classes is None else args.classes, lam=args.lam,
                      budget=args.budget,
                      teachers=args.teachers, batch_size=args.batch_size, epochs=args.epochs, clip=args.clip,
                      learning_rate=args.lr)
    scale = calibrate(args.method, PrivacyBudget(args.epsilon, args.delta), problem, args.accounting)
    out = scale.to_dict()
    if args.json:
        print(json.dumps(out))
    else:
        for key in ("method", "epsilon", "delta", "accounting", "noise", "sigma", "beta", "rho", "noise_multiplier",
                    "per_query_epsilon", "per_query_delta", "sensitivity", "formula"):
            if out[key] is not None:
                print(f"{key:>18}: {out[key]}")
        for note in out["notes"]:
            print(f"{'note':>18}: {note}")
    from .methods import get_method

    # what the dashboard warns of at this setting (Private-kNN's k above its subsample at N = 1), on stderr
    setting = {"teachers": problem.teachers, "budget": problem.budget, "epsilon": args.epsilon, "delta": args.delta}
    for warning in get_method(args.method).setting_warnings(setting, problem.n):
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return text if len(text) <= 2000 else text[:1997] + "..."


def _quiet_broken_pipe() -> int:
    """stdout was closed early (``... | head``): stop quietly, without Python's exit-time complaint."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # the shell's code for a process ended by SIGPIPE


_SHOWN: set[str] = set()


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:  # noqa: ANN001
    """A Python warning as one ``warning: ...`` line (no source file, line number or code), each text
    once per run (a damaged calibration memo is read on lookup and again on store: two equal lines)."""
    text = f"warning: {_one_line(message if isinstance(message, Warning) else Warning(message))}"
    if text in _SHOWN:
        return
    _SHOWN.add(text)
    try:
        print(text, file=file or sys.stderr)
    except (OSError, ValueError):
        pass


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code (0 ok, 2 invalid input or a refused request, 130
    interrupted, 141 stdout closed early). Expected failures print one line, never a traceback;
    warnings print as one line each."""
    _SHOWN.clear()  # once per run, not per process
    with warnings.catch_warnings():
        warnings.showwarning = _show_warning
        return _main(argv)


#: A value argparse takes for an option because of its dash: "-inf", "-nan", "-1e5", "-1,2" (it reads only
#: "-1" and "-1.5" as negative numbers), so "--epsilon -inf" said "expected one argument".
_DASHED_VALUE = re.compile(r"-(?:\d|\.\d|(?:inf|infinity|nan)(?:$|,))", re.IGNORECASE)


def _glue_dashed_values(argv: Sequence[str]) -> list[str]:
    """``--flag -value`` as ``--flag=-value``, so the value reaches its own check and its message."""
    out: list[str] = []
    for tok in argv:
        prev = out[-1] if out else ""
        if _DASHED_VALUE.match(tok) and prev.startswith("--") and "=" not in prev and prev != "--":
            out[-1] = f"{prev}={tok}"
        else:
            out.append(tok)
    return out


def _main(argv: Sequence[str] | None) -> int:
    warnings.filterwarnings("ignore", category=UserWarning, module="opacus")
    warnings.filterwarnings("ignore", category=RuntimeWarning, module="opacus")  # log(0) at extreme deltas
    try:
        argv = _glue_dashed_values(sys.argv[1:] if argv is None else argv)
        args, extra = build_parser().parse_known_args(argv)
        if extra and args.command != "app":  # only the dashboard passes options on (to Streamlit)
            raise _UsageError(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "app":
            from .dashboard import serve

            code = serve(extra)
        elif args.command == "calibrate":
            code = _calibrate(args)
        elif args.command == "leakage":
            from .leakage.cli import run_leakage_command

            code = run_leakage_command(args)
        elif args.command == "deep":
            from .deep.cli import run_deep_command

            code = run_deep_command(args)
        elif args.command in ("epsilon", "statement"):
            from . import cli_forward

            code = (cli_forward.run_epsilon_command if args.command == "epsilon" else cli_forward.run_statement_command)(args)
        elif args.command == "results":
            from .engine.cli_results import run_results_command

            code = run_results_command(args)
        else:
            from .engine.cli_sweep import run_sweep_command

            code = run_sweep_command(args)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        return _quiet_broken_pipe()
    except _UsageError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except (ValueError, TypeError) as err:  # validation errors name parameter, range and value
        print(f"error: {_one_line(err)}", file=sys.stderr)
        return 2
    except (ArithmeticError, MemoryError) as err:  # a request beyond float range or memory
        what = "not enough memory" if isinstance(err, MemoryError) else "numerical limit reached"
        print(f"error: {what} for this request ({_one_line(err)}); try smaller values", file=sys.stderr)
        return 2
    except OSError as err:  # the cache or output folder cannot be written, a file vanished
        detail = err.strerror or _one_line(err)
        print(f"error: {detail}" + (f": {os.path.basename(str(err.filename))}" if err.filename else ""),
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # Ctrl-C: every point, method or checkpoint stored before is kept
        print("error: interrupted; finished results are kept in the cache", file=sys.stderr)
        return 130
