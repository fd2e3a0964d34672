"""The dashboard's start-up warm-up: pay the first visit's costs before anyone asks.

Run once per server process in a background thread (see ``app.py``). It imports DP-SGD's
accountant and loads the default data (:func:`privcore.engine.warmup.warm_up`), then computes
what the Explore page shows first with every control at its default, into the disk cache. A
visitor who arrives while that is under way waits for the same computation instead of repeating
it (:func:`privcore.engine.runner.run_sweep` runs identical specs once per process): the specs
and their order are the page's own (:func:`ui.setting.explore_plan`), so none is computed twice.
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["warm_default_view"]

_LOG = logging.getLogger(__name__)


def warm_default_view(values: dict[str, Any] | None = None) -> int:
    """Compute the Explore page's first specs for ``values`` (default: every control's default).

    Returns the number of points computed (0 when all were cached). Never raises: a failure is
    logged, and the page then computes on demand as usual.
    """
    try:
        from privcore.engine.runner import run_sweep
        from privcore.engine.warmup import warm_up

        from . import state
        from .setting import build_data_info, explore_plan

        chosen = {**state.DEFAULTS, **(values or {})}
        dataset = chosen["dataset"]
        warm_up(dataset, chosen["accounting"], wait=False)  # the accountant imports beside the first methods
        info = build_data_info(dataset)
        return sum(run_sweep(spec).computed for spec in explore_plan(info, values))
    except Exception:  # noqa: BLE001 - a warm-up must never take the app down
        _LOG.exception("start-up warm-up failed; results will be computed on demand")
        return 0
