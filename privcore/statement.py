"""A privacy statement for one calibrated method: what is guaranteed, to whom, under which assumptions.

Plain data (:func:`privacy_statement`, JSON-ready) and Markdown (:func:`statement_markdown`), for
the CLI (``privcore statement``) and the dashboard's download. The epsilon stated is the one the
calibrated noise really reaches under replace-one neighbours (:mod:`privcore.accounting.forward`);
where the accounting mode claims more (``paper``; tight subsample-and-aggregate's non-adaptive
assumption), both are given and the statement says which one holds.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import unicodedata
from typing import Any, Mapping, Sequence

from .accounting.forward import accountant_text, claims_more, judging_accounting, replace_one_epsilon
from .calibration import calibrate
from .methods import get_method, method_name
from .types import PrivacyBudget, Problem
from .validation import fmt_value

__all__ = ["privacy_statement", "statement_markdown", "statement_json", "STATEMENT_FIELDS"]

#: Keys of every statement (the JSON object's, in order).
STATEMENT_FIELDS: tuple[str, ...] = (
    "method", "method_label", "data", "epsilon", "delta", "epsilon_nominal", "accounting", "neighbouring_relation",
    "accountant", "mechanism", "noise", "guarantee_covers", "preprocessing", "assumptions", "randomness", "setting",
    "knob_selection")
#: Knobs a tuned row may name that are Problem fields (the rest are the method's own parameters).
_PROBLEM_KNOBS = ("lam", "teachers", "clip", "learning_rate", "batch_size", "epochs")

#: The numbers every noise scale may hold; a method's own (its ``scale_fields``) follow from ``scale.extras``.
_NOISE_KEYS = ("sigma", "beta", "rho", "noise_multiplier", "per_query_epsilon", "per_query_delta", "sensitivity",
               "solver_tolerance", "output_scale")


def _covers(method: str, problem: Problem) -> str:
    entry = get_method(method)
    if entry.family == "training":
        return "the released model (any number of predictions from it)"
    if entry.covers:  # the method's card says what one guarantee covers (the PATE student: one model)
        return entry.covers
    return f"B = {problem.budget:,} answers to queries, no more (a new batch of queries needs a new budget)"


#: Longest preprocessing step stated (one line of a statement).
MAX_STEP_CHARS = 500


def preprocessing_steps(preprocessing: Any) -> list[dict[str, Any]]:
    """Each step as ``{"step": text, "covered": bool}``. A string is a step the guarantee does NOT cover:
    whether a step used the private data is not something the tool can read off its description (a keyword
    rule stated "min-max scaling fitted on the private data" as covered). A step computed from public
    knowledge alone is given as ``{"step": text, "covered": True}`` (the CLI's ``--public-preprocessing``).
    Text is one line of at most :data:`MAX_STEP_CHARS` characters with no control characters: a newline let
    a step write a heading of its own into the Markdown statement."""
    if isinstance(preprocessing, (str, bytes)) or not isinstance(preprocessing, (list, tuple)):
        raise TypeError(f"preprocessing must be a list of steps (strings, or {{'step': text, 'covered': bool}} "
                        f"mappings), got {fmt_value(preprocessing)} ({type(preprocessing).__name__})")
    out = []
    for i, item in enumerate(preprocessing):
        if isinstance(item, str):
            text, covered = item, False
        elif (isinstance(item, Mapping) and set(item) == {"step", "covered"} and isinstance(item["step"], str)
              and isinstance(item["covered"], bool)):
            text, covered = item["step"], item["covered"]
        else:
            raise TypeError(f"preprocessing[{i}] must be a string or a {{'step': text, 'covered': bool}} mapping, "
                            f"got {fmt_value(item)} ({type(item).__name__})")
        bad = next((c for c in text if unicodedata.category(c).startswith("C")), None)
        if bad is not None:
            raise ValueError(f"preprocessing[{i}] must be one line of text without control characters, got "
                             f"{fmt_value(text)} (it holds {bad!r})")
        if not text.strip() or len(text) > MAX_STEP_CHARS:
            raise ValueError(f"preprocessing[{i}] must be 1 to {MAX_STEP_CHARS} characters, got {len(text.strip())}")
        out.append({"step": text.strip(), "covered": covered})
    return out


def privacy_statement(method: str, epsilon: float, delta: float, problem: Problem | None = None,
                      accounting: str = "corrected", *, preprocessing: Sequence[Any] = (),
                      secure_noise: bool = False, tuned: str | None = None, data: str | None = None) -> dict[str, Any]:
    """The statement of ``method`` calibrated at (epsilon, delta) on ``problem`` under ``accounting``.

    ``preprocessing``: what was done to the data before training (e.g. the data set's notes: PCA
    fitted on the training split, augmentation), each stated with whether the guarantee covers it
    (:func:`preprocessing_steps`: a plain string is not covered).
    ``secure_noise``: whether the noise is drawn from the operating system's entropy (release mode)
    or from the public experiment seed (exploring: no guarantee against whoever knows the seed).
    ``tuned``: a tuned comparison's row text (``ResultRow.tuned``): the statement is then of the knobs
    it picked, and says how they were picked (``knob_selection``): a private selection's share of
    (epsilon, delta) is taken out before the release's calibration; a choice on held-out data is
    stated as outside the guarantee. ``data``: the data set it is of, in words (a name, an uploaded file's).
    """
    problem = problem if problem is not None else Problem()
    total = PrivacyBudget(epsilon, delta)
    method, problem, budget, selection = _tuned(method, problem, total, tuned)
    epsilon, delta = budget.epsilon, budget.delta
    scale = calibrate(method, budget, problem, accounting)
    entry = get_method(method)
    weaker = scale.noise != "none" and claims_more(method, accounting, scale.delta)
    # A sound calibration guarantees its target; a weaker one what its noise really reaches.
    real = replace_one_epsilon(scale, problem) if weaker else scale.epsilon
    assumptions = [entry.assumptions] if entry.assumptions else []
    judge = judging_accounting(method, accounting)
    if accounting == "paper":
        assumptions.append(f"paper accounting (as published): the noise was calibrated for epsilon = {epsilon:g}, but "
                           f"under replace-one neighbours it guarantees epsilon = {real:.4g}; that is the epsilon "
                           "stated here")
    extra = entry.accounting_assumption(accounting, delta, real)  # the method's own (tight S&A: non-adaptive)
    if extra:
        assumptions.append(extra)
    assumptions.extend(n for n in scale.notes if n not in assumptions)
    pre = preprocessing_steps(preprocessing)
    randomness = ("secure noise: every draw seeded from the operating system's entropy (release mode)" if secure_noise
                  else "public seed: the noise is recomputable by whoever knows the experiment seed, so this release "
                       "is NOT private against them; publish only with secure noise (docs/spec.md, Release mode)")
    out = {
        "method": method,
        "method_label": entry.label,
        "data": data,
        "epsilon": real,
        "delta": scale.delta,
        "epsilon_nominal": scale.epsilon,
        "accounting": accounting,
        "neighbouring_relation": "replace-one (neighbouring data sets differ by replacing one training example)",
        "accountant": accountant_text(method, scale.delta) + (f"; judged by the {judge} accountant"
                                                               if judge != accounting else ""),
        "mechanism": scale.formula,
        "noise": {"kind": scale.noise, **{k: getattr(scale, k) for k in _NOISE_KEYS if getattr(scale, k) is not None},
                  **{k: v for k, v in scale.extras.items() if v is not None}},
        "guarantee_covers": _covers(method, problem),
        "preprocessing": pre,
        "assumptions": assumptions,
        "randomness": randomness,
        "setting": {"n": problem.n, "dim": problem.dim, "classes": problem.classes, "lam": problem.lam,
                    **{k: getattr(problem, k) for k in entry.uses if k != "lam"}, **entry.param_values()},
        "knob_selection": selection,
    }
    if selection is not None and selection["kind"] == "private":  # the totals: selection + release
        out["epsilon"] = real + selection["epsilon"]
        out["delta"] = scale.delta + selection["delta"]
        out["epsilon_nominal"] = total.epsilon
    return out


def _tuned(method: str, problem: Problem, total: PrivacyBudget, tuned: str | None
           ) -> tuple[str, Problem, PrivacyBudget, dict[str, Any] | None]:
    """(method, problem, release budget, knob selection) of a tuned row; the inputs unchanged otherwise."""
    from .engine.rows import knobs_picked

    if not tuned or not knobs_picked(tuned):  # as configured (also a method no private selection can tune)
        return method, problem, total, None
    from .engine.tuning import SELECTION_FRACTION, release_budget

    base = get_method(method)
    picked: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in knobs_picked(tuned).split(","))):
        key, _, value = item.partition("=")
        picked[key.strip()] = float(value)
    own = {k: (int(v) if isinstance(getattr(base, k), int) else v) for k, v in picked.items() if k in base.params}
    knobs = {k: (int(v) if k in ("teachers", "batch_size", "epochs") else v) for k, v in picked.items()
             if k in _PROBLEM_KNOBS}
    method = method_name(base.base_name, **{**base.param_values(), **own})
    problem = dataclasses.replace(problem, **knobs)
    text = knobs_picked(tuned)
    if tuned.startswith("private"):
        found = re.search(r"among (\d+) candidates", tuned)
        release = release_budget(total)
        return method, problem, release, {
            "kind": "private", "knobs": text, "candidates": int(found.group(1)) if found else None,
            "epsilon": total.epsilon - release.epsilon, "delta": total.delta - release.delta,
            "text": (f"the knobs ({text}) were chosen by a private selection (report noisy max over one private "
                     f"release per candidate) spending {SELECTION_FRACTION:g} of (epsilon, delta); the release "
                     "spends the rest; epsilon and delta above are the totals")}
    return method, problem, total, {
        "kind": "held-out", "knobs": text,
        "text": (f"the knobs ({text}) were picked without privacy, as the best on the test queries it answers: "
                 "that choice is NOT covered by this guarantee, which holds for these knobs fixed in advance")}


def statement_json(statement: dict[str, Any]) -> str:
    """The statement as one JSON object (infinity as the string "inf")."""
    def clean(v: Any) -> Any:
        if isinstance(v, float) and math.isinf(v):
            return "inf"
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, list):
            return [clean(x) for x in v]
        return v

    return json.dumps(clean(statement), indent=2)


def statement_markdown(statement: dict[str, Any]) -> str:
    """The statement as a short Markdown document."""
    s = statement
    eps = "∞ (no privacy)" if math.isinf(s["epsilon"]) else f"{s['epsilon']:.4g}"
    lines = [f"# Privacy statement: {s['method_label']}", "",
             f"**Guarantee:** ({eps}, {s['delta']:g})-differential privacy"
             + (f" for the training data {s['data']}." if s.get("data") else "."), "",
             f"- **epsilon:** {eps}" + ("" if math.isclose(s["epsilon"], s["epsilon_nominal"], rel_tol=1e-6)
                                         or math.isinf(s["epsilon"]) else
                                         f" (calibrated for {s['epsilon_nominal']:g} under {s['accounting']} accounting)"),
             f"- **delta:** {s['delta']:g}",
             f"- **neighbouring relation:** {s['neighbouring_relation']}",
             f"- **accountant:** {s['accountant']} ({s['accounting']} mode)",
             f"- **mechanism:** {s['mechanism']}",
             "- **noise:** " + ", ".join(f"{k} = {v:.4g}" if isinstance(v, float) else f"{k} = {v}"
                                         for k, v in s["noise"].items()),
             f"- **covers:** {s['guarantee_covers']}",
             f"- **randomness:** {s['randomness']}",
             "- **setting:** " + ", ".join(f"{k} = {v}" for k, v in s["setting"].items()),
             "", "## Preprocessing"]
    lines += [f"- {p['step']} ({'covered' if p['covered'] else 'NOT covered by the guarantee'})"
              for p in s["preprocessing"]] or ["- none stated"]
    if s.get("knob_selection"):
        lines += ["", "## How the knobs were chosen", "", s["knob_selection"]["text"]]
    lines += ["", "## Assumptions"] + [f"- {a}" for a in s["assumptions"]]
    return "\n".join(lines) + "\n"
