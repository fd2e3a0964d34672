"""A method is one file (issue 31, item 3): its mechanism, its card and its own result fields.

The toy method below lives in this test file alone. It declares a calibrated number of its own (on its
noise scale, shown as a column) and a measured one, and is registered through the registry's seam
(:func:`privcore.methods.register`). With no other module edited, its numbers reach the cached and
re-read rows, the CLI's CSV and JSON, the results export and import, the CSV download and the
dashboard's noise tables; unregistered, every column list is as before. A second test fails when a
module outside privcore/methods/ (and the accountants) names a method's own field again.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path

import pytest

from privcore.methods import REGISTRY, MethodCard, ResultField, register, unregister
from privcore.methods.base import Method, WinContext
from privcore.types import NoiseScale, PrivacyBudget, Problem

ROOT = Path(__file__).resolve().parents[2]

COIN_BIAS = ResultField("coin_bias", "Coin bias", "bias", "the toy's calibrated coin bias", high=1.0, on_scale=True)
ZERO_SHARE = ResultField("toy_zero_share", "Zero share", "zeros", "share of the toy's answers that are label 0",
                         high=1.0, percent=True)


class ToyZero(Method):
    """Answers every query with label 0 (ignores the data: epsilon-DP for every epsilon)."""

    name = "toy_zero"
    card = MethodCard(label="Toy zero", short_label="Zero", sentence_label="the toy answering 0", colour="#101010",
                      summary="Answers 0 to every query.")
    family = "prediction"
    uses = ("budget",)
    uses_budget = True
    releases = "labels"
    result_fields = (COIN_BIAS, ZERO_SHARE)
    scale_fields = (COIN_BIAS,)

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
    assert Mixed.card.label == "Toy zero"


#: Modules outside privcore/methods/ and privcore/accounting/ (the accountants may read a method's noise
#: numbers) that still name a method's own field, and why; every other module must read the declarations.
KNOWN = {
    # The deep pipeline's typed row (privcore.deep.spec.DeepRow, its shipped Figure 7 file and the run that
    # fills it) has its own answered share and threshold columns: not yet generic.
    "privcore/deep/run.py": {"answered_fraction", "threshold"},
    "privcore/deep/spec.py": {"answered_fraction", "threshold"},
    "privcore/deep/shipped.py": {"answered_fraction", "threshold"},
    # The forward calculator (epsilon from given noise numbers) lists, per method, which numbers to ask for.
    "privcore/cli_forward.py": {"threshold", "test_noise", "cap"},
    "ui/forward.py": {"threshold", "test_noise", "cap"},
}
#: Homonyms: a local name or another object's attribute that only shares a field's name (never quoted).
HOMONYMS = {
    "privcore/audit.py": {"threshold"},          # an audit's decision threshold
    "privcore/recommend.py": {"threshold"},      # the recommendation's significance threshold
    "app_pages/explore.py": {"threshold"},       # rec.threshold, the same
    "privcore/leakage/sizes.py": {"cap"},        # a cap on observed answers
    "privcore/leakage/run.py": {"cap"},          # the same
}


def _offences(files) -> list[str]:
    """Lines of ``files`` that name a registered method's own field (quoted anywhere; as an attribute,
    keyword or assignment unless a known homonym), outside the modules allowed to (:data:`KNOWN`)."""
    from privcore.methods.fields import declared_result_fields, declared_scale_fields

    words = "|".join(sorted({f.name for f in declared_result_fields() + declared_scale_fields()}))
    quoted = re.compile(rf"""(["'])({words})\1""")
    bare = re.compile(rf"""\.({words})\b|\b({words})\s*=(?!=)""")
    found = []
    for rel, text in files:
        for number, line in enumerate(text.splitlines(), 1):
            code = "" if line.lstrip().startswith("#") else line.split("  #", 1)[0]
            hits = {m.group(2) for m in quoted.finditer(code)}
            hits |= {m.group(1) or m.group(2) for m in bare.finditer(code)} - HOMONYMS.get(rel, set())
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
           ("privcore/recommend.py", 'x = r["threshold"]')]
    assert len(_offences(bad)) == 4
    fine = [("privcore/recommend.py", "    threshold = significance_threshold(a, b, reps)"),
            ("privcore/engine/rows.py", "    # ``row.answered_fraction`` reads the declared field")]
    assert _offences(fine) == []
