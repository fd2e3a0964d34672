"""The membership game's data: the population, the canaries, the target worlds, the audit pair and
the attacker's LiRA reference models.

* Population: the data set's N training rows, then ``canaries`` inserted rows: half mislabelled
  (held-out test images with a wrong label), half out-of-distribution (one lit coordinate, at the
  coordinates the training rows use least, e.g. MNIST corner pixels that are never lit; random labels).
* Worlds: ``worlds`` random halves of the population (n_train = P // 2 rows each, replace-one: a
  member's slot would otherwise hold a non-member). The target releases are trained on them.
* Audit pair: two data sets of n_train rows sharing n_train - 1 ordinary rows; the last row is the
  first OOD canary (in) or the same input with the next label (out): the replacement that moves the
  model furthest, so the audit comes close to the worst case the bound covers.
* References: ``references`` random halves drawn from a separate stream (so they do not depend on
  the worlds' membership), trained non-privately in one batched solve (per-problem data); for a
  method releasing labels, each reference is an ensemble of T teachers, as the target is.

Every draw comes from ``make_generator(seed, "leakage", purpose, ...)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch

from ..device import make_generator
from ..parts import solve_parts
from ..solver import Preconditioner, solve_softmax

__all__ = ["Population", "build_population", "world_masks", "audit_rows", "reference_masks", "reference_logits",
           "vote_logits"]


@dataclass(frozen=True)
class Population:
    """x [P, D] float32, y [P] int64; ``canary`` [P] bool; ``ood`` [P] bool (OOD canaries)."""

    x: torch.Tensor
    y: torch.Tensor
    canary: torch.Tensor
    ood: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    classes: int

    @property
    def size(self) -> int:
        return int(self.x.shape[0])

    @property
    def n_train(self) -> int:
        """Rows of every world, audit data set and reference: half the population."""
        return self.size // 2


def build_population(x_train: torch.Tensor, y_train: torch.Tensor, x_test: torch.Tensor, y_test: torch.Tensor,
                     classes: int, canaries: int, seed: int) -> Population:
    """The population: training rows followed by ``canaries`` canaries (mislabelled, then OOD)."""
    device = x_train.device
    n_mis = canaries // 2
    n_ood = canaries - n_mis
    g = make_generator(seed, "leakage", "canaries", device=device)
    if n_mis > x_test.shape[0]:
        raise ValueError(f"canaries must be at most {2 * x_test.shape[0]} for this test set, got {canaries}")
    pick = torch.randperm(x_test.shape[0], generator=g, device=device)[:n_mis]
    x_mis = x_test[pick]
    y_mis = (y_test[pick] + torch.randint(1, classes, (n_mis,), generator=g, device=device)) % classes
    # OOD: one lit coordinate each, at the coordinates the training rows use least (on MNIST, corner
    # pixels that are never lit): nothing else in the data explains such a row's label.
    d = x_train.shape[1]
    moment = x_train.double().pow(2).mean(dim=0)
    order = torch.randperm(d, generator=g, device=device)  # random among equally unused coordinates
    cols = order[torch.argsort(moment[order], stable=True)]
    x_ood = torch.zeros(n_ood, d, dtype=x_train.dtype, device=device)
    x_ood[torch.arange(n_ood, device=device), cols[torch.arange(n_ood, device=device) % d]] = 1.0
    y_ood = torch.randint(0, classes, (n_ood,), generator=g, device=device)
    x = torch.cat([x_train, x_mis, x_ood])
    y = torch.cat([y_train, y_mis, y_ood])
    n = x_train.shape[0]
    canary = torch.zeros(x.shape[0], dtype=torch.bool, device=device)
    canary[n:] = True
    ood = torch.zeros_like(canary)
    ood[n + n_mis:] = True
    return Population(x.contiguous(), y.contiguous(), canary, ood, x_test, y_test, classes)


def _halves(size: int, count: int, seed: int, purpose: str, device: torch.device) -> torch.Tensor:
    masks = torch.zeros(count, size, dtype=torch.bool, device=device)
    for k in range(count):
        g = make_generator(seed, "leakage", purpose, k, device=device)
        masks[k, torch.randperm(size, generator=g, device=device)[: size // 2]] = True
    return masks


def world_masks(pop: Population, worlds: int, seed: int) -> torch.Tensor:
    """Membership [G, P] of the target worlds (random halves)."""
    return _halves(pop.size, worlds, seed, "worlds", pop.x.device)


def reference_masks(pop: Population, references: int, seed: int) -> torch.Tensor:
    """Membership [K, P] of the attacker's reference models: a stream separate from the worlds'."""
    return _halves(pop.size, references, seed, "references", pop.x.device)


def audit_rows(pop: Population, seed: int) -> tuple[torch.Tensor, int, int]:
    """(base row indices [n_train - 1], the audit canary's index, an ordinary row outside the base)."""
    g = make_generator(seed, "leakage", "audit", device=pop.x.device)
    ordinary = torch.nonzero(~pop.canary).flatten()
    perm = ordinary[torch.randperm(ordinary.numel(), generator=g, device=pop.x.device)]
    base = perm[: pop.n_train - 1]
    fresh = int(perm[pop.n_train - 1])
    canary = int(torch.nonzero(pop.ood).flatten()[0])
    return base, canary, fresh


def vote_logits(votes: torch.Tensor, total: int) -> torch.Tensor:
    """Log of add-1/2 smoothed label frequencies: the "logits" of a label-releasing method."""
    c = votes.shape[-1]
    return torch.log((votes.double() + 0.5) / (total + 0.5 * c))


def reference_logits(pop: Population, masks: torch.Tensor, lam: float, teachers: int | None, seed: int,
                     callback: Callable[[], None] | None = None, chunk_floats: int = 1 << 25,
                     precond: Preconditioner | None = None) -> torch.Tensor:
    """Logit-like outputs [K, P, C] of the K reference models on every population row.

    teachers None: the regularised minimiser on each reference half (all solved together, per-
    problem data, in chunks of at most ``chunk_floats`` input numbers). Otherwise each reference
    is T teachers on disjoint parts of its half (each solved in its own part's basis, as the methods'
    teachers are), and its output is :func:`vote_logits`.
    ``precond``: the population's :class:`Preconditioner` (its basis is exact for every subset).
    """
    precond = precond if precond is not None else Preconditioner(pop.x)
    k_total, device = masks.shape[0], pop.x.device
    n_half, d = pop.n_train, pop.x.shape[1]
    rows = [torch.nonzero(masks[k]).flatten()[:n_half] for k in range(k_total)]
    outs = []
    per_ref = n_half * min(d, precond.basis.shape[1])
    step = max(1, chunk_floats // per_ref)
    for start in range(0, k_total, step):
        ks = range(start, min(k_total, start + step))
        if teachers is None:
            idx = torch.stack([rows[k] for k in ks])  # [k, n]
            parts, groups = idx, 1
        else:
            m = n_half // teachers
            idx = []
            for k in ks:
                g = make_generator(seed, "leakage", "reference_partition", k, device=device)
                idx.append(rows[k][torch.randperm(n_half, generator=g, device=device)[: teachers * m]].view(teachers, m))
            parts, groups = torch.cat(idx), teachers  # [k*T, m]
        if teachers is None:
            sub = precond.rows(parts.flatten(), parts.shape[0])  # [problems, rows, r], no unrotated copy
            lam_t = torch.full((parts.shape[0],), float(lam), dtype=torch.float64, device=device)
            res = solve_softmax(sub.x, pop.y[parts], lam_t, classes=pop.classes, precond=sub, callback=callback)
        else:  # teachers as the methods train them: each on its own part, in its own basis
            res = solve_parts(pop.x, pop.y, parts, lam, pop.classes, callback=callback)
        theta = res.theta.to(pop.x.dtype)  # [k*groups, D, C]
        logits = torch.einsum("pd,kdc->kpc", pop.x, theta)  # [k*groups, P, C]
        if teachers is None:
            outs.append(logits.double())
        else:
            pred = logits.argmax(dim=2).view(len(ks), groups, -1)  # [k, T, P]
            votes = torch.nn.functional.one_hot(pred, pop.classes).sum(dim=1)  # [k, P, C]
            outs.append(vote_logits(votes, groups))
    return torch.cat(outs)
