"""run_deep, its cache and the ``deep`` CLI, on a small generated Fashion-MNIST-format folder."""

from __future__ import annotations

import math

import json
import urllib.request
from dataclasses import replace

import pytest
import torch

from privcore.cli import main
from privcore.deep.run import deep_dir, missing_units, run_deep
from privcore.deep.spec import DeepRow, DeepSpec, check_row, figure7_specs
from privcore.deep.votes import VoteContext, deep_methods, dpsgd_methods, private_vote_accuracy, vote_methods
from privcore.methods import BASELINE, REGISTRY
from privcore.types import Problem


SMALL = dict(n_train=None, n_test=None, epochs=1, batch_size=40, teachers=4, teacher_epochs=1, teacher_batch=20,
             epsilons=(1.0, 8.0), budgets=(1, 10), repeats=2, device="cpu")


def test_run_rows_cache_and_reuse(fake_fashion):
    spec = DeepSpec(**SMALL)
    assert spec.methods == deep_methods() and set(dpsgd_methods()) < set(deep_methods())
    first = run_deep(spec)
    assert len(first.rows) == len(spec.methods) * 2 * 2 + 2 and first.computed == len(first.rows)
    ref = [r for r in first.rows if r.method == BASELINE.name]  # the non-private reference: one model, flat
    assert len(ref) == 2 and len({r.accuracy_mean for r in ref}) == 1
    # at epsilon = inf, as the sweeps' baseline: at each finite epsilon with delta = 0 it read as a (1, 0)-DP row
    assert all(math.isinf(r.epsilon) and r.delta == spec.delta for r in ref) and [r.budget for r in ref] == [1, 10]
    by = {(r.method, r.epsilon, r.budget): r for r in first.rows}
    for m in dpsgd_methods():  # one training per epsilon serves every B
        assert by[(m, 1.0, 1)].accuracy_mean == by[(m, 1.0, 10)].accuracy_mean
        assert by[(m, 8.0, 1)].noise_multiplier < by[(m, 1.0, 1)].noise_multiplier
    again = run_deep(spec)
    assert again.computed == 0 and all(r.cached for r in again.rows)
    assert [r.accuracy_mean for r in again.rows] == [r.accuracy_mean for r in first.rows]
    assert missing_units(spec) == []
    assert not any((deep_dir() / "checkpoints").glob("*.pt"))  # finished units leave no checkpoint
    # Another B reuses the teachers and the DP-SGD models: nothing is trained.
    more = run_deep(replace(spec, budgets=(3,)))
    assert sum(not r.cached for r in more.rows) == len(vote_methods()) * 2
    assert run_deep(replace(spec, baseline=False)).computed == 0


def test_a_tampered_predictions_file_is_refused_then_retrained(fake_fashion):
    from privcore.deep.loop import save_checkpoint
    from privcore.deep.run import _predictions_path
    from privcore.deep.data import load_images
    from privcore.engine.cache import point_key

    spec = DeepSpec(**{**SMALL, "methods": vote_methods()[:1], "epsilons": (1.0,), "baseline": False})
    run_deep(spec)
    data = load_images(spec.dataset, spec.n_train, spec.n_test)
    path = _predictions_path(spec, data)
    tag = point_key(spec.teacher_point(), data.fingerprint)
    save_checkpoint(path, {"tag": tag, "predictions": torch.full((4, 60), 99, dtype=torch.int16)})
    with pytest.raises(RuntimeError, match="not valid and has been removed"):
        run_deep(replace(spec, budgets=(7,)))
    assert not path.exists()
    assert len(run_deep(replace(spec, budgets=(7,))).rows) == 1


def test_cancel_keeps_finished_units(fake_fashion):
    from privcore.deep.loop import TrainingCancelled

    spec = DeepSpec(**{**SMALL, "epochs": 2})
    calls = {"n": 0}

    def cancel():
        calls["n"] += 1
        return calls["n"] > 16  # after the teachers (13 polls), inside the first DP-SGD run

    with pytest.raises(TrainingCancelled):
        run_deep(spec, cancel=cancel)
    left = missing_units(spec)
    assert ("teachers",) not in left and ("dpsgd", dpsgd_methods()[0], 1.0) in left  # finished unit kept
    assert len(run_deep(spec).rows) == 18  # 4 methods x 2 epsilons x 2 B, and the reference at each B


def test_votes_go_through_the_registry_methods():
    from privcore.types import PrivacyBudget

    votes = torch.tensor([[4.0, 0.0], [0.0, 4.0], [4.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([0, 1, 0])
    problem = Problem(n=100, dim=4, classes=2, budget=1, teachers=4)
    for m in vote_methods():
        scale, acc, answered = private_vote_accuracy(m, votes, y, 1e4, 1e-5, problem, "corrected", 3, 0)
        assert scale == REGISTRY[m].calibrate(PrivacyBudget(1e4, 1e-5), problem, "corrected")
        assert acc.shape == (3,) and float(acc.min()) == 1.0, m  # huge epsilon: the majority vote
    ctx = VoteContext(votes, y, problem, 0)
    with pytest.raises(ValueError, match="test images only"):
        ctx.teacher_votes(4, 1.0, torch.zeros(1, 4))
    with pytest.raises(ValueError, match="teacher votes"):
        private_vote_accuracy(dpsgd_methods()[0], votes, y, 1.0, 1e-5, problem, "corrected", 1, 0)


def test_spec_and_row_validation():
    with pytest.raises(ValueError, match="dataset must be one of fashion-mnist, cifar-10, got 'mnist'"):
        DeepSpec(dataset="mnist")
    with pytest.raises(ValueError, match="model must be one of small-cnn, resnet20"):
        DeepSpec(model="vgg")
    with pytest.raises(ValueError, match="method must be one of"):
        DeepSpec(methods=("model_sensitivity",))  # needs a convex model
    with pytest.raises(ValueError, match="epsilon"):
        DeepSpec(epsilons=(0.0,))
    with pytest.raises(ValueError, match="finite"):
        DeepSpec(epsilons=(float("inf"),))
    with pytest.raises(ValueError, match="teachers"):
        DeepSpec(teachers=0)
    a, b = figure7_specs()
    assert a.budgets == (10,) and b.epsilons == (1.0,) and len(b.budgets) > 3
    assert check_row({"accuracy_mean": 2}) is not None and check_row([]) is not None
    row = DeepRow("d", "m", "x", 1.0, 1e-5, 10, 4, "corrected", 10, 10, 0.5, 0.0, 1, 0.1, "cpu")
    assert check_row(row.to_dict()) is None
    assert check_row({**row.to_dict(), "accuracy_mean": 1.5}) is not None


def test_cli_rows_and_bad_inputs(fake_fashion, capsys):
    args = ["deep", "--n-train", "all", "--n-test", "all", "--epochs", "1", "--batch-size", "40", "--teachers", "4",
            "--teacher-epochs", "1", "--epsilons", "2", "--budget", "5", "--device", "cpu", "--format", "json"]
    assert main(args + ["--methods", ",".join(vote_methods())]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["method"] for r in rows] == list(vote_methods()) + [BASELINE.name] and rows[0]["n_train"] == 240
    assert rows[-1]["epsilon"] == "inf" and rows[-1]["delta"] == 1e-5  # as sweep writes its baseline (valid JSON)
    for bad, what in ((["--dataset", "svhn"], "--dataset"), (["--model", "vgg"], "--model"),
                      (["--epsilons", "-1"], "epsilon"), (["--methods", "dpsgd,nope"], "unknown method"),
                      (["--teachers", "0"], "teachers"), (["--budget", "0"], "budget")):
        assert main(["deep"] + bad) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and what in err and "\n" not in err, bad


def test_cli_figure7_writes_both_panels(fake_fashion, tmp_path, capsys):
    args = ["deep", "--n-train", "all", "--n-test", "all", "--teachers", "4", "--teacher-epochs", "1",
            "--device", "cpu", "--methods", vote_methods()[0], "--figure7", str(tmp_path / "figs")]
    assert main(args) == 0
    a = (tmp_path / "figs" / "fig7a_fashion-mnist_small-cnn.csv").read_text().splitlines()
    b = (tmp_path / "figs" / "fig7b_fashion-mnist_small-cnn.csv").read_text().splitlines()
    assert a[0].startswith("dataset,model,method,epsilon") and len(a) == 1 + 5 + 1 and len(b) == 1 + 2 * 7
    assert main(args + ["--epsilons", "1"]) == 2
    assert "leave out --epsilons" in capsys.readouterr().err


def test_cli_offline_cifar_is_one_line(tmp_path, monkeypatch, capsys):
    from privcore.deep import cifar

    monkeypatch.setenv(cifar.CIFAR_ENV, str(tmp_path / "c"))
    monkeypatch.setattr(urllib.request, "urlopen", lambda *a, **k: (_ for _ in ()).throw(OSError("offline")))
    assert main(["deep", "--dataset", "cifar-10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: CIFAR-10 is not available") and "\n" not in err
