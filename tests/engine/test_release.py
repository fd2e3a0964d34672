"""privcore/engine/release.py: releasing a user file drops every copy the process keeps of it (the
parsed matrix, the data sets built from it, their training context), so its memory goes back."""

from __future__ import annotations

import gc
import weakref

import numpy as np

from privcore.data import load_dataset, loader, userfile
from privcore.data.userfile import load_user_file
from privcore.engine import context
from privcore.engine.cache import ResultCache
from privcore.engine.release import release_data_file
from privcore.engine.runner import run_sweep
from privcore.engine.specs import DataSpec, SweepSpec


def _csv(path, seed: int, rows: int = 80, cols: int = 6):
    rng = np.random.default_rng(seed)
    lines = [",".join([f"f{j}" for j in range(cols)] + ["label"])]
    lines += [",".join(f"{v:.4f}" for v in rng.normal(size=cols)) + f",{i % 3}" for i in range(rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_releasing_a_file_drops_every_copy_and_its_memory_goes(tmp_path):
    mine, other = _csv(tmp_path / "mine.csv", 1), _csv(tmp_path / "other.csv", 2)
    raw = load_user_file(mine)
    ds = load_dataset("file", data_file=str(mine))
    ds_pca = load_dataset("file", data_file=str(mine), dim=3)  # a second data set from the same file
    kept = load_dataset("file", data_file=str(other))
    spec = SweepSpec(data=DataSpec(name="file", data_file=str(mine)), methods=("model_sensitivity",), epsilons=(1.0,),
                     repeats=2, device="cpu")
    run_sweep(spec, cache=ResultCache(tmp_path / "c", enabled=False))  # leaves its training context in the process
    assert any(key[0] == ds.fingerprint for key in context._CONTEXTS)
    watch = [weakref.ref(a) for a in (raw.x, ds.x_train, ds_pca.x_train)]
    prints = {ds.fingerprint, ds_pca.fingerprint}
    del raw, ds, ds_pca

    assert release_data_file(mine) == 2
    gc.collect()
    assert all(ref() is None for ref in watch), "a copy of the released file is still referenced"
    assert not any(key[0] in prints for key in context._CONTEXTS)
    assert not [k for k in userfile._PARSED if k[0] == str(mine.resolve())]
    # Another file is untouched (only the released one goes), and the released one loads again.
    assert load_dataset("file", data_file=str(other)) is kept
    assert load_dataset("file", data_file=str(mine)).fingerprint in prints
    assert release_data_file(tmp_path / "never-loaded.csv") == 0
    loader.clear_caches()
