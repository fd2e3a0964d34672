"""Wide data is refused before training (or reduced by a PCA that never builds a D x D matrix)."""

from __future__ import annotations


import numpy as np
import pytest

from privcore.data import transforms
from privcore.engine.cache import ResultCache
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec


def _wide_csv(path, rows: int = 60, cols: int = 3000):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(rows, cols)).round(3)
    y = np.arange(rows) % 2
    header = ",".join(f"f{j}" for j in range(cols)) + ",label"
    body = "\n".join(",".join(map(str, r)) + f",{label}" for r, label in zip(x, y))
    path.write_text(header + "\n" + body + "\n")
    return path


def _spec(path, dim=None) -> SweepSpec:
    return SweepSpec(data=DataSpec(name="file", data_file=str(path), dim=dim), methods=("model_sensitivity",),
                     epsilons=(1.0,), delta=1e-5, repeats=2, teachers=2, batch_size=8, device="cpu")


def test_wide_data_is_refused_quickly_with_a_pca_hint(tmp_path):
    path = _wide_csv(tmp_path / "wide.csv")
    seen = []
    with pytest.raises(ValueError, match=r"D = 3,000 features.*PCA.*PRIVCORE_MAX_FEATURES") as info:  # timed in bench/bench_refusals.py
        run_sweep(_spec(path), cache=ResultCache(tmp_path / "c"), progress=lambda f, m: seen.append(m))
    assert str(tmp_path) not in str(info.value)


@pytest.mark.slow
def test_wide_data_with_pca_trains(tmp_path):
    path = _wide_csv(tmp_path / "wide.csv")
    res = run_sweep(_spec(path, dim=10), cache=ResultCache(tmp_path / "c"))
    assert res.rows and all(r["dim"] == 10 for r in res.rows)


@pytest.mark.slow
def test_randomized_pca_matches_the_exact_one(monkeypatch):
    rng = np.random.default_rng(1)
    basis = np.linalg.qr(rng.normal(size=(300, 300)))[0]
    scales = np.concatenate([[50.0, 30.0, 20.0, 12.0, 8.0], np.full(295, 1.0)])  # a clear top-5 subspace
    x = (rng.normal(size=(500, 300)) * scales) @ basis.T
    x = x.astype(np.float32)
    mean_e, comps_e = transforms.pca_fit(x, 5)
    monkeypatch.setattr(transforms, "EXACT_PCA_MAX_D", 100)
    mean_r, comps_r = transforms.pca_fit(x, 5)
    assert np.allclose(mean_e, mean_r, atol=1e-4)
    overlap = np.abs(comps_e.T @ comps_r)          # same directions (signs are fixed the same way)
    assert np.all(np.diag(overlap) > 0.98), np.diag(overlap)


# run_sweep's own arguments are checked by type, with the parameter named (a bad-input hunt found
# AttributeError and "'int' object is not callable" from deep inside).
API_SPEC = SweepSpec(data=DataSpec(name="synthetic", n=100), methods=("model_sensitivity",), epsilons=(1.0,), repeats=2)


@pytest.mark.parametrize("kwargs, name", [({"executor": "dask"}, "executor"), ({"progress": 5}, "progress"),
                                          ({"cancel": "no"}, "cancel"), ({"cache": "/tmp/x"}, "cache")])
def test_bad_arguments_are_named(kwargs, name):
    with pytest.raises(TypeError, match=f"^{name} must be"):
        run_sweep(API_SPEC, **kwargs)


def test_read_cached_checks_its_cache_argument():
    from privcore.engine.runner import read_cached

    with pytest.raises(TypeError, match="^cache must be"):
        read_cached(API_SPEC, cache="/tmp/x")
    read_cached(API_SPEC)  # a real call runs through the checks (a misplaced one raised NameError)
