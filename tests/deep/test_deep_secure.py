"""Release mode of the deep models (``DeepSpec.secure_noise``, ``privcore deep --secure-noise``): DP-SGD's
sampling and noise and the votes' noise come from a fresh secret seed, never stored; the private rows are
neither read from nor written to the cache. Checked on the run's own calls, so a secure run that fell back
to the public seed, a cached row or a checkpoint fails here."""

from __future__ import annotations

import pytest

from privcore.cli import main
from privcore.deep import run as deep_run
from privcore.deep import units as deep_units
from privcore.deep.loop import TrainingCancelled
from privcore.deep.run import cached_rows, deep_dir, missing_units, run_deep
from privcore.deep.spec import SECURE_FORMULA, DeepSpec
from privcore.engine.cache import ResultCache
from privcore.methods import BASELINE

SMALL = dict(n_train=None, n_test=None, epochs=1, batch_size=40, teachers=4, teacher_epochs=1, teacher_batch=20,
             methods=("dpsgd", "subsample_aggregate"), epsilons=(1.0,), budgets=(10,), repeats=2, device="cpu")


@pytest.fixture()
def seeds(monkeypatch):
    """The seeds and checkpoints DP-SGD's training and the votes were given, as the run gave them."""
    seen: dict[str, list] = {"dpsgd": [], "checkpoint": [], "votes": []}
    train, vote = deep_units.train_dpsgd, deep_run.private_vote_accuracy

    def spy_train(*args, **kw):
        seen["dpsgd"].append(args[5])
        seen["checkpoint"].append(kw.get("checkpoint"))
        return train(*args, **kw)

    def spy_vote(*args):
        seen["votes"].append(args[-1])
        return vote(*args)

    monkeypatch.setattr(deep_units, "train_dpsgd", spy_train)
    monkeypatch.setattr(deep_run, "private_vote_accuracy", spy_vote)
    return seen


def _files_text(folder) -> str:
    return "\n".join(p.read_bytes().decode("latin-1") for p in folder.rglob("*") if p.is_file())


def test_a_secure_run_draws_secret_seeds_reads_and_writes_no_private_row_and_says_so(fake_fashion, seeds):
    public = DeepSpec(**SMALL)
    run_deep(public)
    assert seeds["dpsgd"] == [public.seed] and seeds["votes"] == [public.seed]
    store = ResultCache()
    stored = sorted(store.keys())
    secure = DeepSpec(**SMALL, secure_noise=True)
    assert missing_units(secure) == [("dpsgd", "dpsgd", 1.0)]  # the teachers' predictions (no noise) are reused
    assert cached_rows(secure)[1] == 2  # the cache holds no private row of a secure spec
    drawn = []
    for _ in range(2):
        res = run_deep(secure)
        private = [r for r in res.rows if r.method != BASELINE.name]
        assert len(private) == 2 and not any(r.cached for r in private)
        assert all(r.formula.endswith(SECURE_FORMULA) for r in private)
        assert all(r.cached for r in res.rows if r.method == BASELINE.name)
        drawn += [seeds["dpsgd"][-1], seeds["votes"][-1]]
    assert seeds["checkpoint"][1:] == [None, None]  # a checkpoint would store the secret generators
    assert len(set(drawn)) == 4 and public.seed not in drawn  # a fresh seed per training and per point
    assert sorted(store.keys()) == stored
    text = _files_text(fake_fashion / "cache")
    assert not any(str(s) in text for s in drawn)


def test_a_cancelled_secure_training_keeps_no_checkpoint_and_says_the_next_run_starts_again(fake_fashion):
    spec = DeepSpec(**{**SMALL, "methods": ("dpsgd",)}, secure_noise=True)
    calls = []

    def cancel() -> bool:
        calls.append(1)
        return len(calls) > 2

    with pytest.raises(TrainingCancelled, match="keeps no checkpoint"):
        run_deep(spec, cancel=cancel, checkpoint_every=0.0)
    folder = deep_dir() / "checkpoints"
    assert not folder.exists() or not any(folder.iterdir())


def test_the_cli_runs_a_secure_release_and_its_rows_say_so(fake_fashion, capsys):
    args = ["deep", "--methods", "subsample_aggregate", "--epsilons", "1", "--budget", "10", "--n-train", "all",
            "--n-test", "all", "--teachers", "4", "--teacher-epochs", "1", "--teacher-batch", "20", "--repeats", "2",
            "--device", "cpu", "--secure-noise"]
    assert main(args) == 0
    out = capsys.readouterr().out
    private = [line for line in out.splitlines()[1:] if line.startswith("fashion-mnist,small-cnn,subsample_aggregate")]
    assert len(private) == 1 and "secure noise" in private[0]
    assert main(args[:-1]) == 0 and "secure noise" not in capsys.readouterr().out
