"""The ``deep`` sub-command: Figure 7 of the paper (DP-SGD against the teacher-vote methods on a
deep model), one row per (method, epsilon, B).

    python -m privcore deep --dataset fashion-mnist --model small-cnn --epsilons 1,5 --budget 1,10
    python -m privcore deep --preset paper --figure7 docs/figures     # on a GPU: writes two CSVs
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Callable

from ..csvtext import csv_text
from .data import DEEP_DATASETS
from .spec import MODEL_NAMES, PRESETS, DeepRow, DeepSpec, figure7_specs

__all__ = ["add_deep_parser", "run_deep_command", "write_rows"]

_OVERRIDES = ("model", "n_train", "n_test", "epochs", "batch_size", "lr", "clip", "teachers", "teacher_epochs",
              "teacher_batch", "teacher_lr", "repeats", "seed", "device", "delta", "accounting", "physical_batch")


def _list(kind: Callable[[str], Any], what: str) -> Callable[[str], tuple]:
    def parse(text: str) -> tuple:
        items = [t.strip() for t in text.split(",")]
        if not any(items):
            raise argparse.ArgumentTypeError(f"name at least one {what}")
        if not all(items):  # "1,,2" or a trailing comma: a value left out
            raise argparse.ArgumentTypeError(f"must be {what} separated by single commas, got {text!r}")
        return tuple(kind(t) for t in items)
    return parse


_ALL = "all"  # "--n-train all": the whole data set (None in the spec; None here means "not given")


def _size(text: str) -> int | str:
    """A number of images (its range is DeepSpec's to check) or 'all' (never a negative stand-in for it)."""
    if text.strip().lower() == _ALL:
        return _ALL
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number or 'all', got {text!r}") from None


def add_deep_parser(sub, number: Callable, epsilon: Callable) -> None:  # noqa: ANN001
    """Register ``deep`` on the CLI's sub-parsers."""
    from .votes import deep_methods

    def method(text: str) -> str:
        if text not in deep_methods():
            raise argparse.ArgumentTypeError(f"unknown method {text!r}; choose from {', '.join(deep_methods())}")
        return text

    p = sub.add_parser("deep", help="deep models (Figure 7): DP-SGD against subsample-and-aggregate and PATE-style votes")
    p.add_argument("--dataset", choices=DEEP_DATASETS, default="fashion-mnist")
    p.add_argument("--preset", choices=tuple(PRESETS), default="cpu-small",
                   help="training settings: cpu-small (small CNN, 5,000 images, about a minute on a CPU) or paper "
                        "(ResNet-20, all images, 100/500 epochs: a GPU job); the flags below override them")
    p.add_argument("--model", choices=MODEL_NAMES, default=None)
    p.add_argument("--methods", type=_list(method, "method"), default=None,
                   help=f"comma list of {', '.join(deep_methods())} (default: all)")
    finite = number(float)

    def deep_epsilon(text: str) -> float:
        # epsilon's own parser offers 'inf' for sweep's baseline, which DeepSpec then refused
        if text.strip().lower().lstrip("+") in ("inf", "infinity"):
            raise argparse.ArgumentTypeError(f"must be a finite number > 0 (the non-private reference is run and "
                                             f"written with every deep run), got {text.strip()[:40]!r}")
        return finite(text)

    p.add_argument("--epsilons", type=_list(deep_epsilon, "epsilon"), default=None,
                   help="comma list of epsilons (default: Figure 7a's)")
    p.add_argument("--budget", type=_list(number(int), "budget"), default=None,
                   help="comma list of inference budgets B (default 10)")
    p.add_argument("--delta", type=number(float), default=None, help="default 1e-5")
    p.add_argument("--accounting", choices=("paper", "corrected", "tight"), default=None, help="default corrected")
    for flag, kind, hlp in (("--n-train", _size, "training images (a number or 'all')"),
                            ("--n-test", _size, "test images (a number or 'all')"),
                            ("--epochs", number(int), "DP-SGD epochs"), ("--batch-size", number(int), "DP-SGD expected batch"),
                            ("--lr", number(float), "DP-SGD learning rate"), ("--clip", number(float), "DP-SGD clip norm"),
                            ("--teachers", number(int), "teachers T"), ("--teacher-epochs", number(int), "teacher epochs"),
                            ("--teacher-batch", number(int), "teacher batch size"),
                            ("--teacher-lr", number(float), "teacher learning rate"),
                            ("--repeats", number(int), "vote samplings per point (default 4)"),
                            ("--seed", number(int), "seed (default 0)"),
                            ("--physical-batch", number(int), "most examples per clipping call (default 1,024; a larger Poisson batch is split)")):
        p.add_argument(flag, type=kind, default=None, help=hlp)
    p.add_argument("--device", choices=("auto", "cpu", "cuda"), default=None)
    p.add_argument("--teacher-mode", choices=("auto", "batched", "loop"), default="auto",
                   help="train the teachers vmapped (batched) or one by one (loop); auto: batched on a GPU")
    p.add_argument("--figure7", metavar="DIR", default=None,
                   help="compute both panels of Figure 7 and write fig7a/fig7b CSVs into DIR")
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("--no-cache", action="store_true", help="recompute instead of reading the result cache")
    p.add_argument("--secure-noise", action="store_true",
                   help="release mode: DP-SGD's sampling and noise and the votes' noise come from fresh operating-system "
                        "entropy, never shown or stored; those rows are not cached and cannot be reproduced")
    from ..cli_jobs import add_job_args

    add_job_args(p)


def write_rows(rows: list[DeepRow], fmt: str = "csv") -> str:
    if fmt == "json":
        # the reference's epsilon = inf as "inf", as sweep writes it (json.dumps would write Infinity, not JSON)
        return json.dumps([{k: "inf" if isinstance(v, float) and math.isinf(v) else v for k, v in r.to_dict().items()}
                           for r in rows]) + "\n"
    return csv_text([r.to_dict() for r in rows], list(DeepRow.columns()))


def _progress(fraction: float, message: str) -> None:
    print(f"\r{fraction:6.1%}  {message[:60]:<60}", end="", file=sys.stderr, flush=True)


def _output_folder(text: str, names: tuple[str, ...] = ()) -> Path:
    """``--figure7``'s folder, checked (not created: a refused run leaves nothing behind) before minutes
    of training; ValueError naming it otherwise. The folder, or its parent (it is created when the results
    are written, one level: ``/nonexistent/x/y`` made three folders), must exist and be writable; an empty
    path (which wrote into the current folder) is refused. A file of ``names`` already there is replaced only
    when it is a Figure 7 CSV of privcore's (its header row): other files are kept and the run refused."""
    if not str(text).strip():
        raise ValueError("--figure7 must name a folder, got ''")
    out = Path(text)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--figure7 must be a folder, got the file {out.name!r}")
    probe = out if out.exists() else out.parent
    if not probe.exists():
        raise ValueError(f"--figure7 folder {out.name!r}: its parent folder does not exist (create it first)")
    if not probe.is_dir():
        raise ValueError(f"--figure7 folder {out.name!r} cannot be created ({probe.name!r} is not a folder)")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "is not writable" if probe == out else f"cannot be created ({probe.name or str(probe)!r} is not writable)"
        raise ValueError(f"--figure7 folder {out.name!r} {what}")
    header = ",".join(DeepRow.columns())
    for name in names:
        existing = out / name
        if existing.exists():
            try:
                with existing.open(encoding="utf-8") as fh:
                    first = fh.readline().rstrip("\r\n")
            except (OSError, UnicodeDecodeError):
                first = ""
            if first != header:
                raise ValueError(f"--figure7 folder {out.name!r} holds a {name!r} that is not a privcore Figure 7 "
                                 "file: it is kept; move it or choose another folder")
    return out


def _figure7_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The two CSV names ``--figure7`` writes (as the run below names them)."""
    model = args.model or PRESETS[args.preset]["model"]
    return tuple(f"fig7{panel}_{args.dataset}_{model}.csv" for panel in ("a", "b"))


def run_deep_command(args: argparse.Namespace) -> int:
    from ..data.errors import DataFileError, DataUnavailableError
    from .run import TrainingCancelled

    given = {k: getattr(args, k) for k in _OVERRIDES if getattr(args, k) is not None}
    given = {k: (None if k in ("n_train", "n_test") and v == _ALL else v) for k, v in given.items()}
    extra: dict[str, Any] = {"dataset": args.dataset, **given}
    if args.methods is not None:
        extra["methods"] = args.methods
    if args.secure_noise:
        extra["secure_noise"] = True
    batched = {"auto": None, "batched": True, "loop": False}[args.teacher_mode]
    quiet = not sys.stderr.isatty()
    if args.figure7 is not None:
        if args.format != "csv":
            raise ValueError("--figure7 writes CSV files: leave out --format json")
        if args.epsilons is not None or args.budget is not None:
            raise ValueError("--figure7 uses Figure 7's epsilons and budgets: leave out --epsilons and --budget")
        _output_folder(args.figure7, _figure7_names(args))  # before minutes of training, not after
    try:
        if args.figure7 is not None:
            specs = figure7_specs(args.preset, **extra)
        else:
            base = DeepSpec(**{**PRESETS[args.preset], **extra})
            specs = (replace(base, epsilons=args.epsilons or base.epsilons, budgets=args.budget or base.budgets),)
        from ..cli_jobs import run_jobs

        results = run_jobs(specs, args, progress=None if quiet else _progress, use_cache=not args.no_cache,
                           batched_teachers=batched, unavailable_as_value_error=False)
        if not quiet:
            print(file=sys.stderr)
        for res in results:
            print(f"{len(res.rows)} rows ({res.computed} computed, {res.cached} cached) in "
                  f"{res.seconds:.1f} s on {res.device}", file=sys.stderr)
    except (DataUnavailableError, DataFileError, TrainingCancelled, RuntimeError) as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    if args.figure7 is not None:
        from ..atomic import atomic_write

        out = _output_folder(args.figure7, _figure7_names(args))  # again: the folder may have changed meanwhile
        out.mkdir(exist_ok=True)
        for panel, res in zip(("a", "b"), results):
            name = out / f"fig7{panel}_{specs[0].dataset}_{specs[0].model}.csv"
            text = write_rows(res.rows, "csv").encode("utf-8")
            atomic_write(name, lambda fh, data=text: fh.write(data), suffix=".tmp", shared=True)  # an interrupted write keeps the old file
            print(f"wrote {name} ({res.seconds:.1f} s)", file=sys.stderr)
        return 0
    sys.stdout.write(write_rows(results[0].rows, args.format))
    return 0
