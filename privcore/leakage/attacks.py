"""Membership scores (higher = "member") from what an attacker observes.

Every release is first turned into logit-like outputs per target row [R, M, C]: the model's logits
(private training), the mean of the B noisy logit vectors the attacker obtained for that row
(prediction sensitivity), or the log of the smoothed frequencies of the B labels it obtained
(subsample-and-aggregate).

* :func:`loss_scores`: minus the cross-entropy of the true label (Yeom et al. 2018: members have
  lower loss; every threshold is swept).
* :func:`lira_offline_scores`: offline LiRA (Carlini et al. 2022). The logit-scaled confidence
  phi = log p_y - log(1 - p_y) is compared with a Gaussian fitted to phi on the reference models
  that did *not* train on the row: score = (phi - mu_out) / sigma_out. With fewer than 64
  references the variance is pooled over rows ("fixed variance"), as Carlini et al. advise.
"""

from __future__ import annotations

import torch

__all__ = ["confidence", "loss_scores", "lira_offline_scores", "OutStats", "out_stats"]


def _picked(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    lg = logits.double()
    yy = y.view(*([1] * (lg.dim() - 2)), -1, 1).expand(*lg.shape[:-1], 1)
    true = lg.gather(-1, yy).squeeze(-1)
    others = lg.scatter(-1, yy, float("-inf"))
    return true, others


def confidence(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """phi = log p_y - log(1 - p_y) = z_y - logsumexp_{c != y} z_c, stably. logits [..., M, C], y [M]."""
    true, others = _picked(logits, y)
    return true - torch.logsumexp(others, dim=-1)


def loss_scores(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Minus the cross-entropy of label y: -(logsumexp z - z_y). [..., M]."""
    true, _ = _picked(logits, y)
    return true - torch.logsumexp(logits.double(), dim=-1)


class OutStats:
    """Per-row mean [M] and std [M] of phi over the reference models that did not train on the row."""

    def __init__(self, mean: torch.Tensor, std: torch.Tensor) -> None:
        self.mean, self.std = mean, std


def out_stats(ref_phi: torch.Tensor, ref_member: torch.Tensor, per_example: bool | None = None) -> OutStats:
    """Fit the OUT Gaussians. ref_phi [K, M], ref_member [K, M] bool.

    ``per_example`` None: per-row variance from 64 references on, pooled below. A row with no
    OUT reference gets the mean over all OUT entries.
    """
    k = ref_phi.shape[0]
    out = (~ref_member).double()
    count = out.sum(dim=0)
    total = out.sum().clamp_min(1.0)
    global_mean = (ref_phi * out).sum() / total
    mean = torch.where(count > 0, (ref_phi * out).sum(dim=0) / count.clamp_min(1.0), global_mean)
    resid = (ref_phi - mean) * out
    pooled = torch.sqrt((resid ** 2).sum() / (total - (count > 0).sum()).clamp_min(1.0)).clamp_min(1e-6)
    if per_example is None:
        per_example = k >= 64
    if per_example:
        var = (resid ** 2).sum(dim=0) / (count - 1).clamp_min(1.0)
        std = torch.where(count > 1, var.sqrt(), pooled).clamp_min(1e-3 * float(pooled))
    else:
        std = pooled.expand_as(mean)
    return OutStats(mean, std)


def lira_offline_scores(phi: torch.Tensor, stats: OutStats) -> torch.Tensor:
    """(phi - mu_out) / sigma_out for observations phi [..., M]."""
    return (phi.double() - stats.mean) / stats.std
