"""A light CLI: ``--help`` (``app --help`` too) and ``calibrate`` never import what they do not use.

One fresh interpreter runs every command through ``privcore.cli.main`` and reports which heavy
packages ended up in ``sys.modules``; modules only accumulate, so one import anywhere fails it.
The control run (a sweep's imports) shows the check sees torch when it is there.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from privcore.methods import METHOD_NAMES

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "opacus", "plotly", "pandas", "streamlit")

_PROBE = """
import contextlib, io, json, sys
from privcore.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            codes.append(main(argv))
        except SystemExit as stop:  # --help exits through argparse
            codes.append(stop.code)
for extra in json.loads(sys.argv[2]):
    __import__(extra)
print(json.dumps({"codes": codes, "loaded": sorted({m.split(".")[0] for m in sys.modules})}))
"""


def _probe(commands: list[list[str]], extra_imports: tuple[str, ...] = ()) -> dict:
    out = subprocess.run([sys.executable, "-c", _PROBE, json.dumps(commands), json.dumps(list(extra_imports))],
                         cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_help_and_calibrate_import_no_heavy_package(tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    commands = [["--help"], ["calibrate", "--help"], ["sweep", "--help"], ["leakage", "--help"], ["results", "--help"],
                ["app", "--help"]]
    for method in METHOD_NAMES:
        for delta in ("0", "1e-5"):
            commands.append(["calibrate", "--method", method, "--epsilon", "1", "--delta", delta, "--json"])
    got = _probe(commands)
    assert got["codes"][:6] == [0] * 6
    assert 0 in got["codes"][6:]  # the calibrations ran (DP-SGD at delta = 0 is refused with code 2)
    assert not set(HEAVY) & set(got["loaded"]), sorted(set(HEAVY) & set(got["loaded"]))


#: What a calibration without the replace-one PLD (DP-SGD, Private-kNN) needs: the standard library and numpy only.
ACCOUNTANT_PACKAGES = ("scipy", "dp_accounting")


def test_every_calibration_but_dpsgd_imports_neither_scipy_nor_dp_accounting(tmp_path, monkeypatch):
    # The analytic Gaussian (model and prediction sensitivity), loss perturbation's chi quantile and
    # PATE's zCDP conversion are standard-library code (issue 16): scipy.special alone costs more
    # than the whole pure-DP start-up. Only the replace-one PLD (dp_accounting) of DP-SGD and of
    # Private-kNN (the same subsampled-Gaussian accountant) may load them.
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    commands = [["calibrate", "--method", m, "--epsilon", e, "--delta", d, "--json"]
                for m in METHOD_NAMES if m not in ("dpsgd", "private_knn") for e in ("0.3", "4")
                for d in ("0", "1e-5", "1e-9")]
    got = _probe(commands)
    assert got["codes"].count(0) >= len(METHOD_NAMES) * 2  # Gaussian (delta > 0) calibrations ran
    assert not set(ACCOUNTANT_PACKAGES) & set(got["loaded"]), sorted(set(ACCOUNTANT_PACKAGES) & set(got["loaded"]))


def test_dpsgd_imports_its_accountant_once_then_reads_the_memo(tmp_path, monkeypatch):
    # First call: the replace-one PLD (dp_accounting, scipy) runs; the probe sees the imports.
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.setenv("PRIVCORE_CALIBRATION_BUNDLE", "off")  # the shipped table is tested below
    cmd = ["calibrate", "--method", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--json"]
    got = _probe([cmd])
    assert got["codes"] == [0] and {"scipy", "dp_accounting"} <= set(got["loaded"])
    # The same calibration in a new process: the verified multiplier comes from the memo.
    again = _probe([cmd])
    assert again["codes"] == [0] and not set(ACCOUNTANT_PACKAGES) & set(again["loaded"])


def test_a_first_default_dpsgd_calibration_reads_the_shipped_table(tmp_path, monkeypatch):
    # An empty cache, the table shipped with privcore on: the dashboard's and the CLI's default
    # settings need no accountant even in a first process (privcore/accounting/bundle.py).
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.delenv("PRIVCORE_CALIBRATION_BUNDLE", raising=False)
    cmd = ["calibrate", "--method", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--json"]
    got = _probe([cmd, [*cmd[:4], "0.3", *cmd[5:]]])
    assert got["codes"] == [0, 0] and not set(ACCOUNTANT_PACKAGES) & set(got["loaded"]), got
    # A setting outside the table (another batch size) still runs the accountant.
    other = _probe([[*cmd, "--batch-size", "200"]])
    assert other["codes"] == [0] and "dp_accounting" in other["loaded"]


def test_the_probe_sees_a_heavy_import():
    got = _probe([["--help"]], extra_imports=("privcore.engine.runner",))
    assert "torch" in got["loaded"]
