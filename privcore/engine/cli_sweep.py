"""The ``sweep`` sub-command: one output row per (method, epsilon[, varied value])."""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Callable

from .. import knobs
from ..csvtext import csv_text
from .. import methods as _methods_module
from ..methods import BASELINE, check_method_name
from .specs import VARY_AXES, DataSpec, SweepSpec

__all__ = ["add_sweep_parser", "run_sweep_command", "format_rows"]

#: The CLI's core columns; every registered method's own result fields stand between the two parts
#: (:func:`cli_columns`).
_CLI_HEAD = ("method", "epsilon", "delta", "budget", "n", "dim", "classes", "lam", "teachers", "accounting",
             "vary", "value", "accuracy_mean", "accuracy_std", "repeats", "seconds", "device", "cached",
             "noise", "sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "solver_grad_norm")
_CLI_TAIL = ("solver_tolerance", "sensitivity", "note")


def cli_columns() -> tuple[str, ...]:
    """The sweep command's output columns: the core ones and the registered methods' result fields."""
    from ..methods.fields import declared_result_fields

    return _CLI_HEAD + tuple(f.name for f in declared_result_fields()) + _CLI_TAIL


def _method_names() -> tuple[str, ...]:
    return _methods_module.METHOD_NAMES  # read when parsing: a method registered since import counts


def _csv_list(kind: Callable[[str], Any], what: str) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        items = [t.strip() for t in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {what}, got {text!r}")
        if not all(items):  # "1,,2" or a trailing comma: a value left out
            raise argparse.ArgumentTypeError(f"must be {what} separated by single commas, got {text!r}")
        try:
            return tuple(kind(t) for t in items)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list of {what}, got {text!r}") from None
    return parse


def _methods(text: str) -> tuple[str, ...]:
    if text.strip() == "all":
        return _method_names()
    names = tuple(t.strip() for t in _top_level_commas(text) if t.strip())
    if "all" in names:  # "all" alone means every method; in a list it is not a method's name
        raise argparse.ArgumentTypeError(f"'all' cannot be combined with method names, got {text!r}: give 'all' "
                                         "alone or a list of names")
    for name in names:
        if "[" in name:  # a parameterised method, private_knn[neighbours=10,sample_rate=0.2]
            try:
                check_method_name(name)
            except ValueError as err:
                raise argparse.ArgumentTypeError(str(err)) from None
        elif name not in _method_names():
            raise argparse.ArgumentTypeError(f"unknown method {name!r}; choose from all, {', '.join(_method_names())}")
    return names


def _top_level_commas(text: str) -> list[str]:
    """``text`` split at the commas outside brackets (a method's parameters keep theirs)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch == "[") - (ch == "]")
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _value(text: str) -> Any:
    if text.lower() in ("inf", "infinity"):
        return math.inf
    try:
        return int(text)
    except ValueError:
        return float(text)


def add_sweep_parser(sub, add_problem_args, number, epsilon) -> None:  # noqa: ANN001
    """Register ``sweep`` on the sub-parser collection ``sub``."""
    sw = sub.add_parser("sweep", help="train and evaluate methods over epsilons (batched, cached)")
    knobs.add_argument(sw, "dataset")
    sw.add_argument("--data-file", default=None, help="CSV (with a 'label' column) or NPZ (x, y) for --dataset file")
    sw.add_argument("--label-column", default=None, help="--dataset file: the CSV column holding the labels "
                    "(default: the first of label, y, target, class)")
    sw.add_argument("--labels", default=None, help="--dataset file: the label set, declared in advance and "
                    "comma-separated (e.g. cat,dog,bird); class k is the k-th; without it the labels are read off the "
                    "file, a step the privacy guarantee does not cover")
    sw.add_argument("--preprocess", default="none", help="--dataset file: a declared, data-independent feature map: "
                    "none, bounds:LOW:HIGH (or LOW:HIGH per feature, comma-separated) or norm:R, optionally "
                    "+intercept (e.g. bounds:-10:10+intercept)")
    sw.add_argument("--methods", type=_methods, default=_method_names(), help="all or a comma-separated list")
    sw.add_argument("--epsilons", type=_csv_list(epsilon, "numbers"), default=knobs.EPSILONS,
                    help="comma-separated (default: the dashboard's curve, %(default)s)")
    knobs.add_argument(sw, "delta")
    knobs.add_argument(sw, "n", default=None, help="default: the whole training split; more augments")
    knobs.add_argument(sw, "lam", help="or 'auto'")
    for name in ("repeats", "seed", "device"):
        knobs.add_argument(sw, name)
    sw.add_argument("--vary", choices=VARY_AXES, default=None, help="also vary this axis over --values")
    sw.add_argument("--values", type=_csv_list(_value, "numbers"), default=(), help="values of --vary")
    sw.add_argument("--format", choices=("json", "csv"), default="csv")
    sw.add_argument("--no-cache", action="store_true", help="compute everything, store nothing")
    sw.add_argument("--secure-noise", action="store_true",
                    help="draw every noise from a fresh seed from the operating system's entropy, never shown or "
                         "stored (use it for a release you may publish: with a known --seed anyone can recompute "
                         "the noise); --seed then fixes only the data splits; nothing is cached")
    sw.add_argument("--tuning", choices=("configured", "held-out", "private"), default="configured",
                    help="configured: every method at the knobs given; held-out: each method at the best of its "
                         "declared knob grid on the test queries (optimistic, not private); private: the grid "
                         "point chosen by a private selection paid for out of each row's epsilon")
    sw.add_argument("--quiet", action="store_true", help="no progress on stderr")
    add_problem_args(sw)
    from ..cli_jobs import add_job_args

    add_job_args(sw)


def format_rows(rows: list[dict[str, Any]], fmt: str, tuned: bool = False) -> str:
    """Rows as CSV (header + one line per row) or a JSON array, with the CLI's columns (and the
    knobs a tuned comparison picked, when ``tuned``)."""
    columns = cli_columns() + (("tuned",) if tuned else ())
    picked = [{k: r.get(k) for k in columns} for r in rows]
    if fmt == "json":
        return json.dumps([{k: ("inf" if isinstance(v, float) and math.isinf(v) else v) for k, v in r.items()}
                           for r in picked], indent=1)
    return csv_text(picked, columns).rstrip("\n")


def run_sweep_command(args: argparse.Namespace) -> int:
    """Build the spec (validation errors propagate as ValueError/TypeError -> exit 2) and run it."""
    # Augmentation only where N is asked for (it can exceed the data only then): without --n the spec
    # is the dashboard's, which augments nothing at its default N (tests/test_defaults.py).
    data = DataSpec(name=args.dataset, data_file=args.data_file, n=args.n, dim=args.dim, classes=args.classes,
                    augment=args.n is not None or args.vary == "n", preprocess=args.preprocess,
                    label_column=args.label_column, labels=args.labels)
    if data.name == "file":  # a bad or hostile file is refused from its headers, before torch is imported
        from ..data.userfile import load_user_file

        load_user_file(data.data_file, data.label_column)
    spec = SweepSpec(data=data, methods=args.methods, epsilons=args.epsilons, delta=args.delta, budget=args.budget,
                     lam=args.lam, teachers=args.teachers, batch_size=args.batch_size, epochs=args.epochs,
                     clip=args.clip, learning_rate=args.lr, accounting=args.accounting, repeats=args.repeats,
                     seed=args.seed, device=args.device, vary=args.vary, values=args.values,
                     secure_noise=args.secure_noise, tuning=args.tuning)

    from ..cli_jobs import line_progress, run_jobs

    (result,) = run_jobs([spec], args, progress=line_progress(args.quiet), use_cache=not args.no_cache)
    for warning in dict.fromkeys(result.warnings):
        print(f"warning: {warning}", file=sys.stderr)
    if not any(r.method != BASELINE.name for r in result.rows):  # every requested method was left out
        print("error: none of the requested methods can run at this setting (the warnings above say why)",
              file=sys.stderr)
        return 2
    if args.tuning == "held-out":
        print("warning: --tuning held-out picks each method's knobs on the test queries: an optimistic upper bound, "
              "not a private result (no guarantee covers the choice)", file=sys.stderr)
    print(format_rows(result.rows, args.format, tuned=args.tuning != "configured"))
    if not args.quiet:
        print(f"{len(result.rows)} rows in {result.seconds:.1f} s on {result.device} "
              f"({result.computed} computed, {result.cached} from cache)", file=sys.stderr)
    return 0
