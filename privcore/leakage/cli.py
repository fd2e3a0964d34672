"""The ``leakage`` sub-command: measured membership leakage per method, one row each.

    python -m privcore leakage --method all --epsilon 1 --delta 1e-5 --attack lira --format csv
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from typing import Any, Callable

from .. import knobs
from ..csvtext import csv_text
from ..data import DATASET_NAMES
from ..knobs import DEVICE_CHOICES
from ..validation import check_int
from ..methods import REGISTRY, get_method
from .spec import ATTACKS, NON_PRIVATE, QUICK_AUDIT_FACTOR, TARGETS, audit_trials_for

__all__ = ["add_leakage_parser", "run_leakage_command", "leakage_rows"]

_BASE_COLUMNS = ("method", "accuracy", "epsilon", "delta", "accounting", "n_train", "eps_lower", "eps_estimate",
                 "eps_upper", "eps_confidence")
_ATTACK_FIELDS = ("auc", "tpr_at_0.1%", "tpr_at_1%", "advantage")


def _targets(text: str) -> tuple[str, ...]:
    if text.strip() == "all":
        return TARGETS
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    for name in names:
        if name not in TARGETS:
            raise argparse.ArgumentTypeError(f"unknown method {name!r}; choose from all, {', '.join(TARGETS)}")
    if not names:
        raise argparse.ArgumentTypeError("name at least one method")
    return names


def add_leakage_parser(sub, add_problem_args: Callable, number: Callable, epsilon: Callable) -> None:  # noqa: ANN001
    """Register ``leakage`` on the CLI's sub-parsers (shares the problem arguments of the others)."""
    p = sub.add_parser("leakage", help="membership-inference attacks and an audited epsilon per method")
    p.add_argument("--method", type=_targets, default=TARGETS,
                   help=f"all (default) or a comma list of {', '.join(TARGETS)}; {NON_PRIVATE} is the reference")
    p.add_argument("--epsilon", required=True, type=number(epsilon))
    p.add_argument("--delta", type=number(float), default=knobs.default("delta"))
    p.add_argument("--dataset", choices=DATASET_NAMES, default=knobs.default("dataset"))
    p.add_argument("--data-file", default=None, help="CSV or NPZ for --dataset file")
    p.add_argument("--n", type=number(int), default=None, help="population size N (releases train on half)")
    p.add_argument("--lam", type=number(float), default=knobs.default("lam"), help="L2 weight lambda, average form")
    add_problem_args(p)
    p.add_argument("--attack", choices=ATTACKS + ("all",), default="all", help="which attack's columns to print")
    p.add_argument("--references", type=number(int), default=16, help="LiRA reference models K (default 16)")
    p.add_argument("--canaries", type=number(int), default=32, help="inserted canaries (default 32)")
    p.add_argument("--audit-trials", type=number(int), default=64,
                   help="releases per audit data set for the methods that retrain the model for every release "
                        f"({', '.join(n for n, m in REGISTRY.items() if m.trains_per_release)}; default 64); the "
                        f"methods that train once and draw fresh noise for every release get {QUICK_AUDIT_FACTOR} times more, up to 1024")
    p.add_argument("--worlds", type=number(int), default=2, help="target worlds (random halves, default 2)")
    p.add_argument("--repeats", type=number(int), default=4, help="releases per world (default 4)")
    p.add_argument("--seed", type=number(int), default=0)
    p.add_argument("--device", choices=DEVICE_CHOICES, default="auto")
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--roc", action="store_true", help="JSON only: include each attack's ROC points")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of reading the result cache")
    from ..cli_jobs import add_job_args

    add_job_args(p)


def leakage_rows(results: list, attack: str = "all") -> list[dict[str, Any]]:
    """Flat rows of results, with only ``attack``'s columns unless ``all``."""
    keep = ATTACKS if attack == "all" else (attack,)
    columns = list(_BASE_COLUMNS) + [f"{a}_{f}" for a in keep for f in _ATTACK_FIELDS] + ["seconds", "cached"]
    return [{c: r.summary().get(c) for c in columns} for r in results]


def run_leakage_command(args: argparse.Namespace) -> int:
    from ..engine.specs import DataSpec
    from .spec import LeakageSpec

    data = DataSpec(name=args.dataset, data_file=args.data_file, n=args.n, dim=args.dim, classes=args.classes,
                    augment=False)
    common = dict(data=data, delta=args.delta, budget=args.budget, lam=args.lam, teachers=args.teachers,
                  batch_size=args.batch_size, epochs=args.epochs, clip=args.clip, learning_rate=args.lr,
                  accounting=args.accounting, seed=args.seed, worlds=args.worlds, repeats=args.repeats,
                  references=args.references, canaries=args.canaries, audit_trials=args.audit_trials,
                  device=args.device)
    if args.roc and args.format != "json":
        raise ValueError("--roc adds ROC points to the JSON output: use --format json, or leave out --roc")
    methods = [m for m in args.method if get_method(m).supports(args.delta)]
    skipped = [m for m in args.method if m not in methods]
    if skipped:
        print(f"note: {', '.join(skipped)} skipped: {'it needs' if len(skipped) == 1 else 'they need'} delta > 0",
              file=sys.stderr)
    if not methods:  # nothing left to measure: an empty table with exit 0 read as "no leakage"
        raise ValueError(f"none of the requested methods has a guarantee at delta = {args.delta:g}: use delta > 0 "
                         "such as 1e-5, or a method with a pure-DP guarantee")
    # the value typed is checked (a quick method's multiplied count passed [4, 100,000] where 1 to 3 did not)
    trials = check_int("audit_trials", common.pop("audit_trials"), low=4, high=100_000)
    specs = [LeakageSpec(method=m, epsilon=1.0 if m == NON_PRIVATE else args.epsilon,
                         audit_trials=audit_trials_for(m, trials), **common) for m in methods]
    from ..cli_jobs import run_jobs

    results = run_jobs(specs, args, use_cache=not args.no_cache)
    rows = leakage_rows(results, args.attack)
    if args.format == "csv":
        sys.stdout.write(csv_text(rows, list(rows[0]) if rows else []))
    else:
        if args.roc:
            for row, r in zip(rows, results):
                row["roc"] = {a.attack: {"fpr": list(a.roc.fpr), "tpr": list(a.roc.tpr)} for a in r.attacks
                              if args.attack in ("all", a.attack)}
        print(json.dumps(rows, default=lambda v: "inf" if isinstance(v, float) and math.isinf(v) else str(v)))
    return 0
