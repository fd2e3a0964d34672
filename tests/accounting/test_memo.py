"""The on-disk memo of DP-SGD multipliers (privcore/accounting/memo.py).

A repeated calibration reads the stored, verified answer (no accountant call); a damaged or
foreign memo file, or a damaged entry, is ignored with a warning and the multiplier recomputed;
the key changes with the code and the arguments.
"""

from __future__ import annotations

import json
import warnings

import pytest

from privcore.accounting import dpsgd, memo

ARGS = (1.0, 1e-5, 0.064, 79)


@pytest.fixture
def counted(monkeypatch, tmp_path, accountant_calls):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    monkeypatch.delenv("PRIVCORE_CALIBRATION_MEMO", raising=False)
    monkeypatch.setenv("PRIVCORE_CALIBRATION_BUNDLE", "off")  # the user's memo alone (tests/accounting/test_bundle.py: the table)
    return accountant_calls


def _fresh(*args, **kw) -> float:
    dpsgd.dpsgd_noise_multiplier.cache_clear()  # as a new process would: only the disk remembers
    dpsgd._pld_epsilon.cache_clear()
    return dpsgd.dpsgd_noise_multiplier(*args, **kw)


def test_a_repeated_calibration_reads_the_memo(counted, tmp_path):
    z = _fresh(*ARGS)
    assert counted and (tmp_path / memo.FILE_NAME).is_file()
    counted.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fresh(*ARGS) == z
    assert counted == []  # no accountant call
    # Every argument is in the key: another epsilon, grid or relation is computed afresh.
    assert _fresh(1.5, 1e-5, 0.064, 79) != z and counted
    counted.clear()
    _fresh(*ARGS, grid="fine")
    assert counted


@pytest.mark.parametrize("damage", ["garbage {", "[1, 2]", '{"format": "other", "entries": {}}', "tamper", "\\xff"])
def test_a_damaged_memo_is_ignored_with_a_warning(counted, tmp_path, damage):
    z = _fresh(*ARGS)
    path = tmp_path / memo.FILE_NAME
    if damage == "tamper":  # a valid-looking file whose value was changed: its check fails
        data = json.loads(path.read_text())
        key = next(iter(data["entries"]))
        data["entries"][key][0] = z * 0.5
        path.write_text(json.dumps(data))
    elif damage == "\\xff":
        path.write_bytes(b"\xff\xfe\x00")
    else:
        path.write_text(damage)
    counted.clear()
    with pytest.warns(RuntimeWarning, match="ignoring the calibration memo"):
        again = _fresh(*ARGS)
    assert again == pytest.approx(z, rel=1e-12) and counted  # recomputed, not the tampered value
    data = json.loads(path.read_text())  # and rewritten in the right format
    assert data["format"] == memo.FORMAT and len(data["entries"]) == 1


def test_the_key_follows_the_code_and_can_be_switched_off(counted, monkeypatch):
    z = _fresh(*ARGS)
    counted.clear()
    monkeypatch.setattr(memo, "_code_version", lambda: "another version")
    assert _fresh(*ARGS) == z and counted  # a code change: computed again
    counted.clear()
    monkeypatch.setenv("PRIVCORE_CALIBRATION_MEMO", "off")
    assert memo.memo_path() is None
    assert _fresh(*ARGS) == z and counted


def test_only_positive_finite_values_are_stored(counted, tmp_path):
    for bad in (float("nan"), float("inf"), 0.0, -1.0):
        memo.store("x", (1.0,), bad)
    assert not (tmp_path / memo.FILE_NAME).exists()
    memo.store("x", (1.0,), 2.5)
    assert memo.lookup("x", (1.0,)) == 2.5 and memo.lookup("x", (1.0000000000000002,)) is None


@pytest.mark.parametrize("factor", [0.5, 0.97, 0.995])
def test_an_entry_edited_with_its_checksum_is_rechecked_not_trusted(counted, tmp_path, factor):
    """The per-entry sha256 is not keyed: a hand edit that also rewrites it passes the format check.
    The replayed multiplier is then re-checked by the numpy PLD and recomputed (review, s4)."""
    z = _fresh(*ARGS)
    path = tmp_path / memo.FILE_NAME
    data = json.loads(path.read_text())
    key = next(iter(data["entries"]))
    data["entries"][key] = [z * factor, memo.checksum(key, z * factor)]
    path.write_text(json.dumps(data))
    assert memo.lookup("dpsgd_noise_multiplier", (*ARGS, "replace_one", 1e-3, "moderate")) == z * factor  # passes the checksum
    counted.clear()
    with pytest.warns(RuntimeWarning, match="independent check finds it too small"):
        again = _fresh(*ARGS)
    assert again == pytest.approx(z, rel=1e-12) and counted  # the accountant ran again
    assert memo.lookup("dpsgd_noise_multiplier", (*ARGS, "replace_one", 1e-3, "moderate")) == again  # overwritten


@pytest.mark.parametrize("args", [(0.3, 1e-6, 0.01, 400), (8.0, 1e-5, 0.25, 20), (1.0, 1e-5, 1.0, 5)])
def test_verified_entries_pass_the_recheck(counted, args):
    z = _fresh(*args)
    counted.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fresh(*args) == z
    assert counted == []


def test_the_code_version_follows_the_libraries(monkeypatch):
    from importlib import metadata

    real = metadata.version
    base = memo._code_version()
    for package in ("dp-accounting", "numpy", "scipy"):
        memo._code_version.cache_clear()
        monkeypatch.setattr(metadata, "version", lambda name, p=package: "0.0-other" if name == p else real(name))
        assert memo._code_version() != base, package
    monkeypatch.setattr(metadata, "version", real)
    memo._code_version.cache_clear()
    assert memo._code_version() == base


def test_the_code_version_follows_every_source_of_the_search(monkeypatch):
    """dpsgd.py (the accountant calls, the search), pld_approx.py (the start and the re-check),
    gaussian.py (the first guess) and memo.py: an edit to any of them must miss the memo."""
    from pathlib import Path

    real = Path.read_bytes
    base = memo._code_version()
    for name in ("dpsgd.py", "pld_approx.py", "memo.py", "gaussian.py"):
        memo._code_version.cache_clear()
        monkeypatch.setattr(Path, "read_bytes", lambda self, n=name: real(self) + (b"#edit" if self.name == n else b""))
        assert memo._code_version() != base, name
    monkeypatch.setattr(Path, "read_bytes", real)
    memo._code_version.cache_clear()
    assert memo._code_version() == base


def test_a_multiplier_the_recheck_cannot_judge_is_not_stored(counted, tmp_path):
    """At epsilon = 1000 the multiplier (0.078) is below what the re-check judges: stored, it was refused
    with a RuntimeWarning on every later read (the suite's engine test warned) and recomputed anyway."""
    args = (1000.0, 1e-5, 0.04, 75)
    z = _fresh(*args)
    assert z < 0.1 and not memo.lookup("dpsgd_noise_multiplier", (*args, "replace_one", 0.001, "moderate"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _fresh(*args) == z
    assert _fresh(*ARGS) and memo.lookup("dpsgd_noise_multiplier", (*ARGS, "replace_one", 0.001, "moderate"))
