"""The DP-SGD calibration table shipped with privcore (privcore/accounting/bundle.py).

It must match the code (a change to the calibration code makes every key stale: regenerate with
``python -m privcore.accounting.bundle``), hold what the accountant answers, and a tampered entry
must be refused by the independent re-check and recomputed, as for the user's memo.
"""

from __future__ import annotations

import json
import shutil

import pytest

from privcore.accounting import bundle, dpsgd, memo
from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one

REGENERATE = "the shipped table no longer matches the calibration code: run python -m privcore.accounting.bundle"


@pytest.fixture
def table() -> dict:
    data = json.loads(bundle.BUNDLED_PATH.read_text(encoding="utf-8"))
    if data.get("versions") != memo.library_versions():
        pytest.skip(f"the table was computed with {data.get('versions')}, installed: {memo.library_versions()} "
                    "(its keys cannot match here; requirements.txt pins the versions it was built with)")
    return data


def test_the_table_matches_the_code_and_covers_the_sliders(table):
    current = {memo.key("dpsgd_noise_multiplier", args): args for args in bundle.settings()}
    entries = table["entries"]
    assert entries and set(entries) <= set(current), REGENERATE
    missing = [current[k] for k in current if k not in entries]
    # Left out only where the re-check cannot judge a multiplier (below 0.1: epsilon in the hundreds).
    assert all(args[0] >= 100 for args in missing), missing[:3]
    assert len(entries) >= 0.9 * len(current)
    assert bundle.covers("mnist-5k") and bundle.covers("digits") and not bundle.covers("fashion-mnist")


def test_the_train_sizes_are_the_loaders():
    from privcore.data import load_dataset

    assert {name: load_dataset(name).n for name in bundle.DATASETS} == bundle.TRAIN_SIZES


@pytest.mark.parametrize("index", [0, 57, 170, 250, -20])
def test_an_entry_is_what_the_accountant_answers(table, index):
    args = bundle.settings()[index]
    z = memo.bundled_value("dpsgd_noise_multiplier", args)
    assert z is not None
    eps, delta, q, steps, rel, rel_tol, grid = args
    assert dpsgd._pld_noise_multiplier(eps, delta, q, steps, rel, rel_tol, grid) == z
    # An independent upper bound (the fine grid, not the search's) also meets the target.
    assert dpsgd_epsilon_replace_one(z, q, steps, delta) <= eps


def _fresh(*args, **kw) -> float:
    dpsgd.dpsgd_noise_multiplier.cache_clear()
    dpsgd._pld_epsilon.cache_clear()
    return dpsgd.dpsgd_noise_multiplier(*args, **kw)


def test_a_lookup_in_the_table_calls_no_accountant(table, tmp_path, monkeypatch, accountant_calls):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))  # an empty user memo
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.delenv("PRIVCORE_CALIBRATION_BUNDLE", raising=False)
    args = bundle.settings()[60]
    z = memo.bundled_value("dpsgd_noise_multiplier", args)
    assert _fresh(*args[:4]) == z and accountant_calls == []
    monkeypatch.setenv("PRIVCORE_CALIBRATION_BUNDLE", "off")
    assert _fresh(*args[:4]) == z and accountant_calls  # switched off: the accountant answers, the same


@pytest.mark.parametrize("factor", [0.5, 0.97])
def test_a_tampered_entry_is_refused_and_recomputed(table, tmp_path, monkeypatch, accountant_calls, factor):
    """A copy of the table with one multiplier lowered and its checksum rewritten (what a hand edit
    or a bad rebuild would give): the re-check refuses it, the accountant recomputes the true one."""
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.delenv("PRIVCORE_CALIBRATION_BUNDLE", raising=False)
    args = bundle.settings()[60]
    true_z = memo.bundled_value("dpsgd_noise_multiplier", args)
    copy = tmp_path / "bundled.json"
    shutil.copy(bundle.BUNDLED_PATH, copy)
    data = json.loads(copy.read_text())
    k = memo.key("dpsgd_noise_multiplier", args)
    data["entries"][k] = [true_z * factor, memo.checksum(k, true_z * factor)]
    copy.write_text(json.dumps(data))
    monkeypatch.setattr(bundle, "BUNDLED_PATH", copy)
    assert memo.bundled_value("dpsgd_noise_multiplier", args) == true_z * factor  # it passes the checksum
    with pytest.warns(RuntimeWarning, match="independent check finds it too small"):
        got = _fresh(*args[:4])
    assert got == true_z and accountant_calls
