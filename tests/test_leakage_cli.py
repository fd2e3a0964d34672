"""``python -m privcore leakage``: JSON/CSV rows, attack column selection, bad input exits 2."""

from __future__ import annotations

import csv
import io
import json

import pytest

from privcore.cli import main

SMALL = ["--dataset", "digits", "--n", "200", "--dim", "16", "--references", "8", "--canaries", "8",
         "--audit-trials", "32", "--repeats", "2", "--no-cache"]


@pytest.mark.slow
def test_json_and_csv(capsys):
    assert main(["leakage", "--method", "non_private,prediction_sensitivity", "--epsilon", "3", "--budget", "5",
                 "--roc", *SMALL]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == ["non_private", "prediction_sensitivity"]
    assert rows[0]["epsilon"] == "inf" and rows[1]["epsilon"] == 3.0
    assert {"lira_auc", "loss_auc", "canary_auc", "eps_lower"} <= set(rows[1])
    assert set(rows[1]["roc"]) == {"loss", "lira", "canary"}
    assert main(["leakage", "--method", "model_sensitivity", "--epsilon", "1", "--attack", "canary",
                 "--format", "csv", *SMALL]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert len(table) == 1 and "canary_auc" in table[0] and "lira_auc" not in table[0]


@pytest.mark.parametrize("argv, match", [
    (["leakage", "--method", "nope", "--epsilon", "1"], "unknown method"),
    (["leakage", "--epsilon", "-1", *SMALL], "epsilon"),
    (["leakage", "--method", "dpsgd", "--epsilon", "1", "--batch-size", "500", *SMALL], "batch_size must be at most"),
    (["leakage", "--epsilon", "1", *SMALL, "--references", "1"], "references"),
    # every requested method needs delta > 0: once an empty table '[]' and exit 0
    (["leakage", "--method", "dpsgd", "--epsilon", "1", "--delta", "0", *SMALL], "none of the requested methods"),
])
def test_bad_input_exits_2(capsys, argv, match):
    assert main(argv) == 2
    assert match in capsys.readouterr().err


def test_roc_with_csv_is_refused_before_any_attack(monkeypatch, capsys):
    # Once: every attack ran (minutes), then --roc was silently dropped from the CSV.
    from privcore.leakage import run as leakage_run

    monkeypatch.setattr(leakage_run, "run_leakage", lambda *a, **k: (_ for _ in ()).throw(AssertionError("ran")))
    assert main(["leakage", "--epsilon", "1", "--roc", "--format", "csv", *SMALL]) == 2
    assert "--roc adds ROC points to the JSON output" in capsys.readouterr().err


def test_the_skip_note_names_every_method_that_needs_delta(monkeypatch, capsys):
    # Once: "dpsgd skipped" whatever was skipped (the vote methods need delta > 0 too).
    from privcore.leakage import run as leakage_run

    monkeypatch.setattr(leakage_run, "run_leakage", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("stop")))
    with pytest.raises(RuntimeError, match="stop"):
        main(["leakage", "--epsilon", "1", "--delta", "0", "--method", "confident_gnmax,model_sensitivity", *SMALL])
    err = capsys.readouterr().err
    assert "note: confident_gnmax skipped: it needs delta > 0" in err and "dpsgd" not in err


def test_the_audit_trials_typed_are_checked_as_the_library_checks_them(capsys):
    """A bad-input hunt: for a method that trains once the CLI multiplied the value by 8 before the check, so
    --audit-trials 1 ran while the library refuses it ([4, 100000])."""
    from privcore.cli import main

    assert main(["leakage", "--dataset", "digits", "--method", "model_sensitivity", "--epsilon", "1",
                 "--audit-trials", "1"]) == 2
    assert "audit_trials must be an integer in [4, 100000], got 1" in capsys.readouterr().err
