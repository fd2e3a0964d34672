"""The DP-SGD calibration table shipped with privcore (privcore/accounting/bundle.py).

It must match the code (a change to the calibration code makes every key stale: regenerate with
``python -m privcore.accounting.bundle``), hold what the accountant answers, and a tampered entry
must be refused by the independent re-check and recomputed, as for the user's memo.

"What the accountant answers" is judged by the property that matters, never by float equality: the
FFT inside dp_accounting's PLD differs in the last digits between CPUs (a live search gives
570.71928757 on one x86-64 machine and 570.71927250 on another for the same key), so the suite
checks that this machine's accountant finds the entry meeting its target and not needlessly large,
and that a live search lands on it up to the search's own tolerance.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from privcore.accounting import bundle, dpsgd, memo
from privcore.accounting import table as shipped_table
from privcore.accounting.dpsgd import dpsgd_epsilon_replace_one

REGENERATE = "the shipped table no longer matches the calibration code: run python -m privcore.accounting.bundle"


def _pinned() -> dict[str, str]:
    """The versions requirements.txt pins for the libraries in every key."""
    text = (Path(__file__).resolve().parents[2] / "requirements.txt").read_text(encoding="utf-8")
    pins = dict(line.split("==", 1) for line in text.split() if "==" in line)
    return {name: pins.get(name, "unpinned") for name in memo.library_versions()}


@pytest.fixture
def table() -> dict:
    data = json.loads(bundle.BUNDLED_PATH.read_text(encoding="utf-8"))
    installed = memo.library_versions()
    if installed != _pinned():  # e.g. the GPU image's own libraries: the keys cannot match there
        pytest.skip(f"installed {installed}, not requirements.txt's pins {_pinned()}: the table cannot answer here")
    assert data.get("versions") == installed, "the table was built with other libraries than requirements.txt pins"
    return data


def test_the_table_is_the_one_the_code_names():
    digest = hashlib.sha256(bundle.BUNDLED_PATH.read_bytes()).hexdigest()
    assert digest == bundle.TABLE_SHA256, f"{REGENERATE} (and put the sha256 it prints in table.TABLE_SHA256)"


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


def test_every_entry_meets_its_target_by_the_accountant(table):
    """Each multiplier, by dp_accounting's pessimistic PLD on the search's own grid: epsilon at most
    the target (what the search checked before returning it), and at z (1 - 2 rel_tol) above it,
    so the entry is not needlessly large either. All entries: about 10-20 s."""
    checked = 0
    for args in bundle.settings():
        z = memo.bundled_value("dpsgd_noise_multiplier", args)
        if z is None:
            continue
        eps, delta, q, steps, rel, rel_tol, grid = args
        at = lambda s: dpsgd._pld_epsilon(s, q, steps, delta, rel, dpsgd.pld_interval(eps, steps, s, q, rel, grid))  # noqa: E731
        assert at(z) <= eps, (args, z, at(z))
        assert at(z * (1 - 2 * rel_tol)) > eps, (args, z)
        checked += 1
    assert checked == len(table["entries"])


def _same_root(live: float, z: float, rel_tol: float) -> bool:
    """Whether two answers of the search agree up to its tolerance. Each is within ``rel_tol`` of the
    root on its own machine's accountant, and the machines' roots differ by about 1e-8 relative, so
    two correct answers are within 2 rel_tol (0.2 %) of each other; a wrong entry (1 % off, say) is not."""
    return abs(live - z) <= 2 * rel_tol * z


@pytest.mark.parametrize("index", [0, 57, 170, 250, -20])
def test_an_entry_is_what_the_search_answers(table, index):
    """The live search on this machine lands on the entry up to the search's tolerance; this
    machine's accountant (the search's own grid) finds the entry meeting its target and a multiplier
    2 rel_tol smaller missing it (so not needlessly large), and an independent upper bound (the
    fine grid, not the search's) meets the target too."""
    args = bundle.settings()[index]
    z = memo.bundled_value("dpsgd_noise_multiplier", args)
    assert z is not None
    eps, delta, q, steps, rel, rel_tol, grid = args
    live = dpsgd.pld_noise_multiplier(eps, delta, q, steps, rel, rel_tol, grid)
    assert _same_root(live, z, rel_tol), (args, live, z)
    at = lambda s: dpsgd._pld_epsilon(s, q, steps, delta, rel, dpsgd.pld_interval(eps, steps, s, q, rel, grid))  # noqa: E731
    assert at(z) <= eps, (args, z, at(z))
    assert at(z * (1 - 2 * rel_tol)) > eps, (args, z)
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
    live = _fresh(*args[:4])  # switched off: the accountant answers, the same up to the search's tolerance
    assert accountant_calls and _same_root(live, z, args[5]), (live, z)


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
    monkeypatch.setattr(shipped_table, "BUNDLED_PATH", copy)
    with pytest.warns(RuntimeWarning, match="is not the one"):  # an edited table is not the one the code names
        assert memo.bundled_value("dpsgd_noise_multiplier", args) is None
    # Past that pin too (the code's digest edited as well): the re-check on reading still refuses it.
    monkeypatch.setattr(shipped_table, "TABLE_SHA256", hashlib.sha256(copy.read_bytes()).hexdigest())
    memo._bundled_entries.cache_clear()
    assert memo.bundled_value("dpsgd_noise_multiplier", args) == true_z * factor  # it passes the checksum
    with pytest.warns(RuntimeWarning, match="independent check finds it too small"):
        got = _fresh(*args[:4])
    # The accountant's own answer (equal to the entry up to the search's tolerance on any CPU), not the tampered one.
    assert accountant_calls and _same_root(got, true_z, args[5]) and not _same_root(true_z * factor, got, args[5])



def test_only_replace_one_calibrations_read_the_table(table, tmp_path, monkeypatch):
    """An add/remove entry in the table (build() writes none) is never used: only replace-one answers
    are re-checked on reading. A copy with a tiny add/remove multiplier, its digest pinned: the
    add/remove calibration still comes from the accountant."""
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.delenv("PRIVCORE_CALIBRATION_BUNDLE", raising=False)
    eps, delta, q, steps, _, rel_tol, grid = bundle.settings()[60]
    args = (eps, delta, q, steps, "add_remove", rel_tol, grid)
    data = json.loads(bundle.BUNDLED_PATH.read_text())
    k = memo.key("dpsgd_noise_multiplier", args)
    data["entries"][k] = [0.01, memo.checksum(k, 0.01)]
    copy = tmp_path / "bundled.json"
    copy.write_text(json.dumps(data))
    monkeypatch.setattr(shipped_table, "BUNDLED_PATH", copy)
    monkeypatch.setattr(shipped_table, "TABLE_SHA256", hashlib.sha256(copy.read_bytes()).hexdigest())
    assert memo.bundled_value("dpsgd_noise_multiplier", args) == 0.01  # in the table...
    z = _fresh(eps, delta, q, steps, "pld", relation="add_remove", grid=grid)
    assert z > 0.1  # ...but not used
