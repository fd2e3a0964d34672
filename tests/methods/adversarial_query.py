"""Test support: neighbouring training sets for the teacher-vote methods, and a query chosen to flip the teachers.

The teacher-vote methods' guarantees rest on "one replaced example changes one teacher's vote". Differential
privacy must hold for every query, so the auditor may pick the query knowing every teacher's model under D
and under D' (D' = D with one row of teacher 0's part replaced, :func:`replace_row`). If the other teachers
moved at all, a query lying on all their decision boundaries at once, on the side that makes them vote a
under D and b under D', turns a one-vote change into a T - 1 vote change. :func:`adversarial_query` finds
the best such query by linear programming:

    maximise t over x, |x_i| <= 1, subject to, for every teacher k != 0 and class c:
        x . (theta_k[:, a] - theta_k[:, c]) >= t  (c != a)     and     x . (theta'_k[:, b] - theta'_k[:, c]) >= t  (c != b)

for every pair of classes (a, b), a != b; the query is the best x scaled into the unit L2 ball (where the
data and real queries lie; the teachers' logits are linear in x, so scaling keeps every vote). The pairs
are searched best-first: the LP with only the (a, b) rows bounds the full one from above, so most pairs
need only that small LP. When the other teachers are bitwise the same under D and D', each pair holds
the rows g and -g, so t <= 0: no query moves any teacher but teacher 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

__all__ = ["REPLACEMENTS", "replace_row", "AdversarialQuery", "adversarial_query", "votes_of"]

#: The ways one row of teacher 0's part is replaced (issue 29): another image, a unit vector on an input
#: coordinate no training row lights, the row negated, and the same row with another label.
REPLACEMENTS: tuple[str, ...] = ("another image", "never-lit pixel", "-x", "label")

#: HiGHS tolerances far below its default 1e-7: teachers coupled through rounding differ in their last
#: digits, so the margins to be found are tiny next to the rows' own size.
_LP_OPTIONS = {"primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def replace_row(x: torch.Tensor, y: torch.Tensor, row: int, kind: str, donor: tuple[torch.Tensor, int],
                classes: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Copies of x [N, D] and y [N] with row ``row`` replaced as ``kind`` (one of :data:`REPLACEMENTS`).

    ``donor``: (image [D], label) used by "another image". Every replaced row stays in the unit ball.
    """
    x2, y2 = x.clone(), y.clone()
    if kind == "another image":
        x2[row], y2[row] = donor[0].to(x.dtype), int(donor[1])
    elif kind == "never-lit pixel":
        dark = torch.nonzero((x != 0).sum(dim=0) == 0).flatten()
        if dark.numel() == 0:
            raise ValueError("every input coordinate is lit by some training row: no never-lit pixel")
        x2[row] = 0.0
        x2[row, int(dark[0])] = 1.0
    elif kind == "-x":
        x2[row] = -x[row]
    elif kind == "label":
        y2[row] = (int(y[row]) + 1) % classes
    else:
        raise ValueError(f"kind must be one of {REPLACEMENTS}, got {kind!r}")
    return x2, y2


@dataclass(frozen=True)
class AdversarialQuery:
    """The chosen query [1, D] (float32, ||x|| <= 1), its classes (a under D, b under D'), its margin:
    min over the other teachers' constraints of the logit gap, for the query as given (float64
    evaluation on the float32 weights the votes use); > 0 means every other teacher flips from a to b."""

    query: torch.Tensor
    a: int
    b: int
    margin: float
    pairs_solved: int


def _gaps(theta: np.ndarray, cls: int) -> np.ndarray:
    """Rows theta_k[:, cls] - theta_k[:, c] for every teacher k and class c != cls: [K (C - 1), D]."""
    k, d, c = theta.shape
    diff = theta[:, :, [cls]] - theta  # [K, D, C]
    keep = [j for j in range(c) if j != cls]
    return diff[:, :, keep].transpose(0, 2, 1).reshape(-1, d)


def _max_margin(rows: np.ndarray) -> tuple[float, np.ndarray]:
    """max t s.t. rows @ x >= t, |x_i| <= 1: (t, x) by HiGHS."""
    from scipy.optimize import linprog

    m, d = rows.shape
    scale = 1.0 / max(float(np.abs(rows).max()), 1e-300)  # rows of norm ~1: the tolerances mean the same
    a_ub = np.hstack([-rows * scale, np.ones((m, 1))])
    cost = np.zeros(d + 1)
    cost[-1] = -1.0
    res = linprog(cost, A_ub=a_ub, b_ub=np.zeros(m), bounds=[(-1.0, 1.0)] * d + [(None, None)], method="highs",
                  options=_LP_OPTIONS)
    if res.status != 0:
        raise RuntimeError(f"the margin LP failed: {res.message}")
    return float(res.x[-1]) / scale, res.x[:d]


def adversarial_query(theta_d: torch.Tensor, theta_dp: torch.Tensor, exclude: int = 0) -> AdversarialQuery:
    """The query that best flips every teacher but ``exclude`` from some class a under D (models
    ``theta_d`` [T, D, C]) to some b under D' (``theta_dp``): see the module docstring."""
    keep = [k for k in range(theta_d.shape[0]) if k != exclude]
    # The votes use the float32 weights (TrainContext.logits): the LP sees exactly those.
    th0 = theta_d[keep].float().double().cpu().numpy()
    th1 = theta_dp[keep].float().double().cpu().numpy()
    classes = th0.shape[2]
    bounds = []
    for a in range(classes):
        for b in range(classes):
            if a != b:
                relaxed = np.vstack([th0[:, :, a] - th0[:, :, b], th1[:, :, b] - th1[:, :, a]])
                bounds.append((_max_margin(relaxed)[0], a, b))
    bounds.sort(reverse=True)
    best: tuple[float, int, int, np.ndarray] | None = None
    solved = 0
    for bound, a, b in bounds:
        if best is not None and bound <= best[0]:
            break  # no remaining pair can beat the best full LP
        t, x = _max_margin(np.vstack([_gaps(th0, a), _gaps(th1, b)]))
        solved += 1
        if best is None or t > best[0]:
            best = (t, a, b, x)
    assert best is not None
    _, a, b, x = best
    norm = float(np.linalg.norm(x))
    # Into the unit ball with room for the float32 rounding of the query (votes are scale-free).
    x = x / norm * (1.0 - 1e-6) if norm > 0 else x
    query = torch.tensor(x, dtype=torch.float32).unsqueeze(0)
    xq = query.double().numpy()[0]
    margin = float((np.vstack([_gaps(th0, a), _gaps(th1, b)]) @ xq).min())
    return AdversarialQuery(query, a, b, margin, solved)


def votes_of(ctx, teachers: int, lam: float, query: torch.Tensor) -> torch.Tensor:
    """Each teacher's vote [T] on the single query [1, D], through the context's own logits."""
    return ctx.logits(ctx.teacher_thetas(teachers, lam), query).argmax(dim=2)[:, 0]
