"""The Deep models page's logic: which preset this device can run, cached rows, computing with a bar.

The page (app_pages/deep_models.py) only arranges these. Nothing here trains unless the user asks.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from .progress import cancel_clicked, device_text, fmt_seconds
from .text import escape_markdown, server_safe

__all__ = ["device_kind", "preset_choices", "figure_specs", "cached", "cached_all", "compute", "gpu_work_text",
           "panel_rows", "preset_label", "epochs_settings", "DATASET_LABELS", "shipped", "lead_text", "PAPER_FINDINGS", "estimate_text",
           "CPU_SMALL_SECONDS"]

DATASET_LABELS = {"fashion-mnist": "Fashion-MNIST", "cifar-10": "CIFAR-10"}  # data set id -> its name


def preset_label(preset: str) -> str:
    """What ``preset`` trains, in words true for every data set: the box once read "... 5,000 Fashion-MNIST
    images" with CIFAR-10 chosen. (Not per data set: a keyed selectbox whose format_func output
    changes keeps showing the old text in the browser, streamlit/streamlit#13788.)"""
    from privcore.deep.spec import PRESETS

    p = PRESETS[preset]
    if p["n_train"] is None:
        return "ResNet-20 (GroupNorm) on all training images, the paper's settings (GPU)"
    return f"Small CNN on {p['n_train']:,} training images (CPU, under a minute on Fashion-MNIST)"


def device_kind() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def preset_choices() -> list[str]:
    """Presets offered here: the small one everywhere, the paper's only with a GPU."""
    from privcore.deep.spec import PRESETS

    return [p for p in PRESETS if p == "cpu-small" or device_kind() == "cuda"]


def figure_specs(preset: str, dataset: str) -> tuple[Any, Any] | None:
    from privcore.deep.spec import figure7_specs

    try:
        return figure7_specs(preset, dataset=dataset)
    except (ValueError, TypeError) as err:
        st.error(escape_markdown(server_safe(err)))
        return None


def cached(spec) -> tuple[list[dict], int] | None:  # noqa: ANN001
    """(rows as dicts, missing count) from the cache, or None after showing why the data are unavailable."""
    from privcore.data.errors import DataFileError, DataUnavailableError
    from privcore.deep.run import cached_rows

    try:
        rows, missing = cached_rows(spec)
    except (DataUnavailableError, DataFileError, ValueError) as err:
        st.error(escape_markdown(server_safe(err)))
        return None
    return [dict(r.to_dict(), classes=10) for r in rows], missing


def cached_all(specs) -> list[tuple[list[dict], int]] | None:  # noqa: ANN001
    """:func:`cached` of every spec, or None after showing the first problem once (each spec asked for
    the same missing data set, and the same error box appeared twice)."""
    got = []
    for spec in specs:
        one = cached(spec)
        if one is None:
            return None
        got.append(one)
    return got


def panel_rows(rows: list[dict], budget: int | None = None) -> list[dict]:
    return [r for r in rows if budget is None or r["budget"] == budget]


def compute(specs, key: str) -> bool:  # noqa: ANN001
    """Run the specs with one progress bar (device, ETA) and Cancel; True when everything finished."""
    from privcore.data.errors import DataFileError, DataUnavailableError
    from privcore.deep.run import run_deep

    from .progress import run_jobs

    sig = "|".join(s.to_json() for s in specs)
    done = run_jobs(specs, lambda spec, progress: run_deep(spec, progress=progress), key=key, sig=sig,
                    label="Training", device=device_text("auto"), what="trainings",
                    cancelled="Cancelled; finished trainings are cached and the one in progress resumes from its checkpoint.",
                    errors=(DataUnavailableError, DataFileError, ValueError, RuntimeError),
                    on_error=lambda err: st.error(escape_markdown(server_safe(err))))
    return done is not None


def cancel_notice(key: str) -> None:
    """After a Cancel click (its rerun draws no bar: training starts only on the Compute button)."""
    if cancel_clicked(key):
        st.info("Cancelled; finished trainings are cached and the one in progress resumes from its checkpoint.")


#: Examples per second of the paper preset on one H100 (Fashion-MNIST, sampling, augmentation and evaluation
#: included), from its Figure 7 run with fewer epochs (docs/gpu.md; ``bash bench/gpu_session.sh fig7`` prints
#: the times they come from).
H100_EXAMPLES_PER_S = {"dpsgd": 8_250.0, "teachers": 56_000.0, "reference": 41_000.0}


def gpu_work_text(dataset: str) -> str:
    """What the paper preset trains, and how long that is at the rates measured on an H100."""
    from privcore.deep.spec import FIG7_EPSILONS, PRESETS

    p = PRESETS["paper"]
    n = 60_000 if dataset == "fashion-mnist" else 50_000
    dp = len(FIG7_EPSILONS) * p["epochs"] * n
    teach = p["teacher_epochs"] * (n // p["teachers"]) * p["teachers"]
    ref = p["teacher_epochs"] * n
    rate = H100_EXAMPLES_PER_S
    minutes = (dp / rate["dpsgd"] + teach / rate["teachers"] + ref / rate["reference"]) / 60
    return (f"The paper's settings (ResNet-20, {n:,} images, DP-SGD {p['epochs']} epochs at {len(FIG7_EPSILONS)} "
            f"epsilons, {p['teachers']} teachers of {p['teacher_epochs']} epochs each) need {dp / 1e6:.0f} million "
            f"per-example gradients and {teach / 1e6:.0f} million ordinary ones: a GPU job (bench/figure7_deep.sh). "
            f"At the ~50 examples/s of one CPU core for ResNet-20 per-example gradients that would take about "
            f"{dp / 50 / 86400:.0f} days; on one H100 {'about' if dataset == 'fashion-mnist' else 'at least'} "
            f"{minutes:.0f} minutes (rates measured on Fashion-MNIST with fewer epochs; docs/gpu.md has the results "
            f"of that run).")


# ---------------------------------------------------------------- results shown before anyone trains

#: What the paper reports for its Figure 7 (CIFAR-10, ResNet-20 with GroupNorm, delta = 1e-5), in words: the
#: project has no offline CIFAR-10, so these are the paper's statements, not numbers computed here.
PAPER_FINDINGS = (
    "**The paper's Figure 7 (CIFAR-10).** ResNet-20 with group normalisation, δ = 1e-5; DP-SGD 100 epochs, "
    "each teacher 500 epochs, batch 600, learning rate 0.1 divided by 10 three times, flips and random crops.\n\n"
    "- Subsample-and-aggregate beats DP-SGD **only for a small number of queries B and a large ε**.\n"
    "- At ε = 1, DP-SGD wins from about **B = 5** queries on.\n"
    "- DP-SGD's model answers any number of queries at one privacy cost, so its curve is flat in B; every "
    "teacher-vote answer spends privacy, so those curves fall as B grows.")


#: Under a shipped run drawn before DP-SGD's and the votes' noise had exact tails.
OLD_SAMPLERS_NOTE = ("**Cite these curves as accuracies of the methods, not as ε-DP releases of this code.** The "
                     "runs predate two fixes: they drew noise with samplers whose tails stop (DP-SGD's float32 "
                     "normals at 5.77 standard deviations), and DP-SGD summed its clipped gradients with no bound on "
                     "float32 rounding, so their ε held for the ideal mechanisms, not for the arithmetic used. "
                     "Training below uses exact tails and bounded sums (Limits in the project's docs: "
                     "\"Floating-point noise\" and \"Floating-point sums\").")


def drawn_before_exact_tails(rows: list[dict]) -> bool:
    """:func:`privcore.deep.shipped.drawn_before_exact_tails`."""
    from privcore.deep.shipped import drawn_before_exact_tails as before

    return before(rows)


def shipped() -> list:
    """The Figure 7 runs shipped in docs/figures (:mod:`privcore.deep.shipped`), the paper's epochs first."""
    from privcore.deep.shipped import shipped_runs

    return shipped_runs()


def epochs_settings(epochs: int | None, teacher_epochs: int | None) -> dict[str, int]:
    """A chart caption's epochs, each named (the paper preset's where a shipped run's name says none): a run
    labelled "teachers 50" read as 50 teachers, where it meant 50 epochs of each of 16 teachers."""
    from privcore.deep.spec import PRESETS

    paper = PRESETS["paper"]
    return {"epochs": paper["epochs"] if epochs is None else int(epochs),
            "teacher epochs": paper["teacher_epochs"] if teacher_epochs is None else int(teacher_epochs)}


def shipped_rows(run) -> tuple[list[dict], list[dict]] | None:  # noqa: ANN001
    """(panel a's rows at B = FIG7_B, panel b's rows) of a shipped run, or None after saying why not."""
    from privcore.deep.shipped import read_rows
    from privcore.deep.spec import FIG7_B

    try:
        return panel_rows(read_rows(run.panel_a), FIG7_B), read_rows(run.panel_b)
    except ValueError as err:
        st.error(escape_markdown(server_safe(err)))
        return None


def lead_text(rows_b: list[dict]) -> str:
    """Where subsample-and-aggregate leads DP-SGD in panel (b)'s rows, in words (empty without both)."""
    acc = {}
    for r in rows_b:
        if r["method"] in ("dpsgd", "subsample_aggregate"):
            acc.setdefault(int(r["budget"]), {})[r["method"]] = float(r["accuracy_mean"])
    both = sorted(b for b, v in acc.items() if len(v) == 2)
    if not both:
        return ""
    ahead = [b for b in both if acc[b]["subsample_aggregate"] > acc[b]["dpsgd"]]
    if not ahead:
        return f"Here DP-SGD leads at every B from {both[0]:,} to {both[-1]:,}."
    first = ahead[0]
    at_first = "" if len(ahead) == 1 else f" at B = {first:,}"  # one B: named already
    text = (f"Here subsample-and-aggregate leads DP-SGD at B = {', '.join(f'{b:,}' for b in ahead)} "
            f"({acc[first]['subsample_aggregate']:.3f} against {acc[first]['dpsgd']:.3f}{at_first})")
    after = [b for b in both if b > ahead[-1]]
    return text + (f"; DP-SGD from B = {after[0]:,} on." if after else ".")


#: CPU seconds of both panels of the cpu-small preset on Fashion-MNIST from a fresh cache on one thread (data read and
#: training; ``PRIVCORE_THREADS=1``, the 2-core development machine; docs/benchmarks.md). The wall time of a
#: run is this times :func:`privcore.engine.cost.slowdown`: 55 s measured beside other jobs had been shown for
#: every machine, where a run on two idle cores took about 20 s.
CPU_SMALL_SECONDS = 35.0


def estimate_text(preset: str, dataset: str, missing: int, total: int) -> str:
    """How long training the ``missing`` of ``total`` points should take here: the measured one-thread CPU time,
    at the speed the threads get beside the jobs running now (:func:`privcore.engine.cost.slowdown`)."""
    if not missing:
        return ""
    share = missing / max(total, 1)
    if preset == "cpu-small":
        from privcore.engine.cost import slowdown

        seconds = max(CPU_SMALL_SECONDS * share * slowdown(), 5.0)
        how = "about" if dataset == "fashion-mnist" else "at least"  # larger images than the ones measured
        return (f"Estimated time: {how} {fmt_seconds(seconds)} on this CPU, at its load now (both panels are "
                f"{CPU_SMALL_SECONDS:.0f} s of one core's work on Fashion-MNIST).")
    return gpu_work_text(dataset)
