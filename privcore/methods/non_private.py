"""The non-private baseline (epsilon = infinity): the regularised minimiser, no noise.

A registry entry like the methods, so runner, charts and tables treat it without special cases:
it is drawn as the dashed reference line and never wins a recommendation (``family = "baseline"``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ..types import CalibrationError, NoiseScale, PrivacyBudget, Problem
from .base import CostPart, Method, nonprivate_part
from .card import MethodCard

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["NonPrivate"]


class NonPrivate(Method):
    name = "non_private"
    card = MethodCard(
        label="Non-private (no noise)",
        short_label="Non-private",
        sentence_label="the non-private model",
        colour="#333333",  # near black, dashed
        marker="line-ew",
        dash="dash",
        summary="The same regularised model trained without any privacy: the accuracy every method is compared with.",
        assumptions="None: it offers no privacy.",
    )
    family = "baseline"
    uses = ("lam",)
    #: A tuned comparison draws the best non-private model over these (picked on the test queries), not the
    #: configured lambda, so that no tuned private method is drawn above a reference left at a poor lambda.
    tuning_grid = {"lam": (1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 0.5)}

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        raise CalibrationError("non_private is the epsilon = inf baseline; it has no finite-epsilon calibration")

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """No noise, no privacy: epsilon = inf."""
        return math.inf

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """A fixed overhead and the non-private solve it perturbs (shared)."""
        return [CostPart("fixed", 1.0), nonprivate_part(problem)]

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        theta = ctx.nonprivate_theta(ctx.problem.lam)
        d, c = theta.shape
        return theta.float().view(1, 1, d, c).expand(len(scales), repeats, d, c)
