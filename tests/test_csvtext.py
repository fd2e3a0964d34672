"""privcore.csvtext: CSV numbers are short (no binary noise) yet keep every real digit; every CSV
writer (dashboard downloads, the sweep, deep and leakage CLIs) uses it."""

from __future__ import annotations

import csv
import io
import math

import numpy as np
import pytest

from privcore.csvtext import csv_cell, csv_text, number_text

NOISY = 0.12065000000000001  # what 0.1 * 1.2065 style arithmetic leaves behind


@pytest.mark.parametrize("value, text", [
    (NOISY, "0.12065"), (0.1 + 0.2, "0.3"), (np.float64(NOISY), "0.12065"), (np.float32(0.1), "0.1"),
    (3.1e-12, "3.1e-12"), (1.2345678901e-300, "1.2345678901e-300"),  # small p-values / deltas keep their digits
    (4000.0, "4000.0"), (1e16 + 2, "1.0000000000000002e+16"), (2 ** 60, str(2 ** 60)), (np.int64(7), "7"),
    (math.inf, "inf"), (-math.inf, "-inf"), (math.nan, "nan"), (0.5, "0.5"), (1e-5, "1e-05"),
])
def test_number_text(value, text):
    assert number_text(value) == text


def test_rounding_never_moves_a_value_by_more_than_its_last_noise_digits():
    rng = np.random.default_rng(0)
    for x in rng.random(200) * 10.0 ** rng.integers(-12, 6, 200):
        assert float(number_text(float(x))) == pytest.approx(float(x), rel=1e-11)


def test_csv_cell_and_text():
    assert csv_cell(None) == "" and csv_cell(True) is True and csv_cell("a, b") == "a, b"
    assert csv_cell(math.nan, nan="") == "" and csv_cell([NOISY, 2]) == "0.12065; 2"
    text = csv_text([{"a": NOISY, "b": None, "c": "x,y", "extra": 1}], ["a", "b", "c"])
    assert text == 'a,b,c\n0.12065,,"x,y"\n'


def test_sweep_cli_csv_is_short():
    from privcore.engine.cli_sweep import format_rows

    out = format_rows([{"method": "m", "epsilon": 1.0, "accuracy_mean": NOISY, "accuracy_std": 0.1 + 0.2,
                        "delta": 1e-5, "n": 4000}], "csv")
    row = next(csv.DictReader(io.StringIO(out)))
    assert row["accuracy_mean"] == "0.12065" and row["accuracy_std"] == "0.3"
    assert row["delta"] == "1e-05" and row["n"] == "4000" and row["epsilon"] == "1.0"


def test_deep_cli_csv_is_short():
    from privcore.deep.cli import write_rows
    from privcore.deep.spec import DeepRow

    row = DeepRow(dataset="fashion", model="cnn", method="m", epsilon=1.0, delta=1e-5, budget=10, teachers=None,
                  accounting="rdp", n_train=100, n_test=50, accuracy_mean=NOISY, accuracy_std=0.1 + 0.2, repeats=2,
                  seconds=1.2345678901234567, device="cpu")
    parsed = next(csv.DictReader(io.StringIO(write_rows([row]))))
    assert parsed["accuracy_mean"] == "0.12065" and parsed["accuracy_std"] == "0.3"
    assert parsed["seconds"] == "1.23456789012" and parsed["teachers"] == "" and parsed["n_train"] == "100"


def test_leakage_cli_csv_is_short(monkeypatch, capsys):
    from privcore.cli import main
    from privcore.leakage import cli as leakage_cli
    from privcore.leakage import run as leakage_run

    monkeypatch.setattr(leakage_run, "run_leakage", lambda spec, use_cache=True: None)
    monkeypatch.setattr(leakage_cli, "leakage_rows", lambda results, attack: [
        {"method": "m", "accuracy": NOISY, "eps_lower": 0.0, "lira_auc": 0.1 + 0.2, "p_value": 3.1e-12,
         "epsilon": math.inf, "cached": False}])
    assert main(["leakage", "--method", "model_sensitivity", "--epsilon", "1", "--format", "csv",
                 "--dataset", "digits", "--no-cache"]) == 0
    row = next(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert row == {"method": "m", "accuracy": "0.12065", "eps_lower": "0.0", "lira_auc": "0.3",
                   "p_value": "3.1e-12", "epsilon": "inf", "cached": "False"}
