"""Input validation (value types, calibrate) and the ``python -m privcore calibrate`` command line.

Every bad input must raise TypeError/ValueError (library) or exit 2 with one line on stderr (CLI),
naming the parameter and showing the value. Good CLI calls print one JSON object whose values are
checked against each method's closed form computed by hand here.
"""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from privcore import METHOD_NAMES, calibrate
from privcore.accounting.gaussian import gaussian_delta
from privcore.accounting import analytic_gaussian_sigma
from privcore.cli import main
from privcore.types import ACCOUNTING_MODES, CalibrationError, PrivacyBudget, Problem

ROOT = Path(__file__).resolve().parents[1]
SQRT2 = math.sqrt(2.0)
NAN = float("nan")


def names_param_and_value(msg: str, param: str, shown: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(param)}(?![\w-])", msg) is not None and shown.lower() in msg.lower()


# --------------------------------------------------------------------------------------------
# Library: bad inputs
# --------------------------------------------------------------------------------------------

BUDGET_CASES = [
    # (kwargs, exception, parameter, value as shown)
    ({"epsilon": 0}, ValueError, "epsilon", "0"),
    ({"epsilon": 0.0}, ValueError, "epsilon", "0.0"),
    ({"epsilon": -1}, ValueError, "epsilon", "-1"),
    ({"epsilon": NAN}, ValueError, "epsilon", "nan"),
    ({"epsilon": -math.inf}, ValueError, "epsilon", "-inf"),
    ({"epsilon": "1"}, TypeError, "epsilon", "'1'"),
    ({"epsilon": True}, TypeError, "epsilon", "True"),
    ({"epsilon": None}, TypeError, "epsilon", "None"),
    ({"epsilon": 1.0, "delta": -0.1}, ValueError, "delta", "-0.1"),
    ({"epsilon": 1.0, "delta": 1.0}, ValueError, "delta", "1.0"),
    ({"epsilon": 1.0, "delta": NAN}, ValueError, "delta", "nan"),
    ({"epsilon": 1.0, "delta": "0"}, TypeError, "delta", "'0'"),
]


PROBLEM_CASES = [
    ({"n": 0}, ValueError, "n", "0"),
    ({"n": -5}, ValueError, "n", "-5"),
    ({"n": True}, TypeError, "n", "True"),
    ({"n": 2.5}, TypeError, "n", "2.5"),
    ({"n": 4000.0}, TypeError, "n", "4000.0"),
    ({"n": "5"}, TypeError, "n", "'5'"),
    ({"budget": 0}, ValueError, "budget", "0"),
    ({"lam": 0}, ValueError, "lam", "0"),
    ({"lam": -1e-3}, ValueError, "lam", "-0.001"),
    ({"lam": NAN}, ValueError, "lam", "nan"),
    ({"lam": math.inf}, ValueError, "lam", "inf"),
    ({"clip": 0}, ValueError, "clip", "0"),
    ({"clip": NAN}, ValueError, "clip", "nan"),
    ({"classes": 1}, ValueError, "classes", "1"),
    ({"dim": 0}, ValueError, "dim", "0"),
    ({"epochs": 0}, ValueError, "epochs", "0"),
    ({"learning_rate": 0.0}, ValueError, "learning_rate", "0.0"),
]


@pytest.mark.parametrize("cls,kwargs,exc,param,shown",
                         [(PrivacyBudget, *c) for c in BUDGET_CASES] + [(Problem, *c) for c in PROBLEM_CASES],
                         ids=lambda v: v.__name__ if isinstance(v, type) else repr(v))
def test_value_types_reject_bad_parameters(cls, kwargs, exc, param, shown):
    with pytest.raises(exc) as info:
        cls(**kwargs)
    assert type(info.value) is exc
    assert names_param_and_value(str(info.value), param, shown), str(info.value)


def test_problem_accepts_edges():
    pb = Problem(n=16, teachers=16, batch_size=16)
    assert pb.sample_rate == 1.0
    assert Problem(n=1, teachers=1, batch_size=1).n == 1


def test_calibrate_unknown_method():
    with pytest.raises(ValueError) as info:
        calibrate("laplace", PrivacyBudget(1.0))
    msg = str(info.value)
    assert names_param_and_value(msg, "method", "'laplace'")
    assert all(name in msg for name in METHOD_NAMES)


@pytest.mark.parametrize("accounting", ["optimal", "", "Corrected", None])
def test_calibrate_unknown_accounting(accounting):
    with pytest.raises((ValueError, TypeError)) as info:
        calibrate("model_sensitivity", PrivacyBudget(1.0), Problem(), accounting)
    assert names_param_and_value(str(info.value), "accounting", repr(accounting)), str(info.value)


def test_calibrate_wrong_types():
    with pytest.raises(TypeError, match="budget"):
        calibrate("model_sensitivity", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="problem"):
        calibrate("model_sensitivity", PrivacyBudget(1.0), {"n": 5})  # type: ignore[arg-type]


@pytest.mark.parametrize("accounting", ACCOUNTING_MODES)
def test_dpsgd_pure_dp_is_calibration_error(accounting):
    with pytest.raises(CalibrationError) as info:
        calibrate("dpsgd", PrivacyBudget(1.0, 0.0), Problem(), accounting)
    msg = str(info.value)
    assert "delta > 0" in msg
    from privcore.methods import REGISTRY
    assert all(m in msg for m in METHOD_NAMES if REGISTRY[m].supports(0.0)), msg  # the delta = 0 alternatives
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("method", METHOD_NAMES)
@pytest.mark.parametrize("delta", [0.0, 1e-5])
@pytest.mark.parametrize("accounting", ACCOUNTING_MODES)
def test_infinite_epsilon_is_noise_free(method, delta, accounting):
    s = calibrate(method, PrivacyBudget(math.inf, delta), Problem(), accounting)
    assert s.noise == "none"
    assert s.sigma is None and s.beta is None and s.noise_multiplier is None
    assert s.to_dict()["epsilon"] == "inf"


# --------------------------------------------------------------------------------------------
# Library: closed forms
# --------------------------------------------------------------------------------------------


def test_loss_perturbation_calibrations():
    pb = Problem(classes=7)
    eps, delta, k = 0.8, 1e-6, SQRT2
    paper0 = calibrate("loss_perturbation", PrivacyBudget(eps), pb, "paper")
    corr0 = calibrate("loss_perturbation", PrivacyBudget(eps), pb, "corrected")
    eps1, dlt1 = 0.99 * eps, 0.99 * delta  # 1 % pays for the approximate-minima output noise
    assert paper0.beta == pytest.approx(eps / (2 * k), rel=1e-14)
    assert corr0.beta == pytest.approx(eps1 / (4 * k), rel=1e-14)
    assert paper0.rho == pytest.approx(7 / eps, rel=1e-14) and corr0.rho == pytest.approx(7 / eps1, rel=1e-14)
    # Output noise: Laplace-like at sensitivity 2g / (lam + rho/N) with 0.01 eps.
    g = 0.1 * pb.solver_tolerance
    assert corr0.solver_tolerance == pytest.approx(g)
    assert corr0.output_scale == pytest.approx(2 * g / (pb.lam + corr0.rho / pb.n) / (0.01 * eps), rel=1e-12)
    assert paper0.output_scale is None
    paper = calibrate("loss_perturbation", PrivacyBudget(eps, delta), pb, "paper")
    corr = calibrate("loss_perturbation", PrivacyBudget(eps, delta), pb, "corrected")
    tight = calibrate("loss_perturbation", PrivacyBudget(eps, delta), pb, "tight")
    assert paper.sigma == pytest.approx((k / eps) * math.sqrt(8 * math.log(2 / delta) + 4 * eps), rel=1e-14)
    # Multi-class replace-one: |<b, Delta>| <= 2K ||P b||, ||P b|| ~ sigma chi_{2C}. With r the chi_{2C}
    # quantile at 1 - delta, the noise part of the loss 2K r / sigma + 2K^2 / sigma^2 must equal eps/2.
    from scipy.stats import chi

    r = chi.isf(dlt1, 2 * 7)
    assert chi.sf(r, 14) == pytest.approx(dlt1, rel=1e-8)
    assert 2 * k * r / corr.sigma + 2 * k * k / corr.sigma ** 2 == pytest.approx(eps1 / 2, rel=1e-10)
    out = 2 * g / (pb.lam + corr.rho / pb.n)
    assert gaussian_delta(corr.output_scale, 0.01 * eps, out) <= 0.01 * delta * (1 + 1e-9)
    # Never less noise than a one-dimensional Gaussian tail at the same sensitivity and budget.
    assert corr.sigma > 2 * k * analytic_gaussian_sigma(eps / 2, delta, 1.0)
    assert tight.sigma <= corr.sigma
    assert paper.notes and not corr.notes  # the as-published variant is labelled


def test_model_and_prediction_sensitivity_gaussian():
    pb = Problem(n=6000, lam=0.01, budget=37)
    eps, delta = 0.8, 1e-6
    ms = calibrate("model_sensitivity", PrivacyBudget(eps, delta), pb)
    assert pb.sensitivity == pytest.approx(2 * SQRT2 / (6000 * 0.01))
    # corrected: the certified sensitivity, 1 % above the exact minimiser's (solver residual included)
    assert pb.certified_sensitivity == pytest.approx(pb.sensitivity * 1.01)
    assert ms.sigma == pytest.approx(analytic_gaussian_sigma(eps, delta, 1.0) * pb.certified_sensitivity, rel=1e-10)
    assert ms.sensitivity == pb.certified_sensitivity and ms.solver_tolerance == pb.solver_tolerance
    paper = calibrate("model_sensitivity", PrivacyBudget(eps, delta), pb, "paper")
    assert paper.sigma == pytest.approx(analytic_gaussian_sigma(eps, delta, 1.0) * pb.sensitivity, rel=1e-10)
    assert paper.notes and "exact minimiser" in paper.notes[0]
    ps = calibrate("prediction_sensitivity", PrivacyBudget(eps, delta), pb, "paper")
    assert ps.sigma <= analytic_gaussian_sigma(eps / 37, delta / 37, pb.sensitivity)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------

BAD_CLI = [
    # (arguments, words the one-line message must contain)
    (["--method", "model_sensitivity", "--epsilon", "0"], ["epsilon", "0"]),
    (["--method", "model_sensitivity", "--epsilon", "-1"], ["epsilon", "-1"]),
    (["--method", "model_sensitivity", "--epsilon", "nan"], ["epsilon", "nan"]),
    (["--method", "model_sensitivity", "--epsilon", "abc"], ["epsilon", "abc"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--delta=-0.1"], ["delta", "-0.1"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--delta", "1"], ["delta", "1"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--delta", "nan"], ["delta", "nan"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--n", "0"], ["n", "0"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--n", "2.5"], ["n", "2.5"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--n", "five"], ["n", "five"]),
    (["--method", "subsample_aggregate", "--epsilon", "1", "--n", "100", "--teachers", "200", "--batch-size", "50"],
     ["teachers", "200"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--budget", "0"], ["budget", "0"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--lam", "0"], ["lam", "0"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--lam", "nan"], ["lam", "nan"]),
    (["--method", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--n", "100", "--batch-size", "200"], ["batch_size", "200"]),
    (["--method", "dpsgd", "--epsilon", "1", "--delta", "1e-5", "--clip", "0"], ["clip", "0"]),
    (["--method", "laplace", "--epsilon", "1"], ["method", "laplace"]),
    (["--method", "model_sensitivity", "--epsilon", "1", "--accounting", "optimal"], ["accounting", "optimal"]),
    (["--method", "dpsgd", "--epsilon", "1", "--delta", "0"], ["delta > 0", "model_sensitivity", "loss_perturbation",
                                               "prediction_sensitivity", "subsample_aggregate"]),
    (["--epsilon", "1"], ["method"]),
]


def _word_in(word: str, msg: str) -> bool:
    if re.fullmatch(r"[a-z_]+", word) and len(word) <= 3:  # short parameter names: as a whole word
        return re.search(rf"(?<!\w){word}(?!\w)", msg, re.I) is not None
    return word.lower() in msg.lower()


@pytest.mark.parametrize("args,words", BAD_CLI, ids=lambda v: " ".join(v) if isinstance(v, list) else None)
def test_cli_bad_input_in_process(args, words, capsys):
    code = main(["calibrate", *args])
    out, err = capsys.readouterr()
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert all(_word_in(w, lines[0]) for w in words), lines[0]


def run_cli(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "privcore", "calibrate", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


EPS, N, LAM, B, C = 0.8, 6000, 0.01, 37, 7
# pure DP (delta = 0, the default being 1e-5) unless an entry says otherwise after COMMON
COMMON = ["--epsilon", str(EPS), "--delta", "0", "--n", str(N), "--lam", str(LAM), "--budget", str(B), "--classes", str(C),
          "--json"]
GOOD_CLI = {
    "ms": ["--method", "model_sensitivity", *COMMON],
    "ps": ["--method", "prediction_sensitivity", *COMMON],
    "sa_corrected": ["--method", "subsample_aggregate", *COMMON],
    "sa_paper": ["--method", "subsample_aggregate", "--accounting", "paper", *COMMON],
    "lp_corrected": ["--method", "loss_perturbation", *COMMON],
    "lp_paper": ["--method", "loss_perturbation", "--accounting", "paper", *COMMON],
    "lp_paper_gauss": ["--method", "loss_perturbation", "--accounting", "paper", *COMMON, "--delta", "1e-6"],
}

# Each real process costs ~1.5-2 s (importing torch), so a representative subset runs as
# `python -m privcore` processes (once per module, concurrently); the full tables run in-process
# through the same main() (argument parsing, validation, error reporting, JSON output).
SUBPROCESS_BAD = [BAD_CLI[i] for i in (0, 8, 18)]  # validation error, argparse type error, CalibrationError
SUBPROCESS_GOOD = ("sa_paper", "lp_paper_gauss")


@pytest.fixture(scope="module")
def cli_runs() -> dict:
    jobs = {("bad", i): args for i, (args, _) in enumerate(SUBPROCESS_BAD)}
    jobs.update({("good", k): GOOD_CLI[k] for k in SUBPROCESS_GOOD})
    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {key: pool.submit(run_cli, args) for key, args in jobs.items()}
        return {key: f.result() for key, f in futures.items()}


@pytest.mark.slow
@pytest.mark.parametrize("i", range(len(SUBPROCESS_BAD)))
def test_cli_bad_input_subprocess(cli_runs, i):
    proc = cli_runs[("bad", i)]
    words = SUBPROCESS_BAD[i][1]
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert all(_word_in(w, lines[0]) for w in words), lines[0]


REQUIRED_KEYS = ("method", "epsilon", "delta", "accounting", "noise", "sigma", "beta", "rho", "noise_multiplier",
                 "per_query_epsilon")


def check_json_text(stdout: str) -> dict:
    lines = stdout.strip().splitlines()
    assert len(lines) == 1, stdout
    obj = json.loads(lines[0])
    assert isinstance(obj, dict)
    assert set(REQUIRED_KEYS) <= set(obj), sorted(obj)
    assert obj["epsilon"] == pytest.approx(EPS)
    return obj


@pytest.fixture(scope="module")
def cli_json() -> dict:
    """In-process `calibrate ... --json` for every GOOD_CLI entry: key -> parsed object."""
    import contextlib
    import io

    out = {}
    for key, args in GOOD_CLI.items():
        buf, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):
            code = main(["calibrate", *args])
        assert code == 0, err.getvalue()
        out[key] = check_json_text(buf.getvalue())
    return out


@pytest.mark.slow
@pytest.mark.parametrize("key", SUBPROCESS_GOOD)
def test_cli_subprocess_json_matches_in_process(cli_runs, cli_json, key):
    proc = cli_runs[("good", key)]
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert check_json_text(proc.stdout) == cli_json[key]


def test_cli_model_sensitivity(cli_json):
    o = cli_json["ms"]
    assert (o["method"], o["accounting"], o["noise"], o["delta"]) == ("model_sensitivity", "corrected", "laplace_like", 0.0)
    # certified Delta = 2K/(N lam) + 2g/lam with g = 0.01 K/N: 1.01 times the exact minimiser's
    assert o["beta"] == pytest.approx(N * LAM * EPS / (2 * SQRT2 * 1.01), rel=1e-12)
    assert o["solver_tolerance"] == pytest.approx(0.01 * SQRT2 / N, rel=1e-12)
    assert o["sigma"] is None and o["rho"] is None and o["noise_multiplier"] is None and o["per_query_epsilon"] is None


def test_cli_prediction_sensitivity(cli_json):
    o = cli_json["ps"]
    assert o["noise"] == "laplace_like"
    assert o["beta"] == pytest.approx(N * LAM * EPS / (2 * SQRT2 * B * 1.01), rel=1e-12)
    assert o["per_query_epsilon"] == pytest.approx(EPS / B, rel=1e-12)
    assert o["sigma"] is None and o["rho"] is None and o["noise_multiplier"] is None


def test_cli_subsample_aggregate(cli_json):
    corr, paper = cli_json["sa_corrected"], cli_json["sa_paper"]
    assert corr["noise"] == paper["noise"] == "exponential_mechanism"
    assert corr["beta"] == pytest.approx(EPS / (2 * B), rel=1e-12)
    assert paper["beta"] == pytest.approx(EPS / B, rel=1e-12)
    assert paper["accounting"] == "paper" and corr["accounting"] == "corrected"
    assert corr["per_query_epsilon"] == pytest.approx(EPS / B, rel=1e-12)  # 2 beta
    assert corr["sigma"] is None and corr["rho"] is None and corr["noise_multiplier"] is None


def test_cli_loss_perturbation(cli_json):
    corr, paper = cli_json["lp_corrected"], cli_json["lp_paper"]
    for o, e in ((corr, 0.99 * EPS), (paper, EPS)):
        assert o["noise"] == "laplace_like"
        assert o["rho"] == pytest.approx(C / e, rel=1e-12)
        assert o["sigma"] is None and o["noise_multiplier"] is None and o["per_query_epsilon"] is None
    assert corr["beta"] == pytest.approx(0.99 * EPS / (4 * SQRT2), rel=1e-12)
    assert paper["beta"] == pytest.approx(EPS / (2 * SQRT2), rel=1e-12)
    gauss = cli_json["lp_paper_gauss"]
    assert gauss["noise"] == "gaussian" and gauss["delta"] == 1e-6 and gauss["beta"] is None
    assert gauss["sigma"] == pytest.approx((SQRT2 / EPS) * math.sqrt(8 * math.log(2 / 1e-6) + 4 * EPS), rel=1e-12)


def test_cli_json_in_process_dpsgd_and_inf(capsys):
    assert main(["calibrate", "--method", "dpsgd", "--epsilon", "2", "--delta", "1e-5", "--n", "1000",
                 "--batch-size", "100", "--epochs", "2", "--clip", "0.25", "--json"]) == 0
    o = json.loads(capsys.readouterr().out)
    assert o["noise"] == "gaussian" and o["beta"] is None and o["rho"] is None and o["per_query_epsilon"] is None
    assert o["sigma"] == pytest.approx(0.25 * o["noise_multiplier"])
    assert main(["calibrate", "--method", "subsample_aggregate", "--epsilon", "inf", "--json"]) == 0
    o = json.loads(capsys.readouterr().out)
    assert o["noise"] == "none" and o["epsilon"] == "inf" and o["beta"] is None


def test_cli_text_output(capsys):
    assert main(["calibrate", "--method", "model_sensitivity", "--epsilon", "1", "--delta", "0"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^\s*method: model_sensitivity$", out, re.M)
    assert re.search(r"^\s*beta: ", out, re.M)
    assert "sigma" not in out  # fields that do not apply are not printed


@pytest.mark.parametrize("method,kwargs,param", [("subsample_aggregate", {"n": 10, "teachers": 20, "batch_size": 5}, "teachers"),
                                                 ("dpsgd", {"n": 100, "batch_size": 200}, "batch_size")])
def test_a_methods_own_limit_refuses_only_that_method(method, kwargs, param):
    from privcore.calibration import calibrate_all

    pb = Problem(**kwargs)  # a valid problem: T <= N and batch <= N are the methods' own rules
    out = calibrate_all(PrivacyBudget(1.0, 1e-5), pb)
    assert isinstance(out[method], CalibrationError) and param in str(out[method])
    from privcore.methods import REGISTRY
    # only the methods that share that knob (the teacher-vote methods share T) are refused
    refused = {k for k, v in out.items() if isinstance(v, Exception)}
    assert method in refused and refused <= {k for k, m in REGISTRY.items() if param in m.uses or k == method}
