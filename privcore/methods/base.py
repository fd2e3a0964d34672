"""The shape every method module shares, and small helpers for calibration.

A method is a class with class attributes describing it and two operations:

* ``calibrate(budget, problem, accounting) -> NoiseScale`` - pure and instant (no data);
* ``release(ctx, scales, repeats, queries=None) -> Tensor`` - what the method publishes, for
  ``repeats`` independent runs per noise scale, solved as one batched problem: a model
  [E, R, D, C] (``releases = "model"``), noisy logits [E, R, M, C] for the M query rows
  (``"logits"``) or labels [E, R, M] (``"labels"``);
* ``evaluate(ctx, scales, repeats) -> Tensor [E, R]`` - test accuracy of those releases (the
  test set is the query set); ``measure`` adds the method's own measured result fields.

Its presentation is its ``card`` (:class:`~privcore.methods.card.MethodCard`), its own outputs its
``result_fields`` and ``scale_fields`` (:mod:`privcore.methods.fields`), its forward direction (the
epsilon a given noise spends) its ``noise_inputs`` and ``spent_epsilon`` (:mod:`privcore.methods.forward`).

``release`` is what an attacker sees: the leakage module and the privacy audits call it on
neighbouring data sets; ``evaluate`` is shared by all methods and needs no override.
``query_answers`` groups a prediction method's answers into units of one guarantee (what one
leakage-audit trial observes).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, ClassVar, Mapping, Sequence

from ..types import ACCOUNTING_MODES, CalibrationError, NoiseScale, PrivacyBudget, Problem
from ..validation import check_choice
from .card import MethodCard
from .cost_parts import CostPart, data_work, nonprivate_part, solver_iterations, teacher_part
from .fields import ABSTENTION_FIELDS, ResultField
from .forward import ForwardAccounting, NoiseInput

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import torch

    from ..context import TrainContext

__all__ = ["Method", "MethodCard", "ResultField", "NoiseInput", "WinContext", "CostPart", "solver_iterations", "data_work",
           "nonprivate_part", "teacher_part", "CARD_ATTRIBUTES"]

#: The card's fields, readable on a method as thin read-only aliases (``m.label`` is ``m.card.label``):
#: dozens of views read them. A method class declares them in its ``card`` only.
CARD_ATTRIBUTES: tuple[str, ...] = tuple(f.name for f in fields(MethodCard))


@dataclass(frozen=True)
class WinContext:
    """The setting a recommendation explains (plain numbers; None when unknown)."""

    epsilon: float | None
    delta: float | None
    budget: int | None
    n: int | None
    lam: float | str | None
    teachers: int | None

    @property
    def pure(self) -> bool:
        return self.delta is not None and float(self.delta) == 0.0

    @property
    def few(self) -> bool:
        """Few predictions (B <= 30): where the prediction methods can win."""
        return self.budget is not None and int(self.budget) <= 30

    @property
    def many(self) -> bool:
        """Many predictions (B >= 300)."""
        return self.budget is not None and int(self.budget) >= 300

    @property
    def n_lam(self) -> float | None:
        return float(self.n) * float(self.lam) if self.n is not None and isinstance(self.lam, (int, float)) else None


class Method(ForwardAccounting, ABC):
    """Base class of the methods. Subclasses are stateless singletons in the registry.

    A method class declares its mechanism (``name``, the class attributes below, ``_calibrate``,
    ``release``, ``cost_parts``), its presentation apart in ``card`` (a :class:`MethodCard`; the
    card's fields read as ``m.label`` etc. through thin aliases), its own outputs in
    ``result_fields`` / ``scale_fields`` (:class:`ResultField`s), which rows, the cache, the CLI,
    the exports and the tables read generically, and its forward direction (``noise_inputs``,
    ``accountant``, ``spent_epsilon``: :class:`~privcore.methods.forward.ForwardAccounting`), which
    ``privcore epsilon``, the Calibrate page and the real-epsilon check read.
    """

    name: ClassVar[str]
    #: How the method is named, drawn and explained (nothing in it changes a number).
    card: ClassVar[MethodCard]
    #: Its extra result-row columns (:mod:`privcore.methods.fields`): measured by :meth:`measure`, or
    #: copied from the noise scale (``on_scale``). A method that abstains lists ``ABSTENTION_FIELDS``.
    result_fields: ClassVar[tuple[ResultField, ...]] = ()
    #: Its calibration's extra numbers, kept on :class:`NoiseScale` as ``extras`` (``s.threshold`` reads one).
    scale_fields: ClassVar[tuple[ResultField, ...]] = ()
    #: "training" (the model is private), "prediction" (B answers are) or "baseline" (no privacy).
    family: ClassVar[str]
    uses: ClassVar[tuple[str, ...]]  # Problem fields besides n, dim, classes that change its results
    supports_pure: ClassVar[bool] = True
    supports_approx: ClassVar[bool] = True
    #: True when every private release needs its own training run (loss perturbation, DP-SGD): the
    #: slow methods. The others train once and draw fresh noise for every release.
    trains_per_release: ClassVar[bool] = False
    #: What one release is: "model" (theta, any number of predictions), "logits" or "labels"
    #: (one answer per query; the guarantee covers B of them).
    releases: ClassVar[str] = "model"
    #: True when a "labels" release may hold -1 (the method abstained on that query): abstentions
    #: count as wrong answers in ``evaluate``; :meth:`measure` adds the answered share and the accuracy
    #: among answered (``ABSTENTION_FIELDS``, which such a method lists in its ``result_fields``).
    abstains: ClassVar[bool] = False
    #: One of the five methods of the paper (van der Maaten and Hannun): its figures show these.
    from_paper: ClassVar[bool] = False
    #: The knob the paper's Figure 6 sweeps for this method ("lam", "teachers"), if any.
    paper_figure6_axis: ClassVar[str | None] = None
    #: Constructor keywords that change the mechanism (Private-kNN's k and gamma, Confident-GNMax's
    #: threshold and noise ratio). A non-default choice is part of the method's name,
    #: ``base[k=v,...]`` (:func:`privcore.methods.get_method` parses it), so it reaches every cache
    #: key, row and export through the name alone.
    params: ClassVar[tuple[str, ...]] = ()
    #: The tuned comparison's declared candidates (:mod:`privcore.engine.tuned`): knob -> values, the
    #: knobs being SweepSpec fields the method uses or entries of :attr:`params`; the grid is their
    #: product. Small on purpose: a private selection pays for every candidate.
    tuning_grid: ClassVar[Mapping[str, tuple]] = {}
    #: Whether one query can change the method's answers to OTHER queries under the same noise
    #: (sparse vector: a stream's shared threshold and its cap on paid answers; the PATE student:
    #: trained on the query rows' features). A private selection scores candidates by accuracy on
    #: private validation rows with report noisy max at sensitivity 1 / |V|, which holds only when
    #: each answer depends on its own query alone: such methods get no private selection
    #: (``lam = auto`` runs them at the stand-in lambda; a private tuned comparison as configured).
    couples_queries: ClassVar[bool] = False
    #: Whether paper accounting calibrates the method for the exact regularised minimiser, which the
    #: released solver output is not (:data:`EXACT_MINIMISER_NOTE`): the real epsilon of such a row holds
    #: for the exact minimiser only, and its sentence says so.
    paper_assumes_exact_minimiser: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        mixed = sorted(set(CARD_ATTRIBUTES) & set(vars(cls)))
        if mixed:  # the card is the one place of the presentation (issue 31: mechanism and card apart)
            raise TypeError(f"{cls.__name__} sets {', '.join(mixed)} on the class: declare them in its "
                            "card = MethodCard(...) (privcore.methods.card)")

    # Thin read-only aliases of the card (dozens of views read ``m.label``, ``m.colour`` ...).
    label = property(lambda self: self.card.label)
    short_label = property(lambda self: self.card.short_label)
    sentence_label = property(lambda self: self.card.sentence_label)
    colour = property(lambda self: self.card.colour)
    marker = property(lambda self: self.card.marker)
    dash = property(lambda self: self.card.dash)
    summary = property(lambda self: self.card.summary)
    wins_when = property(lambda self: self.card.wins_when)
    assumptions = property(lambda self: self.card.assumptions)
    caveats = property(lambda self: self.card.caveats)
    covers = property(lambda self: self.card.covers)

    @property
    def uses_budget(self) -> bool:
        """Whether its guarantee is spent over B answers (``"budget"`` among the knobs it ``uses``): one
        audit trial then covers B of them (privcore/leakage/sizes.py)."""
        return "budget" in self.uses

    @property
    def code_version(self) -> str:
        """The version of its code its cached results are keyed by (:mod:`privcore.methods.source`)."""
        from .source import code_version

        return code_version(self)

    @property
    def base_name(self) -> str:
        """The registry name without parameters."""
        return type(self).name

    def param_values(self) -> dict[str, Any]:
        """This instance's :attr:`params` and their values."""
        return {p: getattr(self, p) for p in self.params}

    def calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str = "corrected") -> NoiseScale:
        """Noise scale meeting ``budget`` for ``problem`` under ``accounting`` (paper|corrected|tight)."""
        if not isinstance(budget, PrivacyBudget):
            raise TypeError(f"budget must be a PrivacyBudget, got {type(budget).__name__}")
        if not isinstance(problem, Problem):
            raise TypeError(f"problem must be a Problem, got {type(problem).__name__}")
        check_choice("accounting", accounting, ACCOUNTING_MODES)
        if not budget.is_private:
            return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "none",
                              formula="epsilon = inf: non-private baseline, no noise")
        if budget.is_pure and not self.supports_pure:
            raise CalibrationError(self.pure_unsupported_message())
        try:
            return self._calibrate(budget, problem, accounting)
        except CalibrationError:
            raise
        except (ValueError, RuntimeError) as err:  # e.g. a delta too small for any finite sigma
            raise CalibrationError(f"{self.name} cannot be calibrated at epsilon={budget.epsilon:g}, "
                                   f"delta={budget.delta:g}: {err}") from err

    def measure(self, ctx: "TrainContext", scales: list[NoiseScale],
                repeats: int) -> "tuple[np.ndarray, list[dict[str, float]]]":
        """Test accuracies [len(scales), repeats] and, per scale, the values of the method's measured
        :attr:`result_fields` (plain numbers; a field left out is None in the row).

        Default: :meth:`evaluate` and nothing else; a method that abstains (:attr:`abstains`) gets the
        abstention summary (:data:`~privcore.methods.fields.ABSTENTION_FIELDS`: answered share, accuracy
        among answered and its spread) from one release, plus :meth:`extra_results` of that release.
        """
        if not self.abstains:
            return self.evaluate(ctx, scales, repeats).detach().cpu().numpy(), [{} for _ in scales]
        out = self.release(ctx, scales, repeats)  # [E, R, M], -1 = abstained (counted wrong)
        answered = (out >= 0).double()
        right = (out == ctx.y_test).double()
        among = right.sum(dim=2) / answered.sum(dim=2).clamp(min=1.0)
        extras = self.extra_results(ctx, scales, out)
        answered_np, among_np = answered.mean(dim=2).cpu().numpy(), among.cpu().numpy()
        fraction, accuracy, spread = (f.name for f in ABSTENTION_FIELDS)
        summary = [{fraction: float(answered_np[j].mean()), accuracy: float(among_np[j].mean()),
                    spread: float(among_np[j].std(ddof=1)) if among_np[j].size > 1 else 0.0}
                   for j in range(len(scales))]
        return right.mean(dim=2).cpu().numpy(), [{**a, **b} for a, b in zip(summary, extras)]

    def extra_results(self, ctx: "TrainContext", scales: list[NoiseScale],
                      released: "torch.Tensor") -> list[dict[str, float]]:
        """An abstaining method's further measured numbers per scale (keys: its :attr:`result_fields`),
        from ``released``, what :meth:`release` returned for ``scales``. Confident-GNMax adds PATE's
        data-dependent epsilon here (not a guarantee)."""
        return [{} for _ in scales]

    def cost_parts(self, problem: Problem, points: int, repeats: int) -> list[CostPart]:
        """The pieces of compute of ``points`` epsilons x ``repeats`` releases at ``problem``
        (:mod:`privcore.engine.cost` turns them into seconds). Default: a fixed overhead."""
        return [CostPart("fixed", 1.0)]

    def calibration_stored(self, epsilons: Sequence[float], delta: float, problem: Problem, accounting: str) -> bool:
        """Whether every epsilon's calibration is already stored (a memo, a shipped table), so that the
        time model leaves out its "calibrate" and "import" pieces. Default: False (priced)."""
        return False

    def supports(self, delta: float) -> bool:
        """Whether the method has a guarantee at this delta (pure DP when delta = 0)."""
        return self.supports_pure if float(delta) == 0.0 else self.supports_approx

    def min_train_size(self, setting: Mapping[str, Any]) -> int:
        """The smallest N the method can be trained on at ``setting`` (keys as in :class:`Problem`)."""
        return 1

    def unavailable(self, setting: Mapping[str, Any], n: int | None) -> str | None:
        """Why the method cannot run at ``setting`` with ``n`` training examples (None: it can).

        ``setting`` has the keys of :class:`Problem` plus ``delta``. The UI leaves such a method out
        with this message instead of stopping every method.
        """
        if "delta" in setting and not self.supports(setting["delta"]):
            return self.pure_unsupported_message()
        if n is not None and n < self.min_train_size(setting):
            return f"{self.label} needs at least {self.min_train_size(setting):,} training examples here, N = {n:,}"
        return None

    def setting_warnings(self, setting: Mapping[str, Any], n: int | None) -> list[str]:
        """Warnings about ``setting`` that do not stop the method (shown beside the results as warnings):
        each says what in the current setting is the matter. Always-true notes go in :attr:`caveats`."""
        return []

    def win_reason(self, s: WinContext) -> str:
        """Why this method wins at ``s``: one clause tying it to the setting (paper Sections 5-6)."""
        return f"{self.sentence_label or self.label} has the best accuracy at this setting"

    def accounting_assumption(self, accounting: str, delta: float, real: float) -> str | None:
        """An assumption ``accounting`` adds to this method's guarantee at ``delta``, in one sentence for the
        privacy statement (``real``: the epsilon its noise reaches without it), or None."""
        return None

    def pure_unsupported_message(self) -> str:
        return f"{self.name} needs delta > 0; use delta > 0 such as 1e-5, or a method that supports delta = 0"

    @abstractmethod
    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        """Calibration for a finite epsilon (validated inputs)."""

    @abstractmethod
    def release(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                queries: "torch.Tensor | None" = None) -> "torch.Tensor":
        """The private outputs of ``repeats`` runs per noise scale (see the module docstring).

        ``queries`` [M, D] are the inputs answered by prediction methods (default: the test set);
        training methods release a model and ignore them. Without ``queries`` the output is what the
        accuracy is scored on, which for the PATE student is an evaluation protocol, not one release:
        two students, each its own (epsilon, delta) release, each answering the test rows the other
        bought labels for (2-fold cross-fitting). What one deployment publishes is
        :meth:`query_answers` (one student).
        """

    def query_answers(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int,
                      queries: "torch.Tensor") -> "torch.Tensor":
        """A answers about each query row from ``repeats`` releases: [E, R, A, M] labels or [E, R, A, M, C] logits.

        The A answers about one row in one repetition are *one* (epsilon, delta) release: all that the
        guarantee covers and nothing more, so an audit that observes them compares with the claimed
        epsilon itself (the leakage audit's trial). Default, for answers with their
        own independent noise per query (prediction sensitivity, subsample-and-aggregate,
        Confident-GNMax): A = B one-query runs of :meth:`release`, which are B queries of one
        guarantee. Sparse vector (one stream of B queries) and the PATE student (one student, A = 1)
        override it: B separate streams or students would be B releases.
        """
        if self.releases == "model":
            raise TypeError(f"{self.name} releases a model, not answers to queries")
        b = ctx.problem.budget
        out = self.release(ctx, scales, repeats * b, queries)  # [E, R * B, M(, C)], repetition r * B + j
        return out.view(out.shape[0], repeats, b, *out.shape[2:])

    def evaluate(self, ctx: "TrainContext", scales: list[NoiseScale], repeats: int) -> "torch.Tensor":
        """Test accuracy [len(scales), repeats] of private releases at each noise scale."""
        out = self.release(ctx, scales, repeats)
        if self.releases == "model":
            e, r, d, c = out.shape
            pred = ctx.test_logits(out.reshape(e * r, d, c)).argmax(dim=2).view(e, r, -1)
        elif self.releases == "logits":
            pred = out.argmax(dim=3)
        else:
            pred = out
        from ..context import accuracy

        return accuracy(pred, ctx.y_test)


EXACT_MINIMISER_NOTE = ("paper: Delta = 2K/(N lam) assumes the exact minimiser; the released solver output "
                        "may differ by up to 2 g / lam more (g = certified gradient norm)")


def sensitivity_of(problem: Problem, accounting: str) -> tuple[float, float | None, tuple[str, ...], str]:
    """(Delta, solver tolerance, notes, formula text) of a released regularised minimiser.

    ``paper``: 2K/(N lam), the exact minimiser's (labelled). Otherwise the certified sensitivity
    2K/(N lam) + 2 g/lam with g = problem.solver_tolerance (privcore.certify enforces g).
    """
    if accounting == "paper":
        return problem.sensitivity, None, (EXACT_MINIMISER_NOTE,), "2K/(N lam) (exact minimiser assumed)"
    return (problem.certified_sensitivity, problem.solver_tolerance, (),
            "2K/(N lam) + 2g/lam, g = certified solver gradient norm")


def noise_multiplier_of(scale: NoiseScale) -> float:
    """Factor turning a unit draw into this scale's noise: 1/beta (Laplace-like) or sigma (Gaussian)."""
    if scale.noise == "laplace_like":
        return 1.0 / float(scale.beta)
    if scale.noise == "gaussian":
        return float(scale.sigma)
    return 0.0


def unit_noise(ctx: "TrainContext", method: str, kind: str, repeats: int, count: int, dim: int,
               stream: str | None = None, dtype: "torch.dtype | None" = None) -> "torch.Tensor":
    """Unit-scale noise [R, count, dim]: Laplace-like with beta = 1 per row, or standard Gaussian.

    Repetition r always gets the same draw from its own generator (seed, method, kind, r),
    whatever else is evaluated with it: results do not depend on the batch, and every epsilon
    sees the same underlying draw (common random numbers give smooth curves). ``stream`` names a
    second, independent draw of the same kind (default: the kind itself). ``dtype``: float32 unless
    given (the draws are made in float64 either way, so float64 is the same draw unrounded).
    """
    import torch

    from ..noise import sample_gaussian, sample_laplace_like

    dtype = torch.float32 if dtype is None else dtype
    draws = []
    for r in range(repeats):
        gen = ctx.generator(method, stream or kind, r)
        if kind == "laplace_like":
            draws.append(sample_laplace_like(1.0, count, dim, gen, dtype=dtype))
        else:
            draws.append(sample_gaussian(1.0, count, dim, gen, dtype=dtype))
    return torch.stack(draws)


def noisy_release(base: "torch.Tensor", ctx: "TrainContext", method: str, scales: list[NoiseScale], repeats: int) -> "torch.Tensor":
    """base [count, dim] plus each scale's noise: [E, R, count, dim] float32, rounded once, at the end.

    The sensitivity bounds hold for the float64 value (the certified minimiser, its logits in
    float64); rounding it to float32 *before* adding the noise would add a data-dependent error of
    up to 2^-24 of its norm, which no bound accounts for (for weights up to 2^-24 N times the
    certified sensitivity: 6 % at N = 10^6). So the noise (the same draw as :func:`scaled_noise`'s,
    scaled in float64) is added in float64 and only the noisy sum is rounded: post-processing.
    """
    import torch

    base = base.to(torch.float64)
    count, dim = base.shape
    out = torch.empty(len(scales), repeats, count, dim, dtype=torch.float32, device=base.device)
    units = {kind: unit_noise(ctx, method, kind, repeats, count, dim, dtype=torch.float64)
             for kind in {s.noise for s in scales} - {"none", "exponential_mechanism"}}
    for e, s in enumerate(scales):
        unit = units.get(s.noise)
        out[e] = base if unit is None else unit * noise_multiplier_of(s) + base
    return out


def scaled_noise(ctx: "TrainContext", method: str, scales: list[NoiseScale], repeats: int, count: int, dim: int,
                 dtype: "torch.dtype | None" = None) -> "torch.Tensor":
    """Noise [E, R, count, dim] for each scale: the unit draw of its kind times its factor.

    ``dtype`` float32 unless given; float64 scales the unrounded draw in float64 (no float32
    rounding of the factor, which can lower a noise scale by up to 2^-24 relative).
    """
    import torch

    dtype = torch.float32 if dtype is None else dtype
    out = torch.zeros(len(scales), repeats, count, dim, dtype=dtype, device=ctx.device)
    for kind in {s.noise for s in scales} - {"none", "exponential_mechanism"}:
        unit = unit_noise(ctx, method, kind, repeats, count, dim, dtype=dtype)
        for e, s in enumerate(scales):
            if s.noise == kind:
                out[e] = unit * noise_multiplier_of(s)
    return out
