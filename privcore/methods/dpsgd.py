"""DP-SGD (Abadi et al. 2016; paper Section 3) for the linear softmax model, all runs batched.

Each step samples every example independently with probability q = batch_size / N (Poisson
sampling, as the accountant assumes), clips each example's gradient of its own loss to norm nu,
sums, adds N(0, (sigma nu)^2) noise and divides by the expected batch size q N. No L2 term (the
paper's choice). For the linear model the per-example gradient is x_n (p_n - y_n)^T, so its norm
is ||x_n|| ||p_n - y_n||: clipping needs no per-example gradient tensors. (The paper's code divides
by the clip factor instead of multiplying by it; we clip.)

sigma (the noise multiplier), :func:`privcore.accounting.dpsgd_noise_multiplier`: ``paper`` as
published (Opacus RDP, add/remove neighbours: too little noise under this project's replace-one
convention, and the note says by how much); ``corrected`` replace-one, dp_accounting PLD (moderate
grid); ``tight`` replace-one, dp_accounting PLD (finer grid).
Runs of the same repetition share their batches and unit noise across epsilons. Each repetition's
batches and noise for a chunk of steps are drawn at once from its own generator (the chunk size
depends on the problem's shape only), so a run does not depend on what else is in its batch.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Mapping

from .. import limits
from ..accounting.dpsgd import dpsgd_epsilon_replace_one, dpsgd_noise_multiplier
from ..types import CalibrationError, NoiseScale, PrivacyBudget, Problem
from ..validation import epsilon_up
from ..validation import format_value as _fmt
from .base import CostPart, Method, WinContext, data_work
from .card import MethodCard
from .forward import NoiseInput, noise_value

if TYPE_CHECKING:  # pragma: no cover - torch is imported where used (start-up stays light)
    import torch

    from ..context import TrainContext

__all__ = ["DPSGD", "per_example_grad_norms", "noise_std_float32"]


def per_example_grad_norms(x: torch.Tensor, probs: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """||d loss_n / d theta||_F = ||x_n||_2 ||p_n - y_n||_2 for the linear softmax model.

    x [..., b, D], probs [..., b, E, C] (E models), y [..., b] -> [..., b, E].
    """
    import torch
    resid = probs.clone()
    resid.scatter_add_(-1, y.unsqueeze(-1).unsqueeze(-1).expand(*y.shape, probs.shape[-2], 1),
                       torch.full((*y.shape, probs.shape[-2], 1), -1.0, dtype=probs.dtype, device=probs.device))
    return x.norm(dim=-1).unsqueeze(-1) * resid.norm(dim=-1)


#: Examples per float32 partial sum of the clipped gradients (privcore.roundoff). Each partial sum writes a whole
#: gradient per model, so small chunks cost time (at Explore's defaults 32 took 3.5x a plain product, 128 1.8x;
#: docs/benchmarks.md); the step clip it needs, C / (1 + eta b), is 0.2 % below C at the default batch of 256.
SUM_CHUNK = 128
#: Above this expected batch the chunk is privcore.roundoff.SUM_CHUNK (32): eta b grows with b, and 128 would cost
#: 3 % of the clip at 4,096 (32: 0.8 %).
LARGE_BATCH = 1024


def sum_chunk(batch_size: int) -> int:
    """The partial-sum size for an expected (public) batch size: never a function of a drawn batch, so a
    repetition's arithmetic does not depend on the others'."""
    from ..roundoff import SUM_CHUNK as SMALL
    return SUM_CHUNK if batch_size <= LARGE_BATCH else SMALL
#: Seconds the replace-one accountant's import (dp_accounting's PLD) takes once per process (bench/bench_startup.py).
ACCOUNTANT_IMPORT_S = 1.4
#: Share of a repetition each further epsilon of a run adds (its own noise and update on shared batches;
#: measured by bench/bench_dpsgd_cost.py).
EPSILON_SHARE = 0.16

class DPSGD(Method):
    name = "dpsgd"
    card = MethodCard(
        label="DP-SGD",
        short_label="DP-SGD",
        sentence_label="DP-SGD",
        colour="#009E73",  # bluish green
        marker="x",
        dash="longdash",
        summary="Clip every example's gradient, add Gaussian noise at each step of SGD.",
        wins_when="δ > 0 and many predictions; works for any differentiable model.",
        assumptions="δ > 0; Poisson-sampled batches; per-example clipping to ν.",
    )
    from_paper = True
    uses = ("batch_size", "epochs", "clip", "learning_rate")
    #: Clip norm and step size around the defaults (0.5, 10).
    tuning_grid = {"clip": (0.5, 2.0), "learning_rate": (3.0, 10.0)}
    family = "training"
    trains_per_release = True
    supports_pure = False
    noise_inputs = (NoiseInput("noise_multiplier", "noise multiplier z", "the noise multiplier (noise std / clip)",
                               kind="gaussian"),)
    accountant = ("", "Poisson-subsampled Gaussian, dp_accounting PLD (pessimistic)")

    def pure_unsupported_message(self) -> str:
        from . import REGISTRY  # the alternatives, as the registry lists them

        pure = ", ".join(name for name, m in REGISTRY.items() if m.supports(0.0))
        return ("DP-SGD needs δ > 0 (delta > 0: Gaussian noise has no pure-DP guarantee): use delta > 0 such as 1e-5, "
                f"or a delta = 0 method ({pure})")

    def win_reason(self, s: WinContext) -> str:
        core = "δ > 0 lets DP-SGD's Gaussian noise and amplification by subsampling win"
        if s.many:
            core += f", and as a private-training method it pays nothing for B = {_fmt(s.budget)} predictions"
        return core

    def min_train_size(self, setting: Mapping[str, Any]) -> int:
        return int(setting.get("batch_size", 1))  # the expected batch cannot exceed N

    def unavailable(self, setting: Mapping[str, Any], n: int | None) -> str | None:
        if n is not None and int(setting.get("batch_size", 1)) > n:
            return f"DP-SGD batch size {int(setting['batch_size']):,} is larger than N = {n:,}: lower the batch size"
        return super().unavailable(setting, n)

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        if problem.batch_size > problem.n:
            raise CalibrationError(f"dpsgd batch_size must be at most N = {problem.n:,}, got {problem.batch_size:,}: "
                                   "lower the batch size")
        eps, dlt, q, k = budget.epsilon, budget.delta, problem.sample_rate, problem.steps
        limits.check_compositions("DP-SGD's composition (ceil(epochs x N / batch))", k,
                                  "use fewer epochs, a larger batch or a smaller N")
        where = (f"q = {q:.4g}, steps = {k}; noise std = multiplier * clip; each step clips to "
                 "clip / (1 + eta b) so that float rounding keeps the sum's sensitivity (privcore.roundoff)")
        if accounting == "paper":
            z = dpsgd_noise_multiplier(eps, dlt, q, k, "rdp", relation="add_remove")
            real = dpsgd_epsilon_replace_one(z, q, k, dlt)
            notes: tuple[str, ...] = (
                "paper: calibrated as published for ADD/REMOVE neighbours (Opacus RDP); under this project's "
                f"replace-one neighbours its real epsilon is larger: replace-one epsilon of this noise: {epsilon_up(real):g} "
                f"(target {eps:g}; dp_accounting PLD, an upper bound)",)
            formula = f"noise multiplier from Opacus RDP accountant, add/remove neighbours (as published): {where}"
        else:
            grid = "fine" if accounting == "tight" else "moderate"
            z = dpsgd_noise_multiplier(eps, dlt, q, k, "pld", relation="replace_one", grid=grid)
            notes = (f"{accounting}: replace-one, dp_accounting PLD ({grid} grid, pessimistic: epsilon <= {eps:g} "
                     "re-checked for the returned multiplier)",)
            formula = f"noise multiplier: replace-one, dp_accounting PLD ({grid} grid): {where}"
        # The clipped sum moves by clip (add/remove, as published) or 2 clip (replace-one) per example.
        sens = problem.clip if accounting == "paper" else 2.0 * problem.clip
        return NoiseScale(self.name, eps, dlt, accounting, "gaussian", sigma=z * problem.clip,
                          noise_multiplier=z, sensitivity=sens, notes=notes, formula=formula)

    def spent_epsilon(self, noise, problem: Problem, delta: float, accounting: str) -> float:  # noqa: ANN001
        """The replace-one PLD epsilon of the noise multiplier at this sampling rate and number of steps
        (dp_accounting, pessimistic), whatever the mode."""
        if problem.sample_rate > 1.0:
            raise ValueError(f"dpsgd batch_size must be at most N = {problem.n:,}, got {problem.batch_size:,}")
        return dpsgd_epsilon_replace_one(noise_value(noise, "noise_multiplier"), problem.sample_rate, problem.steps,
                                         delta)

    def calibration_stored(self, epsilons, delta: float, problem, accounting: str) -> bool:  # noqa: ANN001
        """True when the replace-one PLD multiplier of every epsilon is in the accountant's memo or the
        shipped table (privcore/accounting/memo.py): the run then imports no dp_accounting and searches
        nothing (Explore's defaults: the estimate was 2x the 1.2 s DP-SGD took)."""
        if accounting == "paper" or not delta > 0.0 or problem.batch_size > problem.n:
            return False
        from ..accounting import memo

        grid = "fine" if accounting == "tight" else "moderate"
        q, k = problem.sample_rate, problem.steps
        return all(memo.lookup("dpsgd_noise_multiplier", (float(e), float(delta), q, k, "replace_one", 1e-3, grid))
                   is not None for e in epsilons)

    def cost_parts(self, problem, points: int, repeats: int) -> list[CostPart]:  # noqa: ANN001 - Problem
        """Every repetition trains for epochs x N examples, at a per-example cost that grows with the
        step's working set (batch x repetitions rows), plus a per-step overhead; the epsilons of a
        repetition share its batches and noise draws, and each further epsilon adds a share
        :data:`EPSILON_SHARE` of a repetition. The three constants (``sgd``, ``sgd_batch``,
        ``sgd_steps``) are measured alone, not fitted with the other methods: bench/bench_dpsgd_cost.py
        (mnist-5k, 20 repetitions, epochs 5 / 20 / 50, batch 64 / 256 / 1024, 1 and 5 epsilons). The
        step's working set makes batch 256 faster than both 64 and 1024."""
        per_rep = repeats * (1.0 + EPSILON_SHARE * (points - 1))
        examples = problem.epochs * data_work(problem) * per_rep / 100
        parts = [CostPart("fixed", 1.0), CostPart("sgd", examples),
                 CostPart("sgd_batch", examples * min(problem.batch_size, problem.n) / 256),
                 CostPart("sgd_steps", problem.steps * per_rep / 1580),
                 CostPart("calibrate", float(points))]  # one PLD calibration per epsilon
        if "dp_accounting.pld" not in sys.modules:  # the accountant's import, once per process (about 1.4 s)
            parts.append(CostPart("import", ACCOUNTANT_IMPORT_S, ("import", "dpsgd_accountant")))
        return parts

    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: torch.Tensor | None = None) -> torch.Tensor:
        import torch

        from ..precision import clip_factors, exact_fp32
        from ..roundoff import step_clip
        pb = ctx.problem
        n, d = ctx.x_train.shape
        c, e_count = ctx.classes, len(scales)
        q, clip, lr = pb.sample_rate, pb.clip, pb.learning_rate
        part_size = sum_chunk(pb.batch_size)  # examples per float32 partial sum
        # theta is kept transposed, [R, E C, D]: both products per step then run as bmm with the
        # long D axis contiguous in both operands (faster on a CPU than [R, D, E C]: bench/bench_method_times.py
        # times it; same arithmetic up to the order of the sums).
        theta = torch.zeros(repeats, e_count * c, d, device=ctx.device)
        sum64 = torch.zeros(repeats, e_count * c, d, dtype=torch.float64, device=ctx.device)  # the clipped sums
        part32 = torch.empty(repeats, e_count * c, d, device=ctx.device)  # one partial sum of SUM_CHUNK examples
        noise_scale = noise_std_float32(scales, clip, ctx.device).view(1, e_count, 1, 1)
        step_scale = -lr / (q * n)
        gens = [ctx.generator(self.name, "run", r) for r in range(repeats)]
        # Row n (an extra zero row) pads every repetition's batch to the same size: zero input,
        # zero gradient. Row norms are computed once.
        x_ext = torch.cat([ctx.x_train, torch.zeros(1, d, device=ctx.device)])
        y_ext = torch.cat([ctx.y_train, torch.zeros(1, dtype=torch.int64, device=ctx.device)])
        xnorm_ext = x_ext.to(torch.float64).norm(dim=1)  # float64 norms: see privcore.roundoff
        minus_one = torch.full((1, 1, 1, 1), -1.0, device=ctx.device)
        done = 0
        # The clipped sums in full float32, no TF32 even if the user turned it on (privcore/precision.py);
        # entered once for the whole training, not per step.
        with exact_fp32(ctx.device):
            for chunk in _chunks(pb.steps, n, d * c):
                idx_chunk, sizes, counts, unit_chunk = _draw_chunk(gens, chunk, n, q, d, c, ctx.device)
                unit_t = unit_chunk.transpose(2, 3).contiguous()  # [R, chunk, C, D]: the draws of [R, chunk, D, C]
                # Each repetition clips to its own step clip C / (1 + eta(b) b), b its batch size (a draw of the
                # sampling), so that the computed sum moves by at most 2 clip (privcore.roundoff); [chunk, R, 1, 1],
                # read back once per chunk of steps, not per step.
                inner_chunk = torch.tensor([[step_clip(clip, int(b), chunk=part_size) for b in row]
                                            for row in counts.t().tolist()],
                                           dtype=torch.float64, device=ctx.device).view(chunk, repeats, 1, 1)
                for s in range(chunk):
                    ctx.checkpoint(done / pb.steps)
                    done += 1
                    idx = idx_chunk[:, s, : sizes[s]]  # [R, b]: selected rows, then padding with row n
                    size = idx.shape[1]
                    flat = idx.flatten()  # index_select is 2-3x faster than advanced indexing on CPU
                    xb = torch.index_select(x_ext, 0, flat).view(repeats, size, d)  # [R, b, D]
                    yb = torch.index_select(y_ext, 0, flat).view(repeats, size)
                    probs = torch.softmax(torch.bmm(xb, theta.transpose(1, 2)).view(repeats, size, e_count, c), dim=3)
                    probs.scatter_add_(3, yb.view(repeats, size, 1, 1).expand(repeats, size, e_count, 1),
                                       minus_one.expand(repeats, size, e_count, 1))
                    resid = probs  # p - y, in place
                    # Per-example gradient norms [R, b, E] in float64: ||x_n|| ||p_n - y_n||.
                    norms = (torch.index_select(xnorm_ext, 0, flat).view(repeats, size, 1)
                             * resid.to(torch.float64).norm(dim=3))
                    factor = clip_factors(norms, inner_chunk[s], torch.float32, d * c)
                    clipped = (resid * factor.unsqueeze(3)).view(repeats, size, e_count * c)
                    grad_sum = _clipped_sum(clipped, xb, part_size, sum64, part32)  # [R, E C, D] float64
                    noise = unit_t[:, s].unsqueeze(1) * noise_scale  # [R, E, C, D]
                    # The noise added to the computed sum, then every rounding is post-processing.
                    theta.add_(grad_sum.add_(noise.view(repeats, e_count * c, d)), alpha=step_scale)
        return theta.view(repeats, e_count, c, d).permute(1, 0, 3, 2).contiguous()  # [E, R, D, C]


def noise_std_float32(scales: list[NoiseScale], clip: float, device) -> torch.Tensor:  # noqa: ANN001
    """Each scale's noise std z * clip [E] as float32, rounded *up* (never below the calibrated value).

    The steps run in float32; rounding z (the smallest multiplier the accountant accepted) to the
    nearest float32 could lower it by up to 2^-24 relative, past the target. 0 where there is no noise.
    """
    import torch

    std64 = torch.tensor([0.0 if s.noise == "none" else float(s.noise_multiplier) * float(clip) for s in scales],
                         dtype=torch.float64)
    std32 = std64.float()
    std32 = torch.where(std32.double() < std64, torch.nextafter(std32, torch.tensor(float("inf"))), std32)
    return std32.to(device)


def _chunks(steps: int, n: int, params: int, per_run: int = 1 << 18) -> list[int]:
    """Step counts whose randomness is drawn at once: about ``per_run`` numbers per repetition.

    Depends only on the problem's shape, never on how many repetitions or epsilons share the
    batch, so repetition r consumes its generator identically whatever else is evaluated.
    """
    size = max(1, min(steps, per_run // max(n, params)))
    return [size] * (steps // size) + ([steps % size] if steps % size else [])


def _clipped_sum(clipped: torch.Tensor, xb: torch.Tensor, chunk: int, out: torch.Tensor,
                 buf: torch.Tensor) -> torch.Tensor:
    """sum_i clipped_i^T x_i into ``out`` [R, E C, D] (float64) for clipped [R, b, E C] and xb [R, b, D]:
    float32 partial sums of ``chunk`` examples (into ``buf`` [R, E C, D], float32), each added to ``out``
    (the rounding bound of :func:`privcore.roundoff.sum_error`; padding rows are zero and add nothing).
    ``out`` and ``buf`` are allocated once per training: a step allocates nothing this size."""
    import torch

    out.zero_()
    for lo in range(0, clipped.shape[1], chunk):
        torch.bmm(clipped[:, lo:lo + chunk].transpose(1, 2), xb[:, lo:lo + chunk], out=buf)
        out.add_(buf)
    return out


def _draw_chunk(gens: list[torch.Generator], chunk: int, n: int, q: float, d: int, c: int,
                device: torch.device) -> tuple[torch.Tensor, list[int], torch.Tensor, torch.Tensor]:
    """Batches and unit noise of ``chunk`` steps for every repetition, each from its own generator.

    Poisson sampling: example i joins the batch of step s with probability q, independently.
    Returns idx [R, chunk, b] (selected rows in order, padded with row n to the largest batch of
    the chunk), the largest batch of each step (step s needs only idx[:, s, :sizes[s]]), each
    repetition's batch size [R, chunk] and unit Gaussian noise [R, chunk, D, C].
    """
    import torch

    from .. import tails  # torch at import: not for a calibration
    masks, units = [], []
    for g in gens:
        masks.append(tails.bernoulli((chunk, n), q, g))  # rate at most q (float32 uniforms overshot it)
        units.append(tails.gaussian_noise(chunk * d * c, g).view(chunk, d, c))  # tails not cut off
    mask = torch.stack(masks)  # [R, chunk, N]
    counts = mask.sum(dim=2)  # [R, chunk]
    size = max(1, int(counts.max()))
    where = mask.nonzero()  # (r, s, i), row-major: the selected rows of each (r, s) in order
    starts = (torch.cumsum(counts.flatten(), 0) - counts.flatten()).repeat_interleave(counts.flatten())
    slot = torch.arange(where.shape[0], device=device) - starts
    idx = torch.full((len(gens), chunk, size), n, dtype=torch.int64, device=device)
    idx[where[:, 0], where[:, 1], slot] = where[:, 2]
    return idx, [max(1, int(v)) for v in counts.max(dim=0).values.tolist()], counts, torch.stack(units)
