"""What the ``sweep``, ``leakage`` and ``deep`` commands share: where to compute, progress on stderr, the run.

Each command parses its own knobs into specs of its job kind (:mod:`privcore.engine.jobkinds`) and hands
them to :func:`run_jobs`: the same ``--executor/--scheduler/--workers`` options (:func:`add_job_args`),
the same progress lines (:func:`line_progress`), the executor closed however the run ends, and data
that cannot be fetched reported like bad input (exit 2). Ctrl-C is the CLI's own (``privcore.cli``:
exit 130, finished results kept).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, Callable, Sequence

from .jobs import ProgressFn

__all__ = ["add_job_args", "line_progress", "run_jobs"]


def add_job_args(parser: argparse.ArgumentParser) -> None:
    """The options every job command has: where to compute (``--executor``, ``--scheduler``, ``--workers``)."""
    from .engine.executor import add_executor_args

    add_executor_args(parser)


def line_progress(quiet: bool = False, prefix: Callable[[], str] = lambda: "") -> ProgressFn | None:
    """A progress callback printing ``[ 12.5%] message`` lines on stderr: a line for a new stage, or when
    the work advanced by at least 1 % (progress also arrives from inside long batches). None when quiet."""
    if quiet:
        return None
    last: list = [None, -1.0]  # message and fraction of the last printed line

    def progress(frac: float, message: str) -> None:
        text = prefix() + message
        if text == last[0] and frac < last[1] + 0.01:
            return
        last[0], last[1] = text, frac
        print(f"[{frac * 100:5.1f}%] {text}", file=sys.stderr, flush=True)

    return progress


def run_jobs(specs: Sequence[Any], args: argparse.Namespace, *, progress: ProgressFn | None = None,
             unavailable_as_value_error: bool = True, **kw: Any) -> list[Any]:
    """Run every spec by its kind, in order, on the executor the options name (closed at the end);
    ``kw`` goes to each kind's runner (``use_cache``, ``batched_teachers``...). Data that cannot be
    fetched is a ValueError in one line (exit 2), unless ``unavailable_as_value_error`` is False."""
    from .data import DataUnavailableError
    from .engine.executor import executor_from_args
    from .engine.jobkinds import run_job

    from .threads import use_threads

    executor = executor_from_args(args)
    try:
        use_threads()  # the cores others leave free (privcore.threads)
        given = {k: v for k, v in dict(progress=progress, executor=executor, **kw).items() if v is not None}
        return [run_job(spec, **given) for spec in specs]
    except DataUnavailableError as err:  # a RuntimeError (full MNIST offline): one line, like bad input
        if not unavailable_as_value_error:
            raise
        raise ValueError(" ".join(str(err).split())) from None
    finally:
        if executor is not None:
            executor.close()
