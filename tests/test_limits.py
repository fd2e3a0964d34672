"""privcore/limits.py: every size that sets the cost is refused up front, with the same limits for
sweep, leakage and deep, in one line naming the limit and its environment variable; accountants
refuse what they cannot compute in reasonable time; downloads stop at the file's size; Ctrl-C and
an offline data set end a command in one line."""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager

import numpy as np
import pytest

from privcore import limits
from privcore.cli import main


@contextmanager
def _deadline(seconds: int):
    """Fail instead of hanging: the old code ran these requests for minutes, or forever."""
    def stop(*_):
        raise TimeoutError(f"still running after {seconds} s: the request was not refused up front")

    old = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len([x for x in lines if x.startswith("error:")]) == 1, err
    return next(x for x in lines if x.startswith("error:"))


# ---------------------------------------------------------------- one set of limits

def test_epochs_are_bounded_alike_in_sweep_leakage_deep_and_calibrate():
    from privcore.deep.spec import DeepSpec
    from privcore.engine.specs import SweepSpec
    from privcore.leakage.spec import LeakageSpec
    from privcore.types import Problem

    too_many = limits.max_epochs() + 1
    for build in (lambda: SweepSpec(epochs=10**6), lambda: LeakageSpec(epochs=10**6), lambda: Problem(epochs=too_many),
                  lambda: DeepSpec(epochs=10**6), lambda: DeepSpec(teacher_epochs=9 * 10**15)):
        with pytest.raises(ValueError, match="at most 1,000 passes over the data.*PRIVCORE_MAX_EPOCHS"):
            build()
    Problem(epochs=limits.max_epochs())  # the limit itself is allowed


@pytest.mark.parametrize("argv", [
    ["sweep", "--dataset", "digits", "--epochs", "1000000"],
    ["leakage", "--dataset", "digits", "--epsilon", "1", "--epochs", "1000000"],
    ["deep", "--teacher-epochs", "9000000000000000"],
    ["deep", "--epochs", "1000000"],
    ["calibrate", "--method", "dpsgd", "--epsilon", "1", "--n", str(2**53)],
    ["calibrate", "--method", "dpsgd", "--epsilon", "1", "--n", "10000000", "--batch-size", "1", "--epochs", "1000"],
])
def test_the_commands_refuse_at_once_in_one_line(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    start = time.monotonic()
    with _deadline(60):
        code = main(argv)
    err = capsys.readouterr().err
    assert code == 2, err
    line = _one_error_line(err)
    assert "PRIVCORE_MAX_" in line, line
    assert time.monotonic() - start < 30 and not list(tmp_path.glob("results/*")), "refused after doing work"


def test_the_accountants_refuse_too_many_compositions_at_once():
    # Once: a DP-SGD calibration with 1e10 steps (or N = 2**53) ran past any bound.
    from privcore.accounting.private_knn import knn_epsilon, knn_sigmas
    from privcore.calibration import calibrate
    from privcore.types import CalibrationError, PrivacyBudget, Problem

    start = time.monotonic()
    with _deadline(60):
        for ask in (lambda: calibrate("dpsgd", PrivacyBudget(1.0, 1e-5), Problem(n=10**7, batch_size=1, epochs=1000),
                                      "corrected"),  # 1e10 steps
                    lambda: calibrate("dpsgd", PrivacyBudget(1.0, 1e-5), Problem(n=4000, batch_size=1, epochs=1000),
                                      "paper"),  # batch 1 x 1,000 epochs: 4 million steps
                    lambda: knn_sigmas(1.0, 1e-5, 10**9, 0.1, "tight"),
                    lambda: knn_epsilon(1.0, 10**9, 0.1, 1e-5)):
            with pytest.raises(CalibrationError, match="steps, above the limit of 1,000,000.*PRIVCORE_MAX_STEPS"):
                ask()
    assert time.monotonic() - start < 5
    with pytest.raises(ValueError, match="n must be at most 10,000,000.*PRIVCORE_MAX_N"):
        Problem(n=2**53)


def test_a_sweep_or_deep_run_of_too_many_points_is_refused():
    from privcore.deep.spec import DeepSpec
    from privcore.engine.specs import SweepSpec

    many = tuple(float(e) for e in range(1, 2002))
    with pytest.raises(ValueError, match="PRIVCORE_MAX_POINTS"):
        SweepSpec(methods=("dpsgd", "model_sensitivity", "loss_perturbation", "prediction_sensitivity",
                           "subsample_aggregate"), epsilons=many)
    with pytest.raises(ValueError, match="x 2000 lam value.*PRIVCORE_MAX_POINTS"):
        SweepSpec(methods=("dpsgd", "model_sensitivity", "loss_perturbation"), epsilons=(1.0, 2.0), vary="lam",
                  values=tuple(1e-4 * (1 + i) for i in range(2000)))
    with pytest.raises(ValueError, match="PRIVCORE_MAX_POINTS"):
        DeepSpec(epsilons=many, budgets=tuple(range(1, 11)))


def test_a_deep_run_checks_its_training_steps_before_training():
    from privcore.deep.run import check_steps
    from privcore.deep.spec import DeepSpec

    check_steps(DeepSpec(), 5000)  # the CPU preset
    check_steps(DeepSpec(**__import__("privcore.deep.spec", fromlist=["PRESETS"]).PRESETS["paper"]), 60000)
    with pytest.raises(ValueError, match="DP-SGD's training .* 5,000,000 steps.*PRIVCORE_MAX_STEPS"):
        check_steps(DeepSpec(methods=("dpsgd",), batch_size=1, epochs=1000, baseline=False), 5000)
    with pytest.raises(ValueError, match="teachers .* steps.*PRIVCORE_MAX_STEPS"):
        check_steps(DeepSpec(teacher_batch=1, teacher_epochs=1000, baseline=False), 5000)


def test_the_leakage_measurement_has_the_sweeps_feature_limit(tmp_path, monkeypatch, capsys):
    # Once: a 10,000-column file ran 9 min 48 s (the sweep refused more than 2,048 features at once).
    from privcore.engine.specs import DataSpec
    from privcore.leakage.run import run_leakage
    from privcore.leakage.spec import LeakageSpec

    monkeypatch.setenv("PRIVCORE_MAX_FEATURES", "20")  # the same check as at 2,048, on a small file
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path / "cache"))
    rng = np.random.default_rng(0)
    path = tmp_path / "wide.csv"
    rows = [",".join([f"f{j}" for j in range(30)] + ["label"])]
    rows += [",".join(f"{v:.3f}" for v in rng.normal(size=30)) + f",{i % 2}" for i in range(60)]
    path.write_text("\n".join(rows) + "\n")
    spec = LeakageSpec(method="model_sensitivity", data=DataSpec(name="file", data_file=str(path), augment=False),
                       references=2, canaries=2, audit_trials=4, worlds=1, repeats=1, device="cpu")
    with _deadline(60), pytest.raises(ValueError, match="D = 30 features, above the limit of 20.*PRIVCORE_MAX_FEATURES"):
        run_leakage(spec)
    args = ["leakage", "--dataset", "file", "--data-file", str(path), "--method", "model_sensitivity", "--epsilon", "1",
            "--references", "2", "--canaries", "2", "--audit-trials", "4", "--worlds", "1", "--repeats", "1",
            "--device", "cpu"]
    assert main(args) == 2
    assert "PRIVCORE_MAX_FEATURES" in _one_error_line(capsys.readouterr().err)


# ---------------------------------------------------------------- offline, Ctrl-C, downloads

def test_the_leakage_command_offline_says_one_line(tmp_path, monkeypatch, capsys):
    # Once: a RuntimeError traceback and exit 1, where sweep said one line.
    from privcore.data import mnist_download

    def offline(url, target, md5, **kw):
        raise OSError("Name or service not known")

    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    monkeypatch.setattr(mnist_download, "_download", offline)
    code = main(["leakage", "--dataset", "mnist", "--method", "model_sensitivity", "--epsilon", "1"])
    err = capsys.readouterr().err
    assert code == 2
    assert "full MNIST data set is not available" in _one_error_line(err)


def test_ctrl_c_during_a_download_leaves_no_empty_folder(tmp_path, monkeypatch):
    from privcore.data import mnist_download

    def interrupted(url, target, md5, **kw):
        raise KeyboardInterrupt

    folder = tmp_path / "mnist"
    monkeypatch.setattr(mnist_download, "_download", interrupted)
    with pytest.raises(KeyboardInterrupt):
        mnist_download.ensure_mnist_files(folder)
    assert not folder.exists()


class _Endless(http.server.BaseHTTPRequestHandler):
    """Sends bytes until the client hangs up (a hostile or broken mirror), counting them."""

    sent = 0

    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        block = b"\0" * 65536
        try:
            while True:
                self.wfile.write(block)
                type(self).sent += len(block)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


@contextmanager
def _endless_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Endless)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def test_a_download_stops_at_the_files_size(tmp_path, monkeypatch):
    # Once: a server that never stopped sending grew the partial file to 4.3 GB in 20 s.
    from privcore.data import mnist_download

    _Endless.sent = 0
    folder = tmp_path / "mnist"
    with _endless_server() as url, _deadline(60):
        monkeypatch.setattr(mnist_download, "MNIST_MIRRORS", (url,))
        with pytest.raises(mnist_download.DataUnavailableError, match="larger than the 9,912,422 bytes expected"):
            mnist_download.ensure_mnist_files(folder)
    assert not folder.exists() or not any(folder.iterdir())  # no partial file kept
    # The client stopped reading at the size; the server may have filled the socket buffers beyond it (a few MB
    # on loopback), where the old code read on for as long as the server sent (gigabytes within the deadline).
    assert _Endless.sent < mnist_download.MNIST_SIZES["train-images-idx3-ubyte.gz"] + (64 << 20)


def test_ctrl_c_during_a_sweep_exits_130_in_one_line_and_keeps_finished_points(tmp_path):
    env = dict(os.environ, PRIVCORE_CACHE=str(tmp_path))
    cmd = [sys.executable, "-m", "privcore", "sweep", "--dataset", "digits", "--epsilons", "1,10", "--repeats", "2",
           "--device", "cpu", "--methods", "model_sensitivity,loss_perturbation,dpsgd,subsample_aggregate",
           "--vary", "lam", "--values", "1e-3,2e-3,3e-3"]
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = []
    try:
        for line in proc.stderr:  # interrupt once the first points are stored
            lines.append(line)
            if "Loss perturbation" in line or "loss_perturbation" in line:
                break
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=120)
    finally:
        proc.kill()
    err = "".join(lines) + rest
    assert proc.returncode == 130, err
    assert _one_error_line(err) == "error: interrupted; finished results are kept in the cache", err
    from privcore.engine.cache import ResultCache

    assert len(ResultCache(tmp_path / "results")) >= 1
