"""A method is one file (issue 31, item 3): its mechanism, its card and its own result fields.

The toy method below lives in this test file alone. It declares a calibrated number of its own (on its
noise scale, shown as a column) and a measured one, and is registered through the registry's seam
(:func:`privcore.methods.register`). With no other module edited, its numbers reach the cached and
re-read rows, the CLI's CSV and JSON, the results export and import, the CSV download and the
dashboard's noise tables; unregistered, every column list is as before. By declaring its noise inputs
and a ``spent_epsilon`` hook it gets the forward calculator ("what ε does this noise give?") of the CLI
and the Calibrate page. A further test fails when a module outside privcore/methods/ (and the
accountants) names a method's own field again.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from privcore.methods import REGISTRY, MethodCard, NoiseInput, ResultField, register, unregister
from privcore.methods.base import Method, WinContext
from privcore.methods.forward import ForwardAccounting, noise_value
from privcore.types import NoiseScale, PrivacyBudget, Problem

ROOT = Path(__file__).resolve().parents[2]

COIN_BIAS = ResultField("coin_bias", "Coin bias", "bias", "the toy's calibrated coin bias", high=1.0, on_scale=True)
ZERO_SHARE = ResultField("toy_zero_share", "Zero share", "zeros", "share of the toy's answers that are label 0",
                         high=1.0, percent=True)


class ToyZero(Method):
    """Answers every query with label 0 (ignores the data: epsilon-DP for every epsilon)."""

    name = "toy_zero"
    card = MethodCard(label="Toy zero", short_label="Zero", sentence_label="the toy answering 0", colour="#101010",
                      marker="pentagon", dash="2px,2px", summary="Answers 0 to every query.")
    family = "prediction"
    uses = ("budget",)
    uses_budget = True
    releases = "labels"
    result_fields = (COIN_BIAS, ZERO_SHARE)
    scale_fields = (COIN_BIAS,)
    # Its forward direction: the number to ask for and the epsilon its (toy) accountant gives for it.
    noise_inputs = (NoiseInput.of(COIN_BIAS, "coin bias b"),)  # its name, range and help from the field
    accountant = ("", "the toy's coin: b / (1 - b)")

    def spent_epsilon(self, noise, problem, delta, accounting):
        b = noise_value(noise, "coin_bias")
        return b / (1.0 - b) if b < 1.0 else float("inf")

    def _calibrate(self, budget: PrivacyBudget, problem: Problem, accounting: str) -> NoiseScale:
        bias = budget.epsilon / (1.0 + budget.epsilon)
        return NoiseScale(self.name, budget.epsilon, budget.delta, accounting, "exponential_mechanism", beta=0.0,
                          extras={"coin_bias": bias}, formula="the answer ignores the data")

    def release(self, ctx, scales, repeats, queries=None):
        import torch

        m = (ctx.x_test if queries is None else queries).shape[0]
        return torch.zeros(len(scales), repeats, m, dtype=torch.int64, device=ctx.device)

    def measure(self, ctx, scales, repeats):
        out = self.release(ctx, scales, repeats)
        acc = (out == ctx.y_test).double().mean(dim=2).cpu().numpy()
        zeros = (out == 0).double().mean(dim=(1, 2)).cpu().numpy()
        return acc, [{"toy_zero_share": float(z)} for z in zeros]

    def win_reason(self, s: WinContext) -> str:
        return "the toy answers 0"


@pytest.fixture
def toy():
    from privcore.engine.rows import result_columns

    before = result_columns()
    method = register(ToyZero())
    try:
        yield method
    finally:
        unregister(method.name)
    assert result_columns() == before  # unregistered, the columns are as they were
    from privcore.cli_forward import noise_flags

    assert "coin_bias" not in noise_flags()  # and the CLI has no flag of its own


def _spec():
    from privcore.engine.specs import DataSpec, SweepSpec

    return SweepSpec(data=DataSpec(name="digits"), methods=("toy_zero", "model_sensitivity"), epsilons=(1.0, 3.0),
                     delta=1e-5, repeats=2, budget=10)


def test_a_toy_methods_own_fields_reach_rows_cache_cli_exports_and_tables(toy, tmp_path, monkeypatch, capsys):
    from privcore import methods
    from privcore.cli import main
    from privcore.engine.cache import ResultCache, check_result
    from privcore.engine.cli_results import export_results, import_results
    from privcore.engine.rows import result_columns
    from privcore.engine.runner import read_cached, run_sweep

    assert "toy_zero" in methods.METHOD_NAMES and list(methods.ENTRIES)[-1] == "non_private"
    cols = result_columns()
    assert cols.index("coin_bias") > cols.index("epsilon_dd_published") and "toy_zero_share" in cols

    # A sweep: its rows carry the toy's numbers; other methods' rows read None there.
    cache = ResultCache(tmp_path / "cache")
    res = run_sweep(_spec(), cache=cache)
    toys = [r for r in res.rows if r.method == "toy_zero"]
    assert [r.epsilon for r in toys] == [1.0, 3.0]
    assert [r["coin_bias"] for r in toys] == [0.5, 0.75] and all(r.toy_zero_share == 1.0 for r in toys)
    assert list(toys[0].to_dict()) == list(cols) and toys[0].to_dict()["toy_zero_share"] == 1.0
    other = next(r for r in res.rows if r.method == "model_sensitivity")
    assert other["toy_zero_share"] is None and other.to_dict()["coin_bias"] is None

    # Cached as plain numbers and read back the same, by a second run and by read_cached.
    stored = [cache.get(k) for k in cache.keys()]
    mine = [v for v in stored if v["scale"].get("coin_bias") is not None]
    assert len(mine) == 2 and all(v["toy_zero_share"] == 1.0 for v in mine)
    assert check_result({**mine[0], "toy_zero_share": 1.5}) is not None  # out of its declared range: a miss
    assert check_result({**mine[0], "scale": {**mine[0]["scale"], "coin_bias": -1.0}}) is not None
    for again in (run_sweep(_spec(), cache=ResultCache(tmp_path / "cache")), read_cached(_spec(), cache)):
        back = [r for r in again.rows if r.method == "toy_zero"]
        assert all(r.cached for r in back)
        assert [r.to_dict() | {"seconds": 0, "cached": 0} for r in back] == \
               [r.to_dict() | {"seconds": 0, "cached": 0} for r in toys]

    # The results file carries them and imports into another cache (its scale recalibrated and checked).
    out = tmp_path / "points.jsonl"
    assert export_results(out, cache)[0] == len(stored)
    assert '"toy_zero_share": 1.0' in out.read_text()
    assert import_results(out, ResultCache(tmp_path / "other"))[0] == len(stored)

    # The CLI's sweep output, CSV and JSON.
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    args = ["sweep", "--dataset", "digits", "--methods", "toy_zero", "--epsilons", "1", "--delta", "1e-5",
            "--repeats", "2", "--budget", "10", "--quiet"]
    assert main(args) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert float(table[0]["coin_bias"]) == 0.5 and float(table[0]["toy_zero_share"]) == 1.0
    assert main([*args, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["toy_zero_share"] == 1.0

    # The dashboard's CSV download and noise tables.
    from ui.export import rows_csv
    from ui.tables import calibration_table, noise_table, noise_table_config

    header = rows_csv(res.rows).decode().splitlines()[0].split(",")
    assert header.index("coin_bias") < header.index("toy_zero_share") < header.index("real_epsilon")
    frame = noise_table(res.rows)
    line = frame[frame["Method"] == "Toy zero"].iloc[0]
    assert line["Zero share"] == "100.0%" and line["Coin bias"] == "0.5"
    assert frame[frame["Method"] == "Model sensitivity"].iloc[0]["Zero share"] == "-"
    config = noise_table_config(frame.columns)
    assert config["Zero share"]["label"] == "zeros" and "share of the toy" in config["Zero share"]["help"]
    cal = calibration_table({"toy_zero": toy.calibrate(PrivacyBudget(1.0, 1e-5), Problem())})
    assert cal.iloc[0]["Coin bias"] == "0.5"


def _forward_page(epsilon):
    """The Calibrate page's "What ε does this noise give?" for the toy's calibration (an AppTest script)."""
    from privcore.methods import get_method
    from privcore.types import PrivacyBudget, Problem
    from ui.forward import forward_section

    problem = Problem()
    forward_section({"toy_zero": get_method("toy_zero").calibrate(PrivacyBudget(epsilon, 1e-5), problem)}, problem,
                    1e-5, "corrected")


def test_a_toy_method_gets_a_forward_calculator_from_its_declarations(toy, capsys):
    """Declaring noise inputs and a spent_epsilon hook (nothing else edited) gives the toy the CLI's flag and
    output, the Calibrate page's input, the accountant's name and the real epsilon of a paper row."""
    from streamlit.testing.v1 import AppTest

    from privcore.accounting.forward import accountant_text, real_guarantee, spent_epsilon
    from privcore.cli import main
    from ui.forward import noise_inputs

    problem = Problem()
    scale = toy.calibrate(PrivacyBudget(1.0, 1e-5), problem)
    assert noise_inputs(scale) == {"noise": "exponential_mechanism", "coin_bias": 0.5}
    assert spent_epsilon("toy_zero", toy.forward_noise(noise_inputs(scale), problem), problem, 1e-5) == 1.0
    assert accountant_text("toy_zero", 1e-5) == "the toy's coin: b / (1 - b)"

    # The CLI: its own flag, the epsilon of its hook, the number given; out of range or another method's
    # noise is a one-line error naming what to give.
    assert main(["epsilon", "--method", "toy_zero", "--coin-bias", "0.75", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["epsilon"] == 3.0 and out["coin_bias"] == 0.75 and out["accountant"].startswith("the toy's coin")
    assert main(["epsilon", "--method", "toy_zero", "--coin-bias", "1.5"]) == 2
    assert "coin_bias" in capsys.readouterr().err
    assert main(["epsilon", "--method", "toy_zero", "--sigma", "1"]) == 2
    err = capsys.readouterr().err
    assert "--coin-bias" in err and "sigma" in err
    assert main(["epsilon", "--method", "model_sensitivity", "--coin-bias", "0.5"]) == 2  # not its noise

    # A paper row's real epsilon is the hook's too.
    paper = toy.calibrate(PrivacyBudget(3.0, 1e-5), problem, "paper")
    assert real_guarantee("toy_zero", paper.to_dict(), problem, 1e-5, "paper")[0] == pytest.approx(3.0)

    # The Calibrate page: the toy is offered, its input filled with the calibrated bias, edited to 0.75.
    at = AppTest.from_function(_forward_page, args=(1.0,), default_timeout=30).run()
    assert not at.exception
    assert at.selectbox(key="forward_method").value == "toy_zero"
    box = at.number_input(key="forward_toy_zero_coin_bias")
    assert box.value == 0.5 and box.label == "coin bias b"
    assert any(m.value.startswith("**ε = 1**") for m in at.markdown)
    box.set_value(0.75).run()
    assert any(m.value.startswith("**ε = 3**") for m in at.markdown)


def test_the_registry_refuses_a_method_that_breaks_its_declarations():
    class Mixed(ToyZero):
        pass

    with pytest.raises(TypeError, match="card"):
        type("Labelled", (ToyZero,), {"label": "set on the class"})  # presentation belongs in the card
    with pytest.raises(ValueError, match="registered already"):
        register(REGISTRY["model_sensitivity"])
    clash = type("Clash", (ToyZero,), {"name": "toy_clash", "result_fields": (
        ResultField("toy_zero_share", "Other", "o", "another meaning", high=None),), "scale_fields": ()})
    with pytest.raises(ValueError, match="toy_zero_share"):
        register(ToyZero())
        try:
            register(clash())  # one name, two meanings
        finally:
            unregister("toy_zero")
    abstaining = type("Abstains", (ToyZero,), {"name": "toy_abstains", "abstains": True})
    with pytest.raises(ValueError, match="ABSTENTION_FIELDS"):
        register(abstaining())
    unscaled = type("Unscaled", (ToyZero,), {"name": "toy_unscaled", "scale_fields": ()})
    with pytest.raises(ValueError, match="coin_bias"):
        register(unscaled())
    unaccounted = type("Unaccounted", (ToyZero,), {"name": "toy_unaccounted",
                                                   "spent_epsilon": ForwardAccounting.spent_epsilon})
    with pytest.raises(ValueError, match="spent_epsilon"):  # inputs without the hook: no forward calculator
        register(unaccounted())
    with pytest.raises(TypeError, match="noise_inputs"):
        register(type("Listed", (ToyZero,), {"name": "toy_listed", "noise_inputs": [ToyZero.noise_inputs[0]]})())
    assert Mixed.card.label == "Toy zero"


#: Modules outside privcore/methods/ and privcore/accounting/ (the accountants may read a method's noise
#: numbers) that still name a method's own field, and why; every other module must read the declarations.
#: None is left: the deep pipeline's rows carry the declared fields (privcore.deep.spec.row_fields) and the
#: forward calculator asks for each method's declared noise inputs (privcore.methods.forward).
KNOWN: dict[str, set[str]] = {}
#: Homonyms: a local name or another object's attribute that only shares a field's name (never quoted).
HOMONYMS = {
    "privcore/audit.py": {"threshold"},          # an audit's decision threshold
    "privcore/recommend.py": {"threshold"},      # the recommendation's significance threshold
    "app_pages/explore.py": {"threshold"},       # rec.threshold, the same
    "privcore/leakage/sizes.py": {"cap"},        # a cap on observed answers
    "privcore/leakage/run.py": {"cap"},          # the same
    "privcore/leakage/stats.py": {"threshold"},  # an audit's decision threshold (a field of its estimate)
}


def _offences(files) -> list[str]:
    """Lines of ``files`` that name a registered method's own field (quoted anywhere; as an attribute,
    keyword, assignment or annotated name unless a known homonym), outside the modules allowed to (:data:`KNOWN`)."""
    from privcore.methods.fields import declared_result_fields, declared_scale_fields

    words = "|".join(sorted({f.name for f in declared_result_fields() + declared_scale_fields()}))
    quoted = re.compile(rf"""(["'])({words})\1""")
    bare = re.compile(rf"""\.({words})\b|\b({words})\s*=(?!=)|^\s*({words})\s*:""")
    found = []
    for rel, text in files:
        for number, line in enumerate(text.splitlines(), 1):
            code = "" if line.lstrip().startswith("#") else line.split("  #", 1)[0]
            hits = {m.group(2) for m in quoted.finditer(code)}
            hits |= {m.group(1) or m.group(2) or m.group(3) for m in bare.finditer(code)} - HOMONYMS.get(rel, set())
            hits -= KNOWN.get(rel, set())
            if hits:
                found.append(f"{rel}:{number}: {sorted(hits)}: {line.strip()[:90]}")
    return found


def _covered_modules():
    for path in sorted(ROOT.glob("**/*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("privcore/", "ui/", "app_pages/", "app.py")) and not rel.startswith(
                ("privcore/methods/", "privcore/accounting/")):
            yield rel, path.read_text(encoding="utf-8")


def test_no_module_outside_the_methods_names_a_methods_own_field():
    from privcore.methods.fields import declared_result_fields, declared_scale_fields

    names = {f.name for f in declared_result_fields() + declared_scale_fields()}
    assert {"threshold", "answered_fraction", "epsilon_data_dependent", "test_noise", "cap"} <= names
    files = list(_covered_modules())
    assert len(files) > 50 and any(rel == "privcore/engine/runner.py" for rel, _ in files)
    found = _offences(files)
    assert not found, "read the methods' declarations (privcore.methods.fields) instead:\n" + "\n".join(found)


def test_the_scan_catches_a_re_added_field():
    """The known-bad cases: a runner, a table and a page that name a method's field again are caught;
    a homonym where one is known, and a comment, are not."""
    bad = [("privcore/engine/runner.py", 'answered = stored.get("answered_fraction")'),
           ("ui/tables.py", '    "Threshold": format_number(r.get("threshold")),'),
           ("app_pages/explore.py", "shown = row.epsilon_dd_published"),
           ("privcore/recommend.py", 'x = r["threshold"]'),
           # The debts paid (issue 31, item 3): the deep row's own column, the forward calculator's inputs.
           ("privcore/deep/spec.py", "    answered_fraction: float | None = None"),
           ("privcore/deep/run.py", "                  sigma=scale.sigma, threshold=scale.threshold)"),
           ("ui/forward.py", '    "sparse_vector": (("beta", "β"), ("test_noise", "query noise scale")),'),
           ("privcore/cli_forward.py", '               "cap": "sparse vector\'s cap on unstable answers",')]
    assert len(_offences(bad)) == len(bad)
    fine = [("privcore/recommend.py", "    threshold = significance_threshold(a, b, reps)"),
            ("privcore/engine/rows.py", "    # ``row.answered_fraction`` reads the declared field")]
    assert _offences(fine) == []
