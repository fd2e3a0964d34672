"""The results cache trusts nothing it reads: no pickle, validated values, corrupt/read-only recovery."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3

import diskcache
import pytest

from privcore.engine import cache as cache_mod
from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec


def _spec(epsilons=(1.0, 10.0)) -> SweepSpec:
    return SweepSpec(data=DataSpec(name="synthetic"), methods=("model_sensitivity",), epsilons=epsilons,
                     delta=1e-5, repeats=2, lam=1e-2, device="cpu")


def _rows(directory) -> list[tuple]:
    conn = sqlite3.connect(os.path.join(directory, "cache.db"))
    try:
        return conn.execute("SELECT rowid, key, mode, filename, value FROM Cache").fetchall()
    finally:
        conn.close()


def _set_all(directory, *, mode: int, value) -> None:
    conn = sqlite3.connect(os.path.join(directory, "cache.db"))
    try:
        conn.execute("UPDATE Cache SET mode = ?, value = ?, filename = NULL", (mode, value))
        conn.commit()
    finally:
        conn.close()


class _Marker:
    """Unpickling this creates a file: proof that code from the cache ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.slow
def test_values_are_stored_as_json_text_never_pickled(tmp_path, monkeypatch):
    class NoPickle:
        def __getattr__(self, name):
            raise AssertionError(f"pickle.{name} called by the results cache")

    monkeypatch.setattr(diskcache.core, "pickle", NoPickle())
    res = run_sweep(_spec(), cache=ResultCache(tmp_path))
    again = run_sweep(_spec(), cache=ResultCache(tmp_path))
    assert again.cached == len(res.rows) and again.computed == 0
    for _, key, mode, filename, value in _rows(tmp_path):
        assert mode == 1 and filename is None and isinstance(key, str) and isinstance(value, str)
        json.loads(value)
    with pytest.raises(TypeError):
        ResultCache(tmp_path)._store.set("k", {"a": 1})  # the disk itself refuses non-text values


def test_a_planted_pickle_is_never_executed(tmp_path):
    cache_dir, marker = tmp_path / "c", tmp_path / "PWNED"
    first = run_sweep(_spec(), cache=ResultCache(cache_dir))
    payload = pickle.dumps(_Marker(str(marker)))
    _set_all(cache_dir, mode=4, value=sqlite3.Binary(payload))  # diskcache's MODE_PICKLE, inline
    res = run_sweep(_spec(), cache=ResultCache(cache_dir))
    assert not marker.exists()
    assert res.computed == len(first.rows) and res.cached == 0      # recomputed, not crashed
    assert any("does not have the expected form" in w for w in res.warnings)
    # The recomputed values replaced the planted ones.
    assert run_sweep(_spec(), cache=ResultCache(cache_dir)).computed == 0


def test_a_row_naming_a_file_is_not_read(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text(json.dumps({"accuracies": [1.0]}))
    run_sweep(_spec(), cache=ResultCache(tmp_path / "c"))
    conn = sqlite3.connect(tmp_path / "c" / "cache.db")
    conn.execute("UPDATE Cache SET mode = 3, value = NULL, filename = ?", (str(secret),))  # MODE_TEXT
    conn.commit()
    conn.close()
    store = ResultCache(tmp_path / "c")
    assert all(store.get(r[1]) is None for r in _rows(tmp_path / "c"))


@pytest.mark.parametrize("bad", [
    "[1, 2]", '{"accuracy_mean": "x"}', "not json", '{"accuracies": [NaN]}',
])
def test_a_stored_value_of_the_wrong_shape_is_a_miss(tmp_path, bad):
    first = run_sweep(_spec(), cache=ResultCache(tmp_path))
    _set_all(tmp_path, mode=1, value=bad)
    res = run_sweep(_spec(), cache=ResultCache(tmp_path))
    assert res.computed == len(first.rows)
    assert any("expected form" in w for w in res.warnings)


def test_check_result_accepts_a_real_result_and_rejects_non_finite_numbers(tmp_path):
    from privcore.engine.cache import check_result

    run_sweep(_spec(), cache=ResultCache(tmp_path))
    value = json.loads(_rows(tmp_path)[0][4])
    assert check_result(value) is None
    for key, bad in [("accuracy_mean", float("inf")), ("accuracy_std", -1.0), ("lam", 0.0), ("device", 3),
                     ("accuracies", []), ("scale", {"noise": "gaussian", "sigma": float("nan")}),
                     ("solver_grad_norm", float("inf")), ("accuracy_answered_std", -0.1),
                     ("epsilon_data_dependent", float("nan")), ("epsilon_dd_published", -1.0)]:
        assert check_result({**value, key: bad}) is not None, key
    assert check_result({**value, "epsilon_data_dependent": 0.7, "epsilon_dd_published": 1.75}) is None


def _populate(directory) -> None:
    run_sweep(_spec(), cache=ResultCache(directory))


@pytest.mark.parametrize("damage", ["random_bytes", "truncated", "directory", "foreign_setting"])
def test_a_corrupt_database_is_moved_aside_and_rebuilt(tmp_path, damage):
    db = tmp_path / "cache.db"
    if damage == "random_bytes":
        db.write_bytes(os.urandom(5000))
    elif damage == "truncated":
        _populate(tmp_path)
        for extra in ("cache.db-wal", "cache.db-shm"):
            (tmp_path / extra).unlink(missing_ok=True)
        data = db.read_bytes()
        db.write_bytes(data[: len(data) // 2])
    elif damage == "directory":
        db.mkdir()
        (db / "x").write_text("x")
    else:  # a planted setting that diskcache would turn into a PRAGMA statement
        _populate(tmp_path)
        conn = sqlite3.connect(db)
        conn.execute("INSERT INTO Settings VALUES ('sqlite_writable_schema', 1)")
        conn.commit()
        conn.close()
    res = run_sweep(_spec(), cache=ResultCache(tmp_path))
    assert len(res.rows) == 3
    assert any("corrupt" in w and "rebuilt" in w for w in res.warnings), res.warnings
    assert not any(str(tmp_path) in w for w in res.warnings)        # no server path in the message
    assert any(p.name.startswith("cache.db.corrupt-") for p in tmp_path.iterdir())
    again = run_sweep(_spec(), cache=ResultCache(tmp_path))          # rebuilt and usable
    assert again.computed == 0 and not again.warnings


def _readonly_writes(monkeypatch) -> None:
    def refuse(self, *args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(diskcache.Cache, "set", refuse)


def test_a_read_only_cache_serves_what_it_has_and_computes_the_rest(tmp_path, monkeypatch):
    run_sweep(_spec(epsilons=(1.0,)), cache=ResultCache(tmp_path))
    stored = len(ResultCache(tmp_path))
    _readonly_writes(monkeypatch)
    res = run_sweep(_spec(epsilons=(1.0, 10.0)), cache=ResultCache(tmp_path))
    assert res.cached == 2 and res.computed == 1                    # eps=1 and baseline cached; eps=10 new
    assert sum("read-only" in w for w in res.warnings) == 1
    assert len(ResultCache(tmp_path)) == stored


def test_a_cache_that_cannot_be_opened_for_writing_is_read_directly(tmp_path, monkeypatch):
    run_sweep(_spec(), cache=ResultCache(tmp_path))

    def refuse(*args, **kwargs):
        raise sqlite3.OperationalError("attempt to write a readonly database")

    monkeypatch.setattr(diskcache, "Cache", refuse)
    store = ResultCache(tmp_path)
    assert store.readonly and store.enabled
    res = run_sweep(_spec(), cache=store)
    assert res.computed == 0 and res.cached == 3
    assert any("read-only" in w for w in res.warnings)


def test_schema_version_was_bumped():
    assert cache_mod.SCHEMA_VERSION >= 6  # 6: the published data-dependent epsilon changed (beta-smooth)


@pytest.mark.parametrize("key", ["accuracy_mean", "seconds", "lam"])
def test_a_stored_integer_beyond_float_range_is_a_miss_not_a_crash(tmp_path, key):
    # Once: OverflowError from check_result (float(10**400)) when reading such a value back.
    first = run_sweep(_spec(), cache=ResultCache(tmp_path))
    value = json.loads(_rows(tmp_path)[0][4])
    _set_all(tmp_path, mode=1, value=json.dumps({**value, key: 10 ** 400}))
    res = run_sweep(_spec(), cache=ResultCache(tmp_path))
    assert res.computed == len(first.rows)
    assert any("expected form" in w for w in res.warnings)


def test_an_edited_summary_is_a_miss_not_a_wrong_accuracy(tmp_path):
    """A bad-input hunt changed one digit of a stored accuracy_mean (0.111 -> 0.911): the sweep served
    0.911 as cached, silently. The mean and std must be the stored repetitions' own."""
    from privcore.engine.cache import check_result

    first = run_sweep(_spec(), cache=ResultCache(tmp_path))
    rowid, _, _, _, text = _rows(tmp_path)[0]
    value = json.loads(text)
    assert check_result(value) is None
    assert "not the mean" in check_result({**value, "accuracy_mean": min(1.0, value["accuracy_mean"] + 0.8)})
    if len(value["accuracies"]) > 1:
        assert "not the standard deviation" in check_result({**value, "accuracy_std": value["accuracy_std"] + 0.1})
    edited = text.replace(f'"accuracy_mean": {json.dumps(value["accuracy_mean"])}',
                          f'"accuracy_mean": {json.dumps(round(1.0 - value["accuracy_mean"], 6))}')
    assert edited != text
    conn = sqlite3.connect(os.path.join(tmp_path, "cache.db"))
    conn.execute("UPDATE Cache SET value = ? WHERE rowid = ?", (edited, rowid))
    conn.commit()
    conn.close()
    res = run_sweep(_spec(), cache=ResultCache(tmp_path))
    assert res.computed == 1 and res.cached == len(first.rows) - 1
    assert any("expected form" in w for w in res.warnings)
    assert [r.accuracy_mean for r in res.rows] == [r.accuracy_mean for r in first.rows]
