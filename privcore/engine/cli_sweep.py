"""The ``sweep`` sub-command (filled in with the engine)."""

from __future__ import annotations


def add_sweep_parser(sub, add_problem_args, number, epsilon) -> None:  # noqa: ANN001
    """Register ``sweep`` on the sub-parser collection."""


def run_sweep_command(args) -> int:  # noqa: ANN001
    raise ValueError("sweep is not available yet")
