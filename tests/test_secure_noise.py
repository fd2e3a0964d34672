"""Secure noise (issue 29, item 4): a release someone may publish draws its noise from the operating
system's entropy, whose seed is never shown or stored; the default, exploratory mode stays reproducible.

With a public seed anyone can recompute every noise draw of a release and subtract it. ``secure_noise``
(``SweepSpec``, ``sweep --secure-noise``, and "Copy as code" by default) seeds each release's
generators with a fresh :func:`privcore.device.secure_seed` instead.
"""

from __future__ import annotations

import contextlib
import io
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from privcore import device
from privcore.cli import main
from privcore.engine import context, tuning
from privcore.engine.cache import ResultCache
from privcore.engine.runner import read_cached, run_sweep
from privcore.engine.units import SECURE_NOTE
from privcore.engine.specs import DataSpec, SweepSpec

SPEC = SweepSpec(data=DataSpec(name="digits", n=300, augment=False),
                 methods=("model_sensitivity", "subsample_aggregate", "prediction_sensitivity"),
                 epsilons=(0.3, 1.0), delta=1e-5, budget=10, teachers=8, repeats=3, seed=3, baseline=False)


@pytest.fixture
def drawn(monkeypatch):
    """Every secret seed drawn, in order (the real ones: os entropy)."""
    seeds: list[int] = []
    real = device.secure_seed

    def spy() -> int:
        seeds.append(real())
        return seeds[-1]

    monkeypatch.setattr(device, "secure_seed", spy)
    return seeds


def _numbers(result) -> list[tuple]:
    return [(r.method, r.epsilon, r.accuracy_mean, r.accuracy_std) for r in result.rows]


@pytest.mark.slow
def test_two_secure_releases_differ_and_the_exploratory_mode_stays_reproducible(tmp_path, drawn):
    cache = ResultCache(tmp_path / "cache")
    secure = replace(SPEC, secure_noise=True)
    a, b = run_sweep(secure, cache=cache), run_sweep(secure, cache=cache)
    assert [n[:2] for n in _numbers(a)] == [n[:2] for n in _numbers(b)]
    # Every row of the second release differs from the first's: fresh noise for each, none read from a cache.
    assert all(x != y for x, y in zip(_numbers(a), _numbers(b))), (_numbers(a), _numbers(b))
    assert all(SECURE_NOTE in (r.note or "") for r in a.rows) and a.cached == b.cached == 0
    # One secret seed per (method, epsilon) and release: epsilons never share a draw.
    assert len(drawn) == 2 * len(a.rows) and len(set(drawn)) == len(drawn)
    # Nothing stored: neither under the secure spec nor under the exploratory keys of the same points.
    assert read_cached(secure, cache) is None and read_cached(SPEC, cache) is None
    # Exploring: the same seed gives the same rows, run after run, and no secret seed is drawn.
    before = len(drawn)
    e1, e2 = run_sweep(SPEC, use_cache=False), run_sweep(SPEC, use_cache=False)
    assert _numbers(e1) == _numbers(e2) and len(drawn) == before
    assert not any(SECURE_NOTE in (r.note or "") for r in e1.rows)


def _texts(root: Path) -> str:
    return "\n".join(p.read_bytes().decode("utf-8", "replace") for p in root.rglob("*") if p.is_file())


@pytest.mark.slow
def test_the_secret_seed_is_never_shown_or_stored(tmp_path, monkeypatch, drawn, capsys):
    """The CLI with --secure-noise (lam = auto too: the selection's seed is secret as well): no seed
    drawn appears in its output (JSON and CSV), its warnings and progress, the result cache's
    folder, the rows or the spec; and no context holding one is kept in the process's memos."""
    monkeypatch.setenv("PRIVCORE_CACHE", str(tmp_path))
    argv = ["sweep", "--dataset", "digits", "--n", "300", "--methods", "model_sensitivity,subsample_aggregate",
            "--epsilons", "0.3,1", "--repeats", "2", "--teachers", "8", "--lam", "auto", "--secure-noise"]
    shown = []
    for fmt in ("json", "csv"):
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main([*argv, "--format", fmt]) == 0
        shown.append(capsys.readouterr().out + err.getvalue())
    assert "operating system" in shown[0]  # the rows say how their noise was drawn
    # Per run: 2 methods x 2 epsilons, each a selection and a release, and the non-private baseline's context.
    assert len(drawn) == 2 * (2 * 2 * 2 + 1) and len(set(drawn)) == len(drawn)
    result = run_sweep(replace(SPEC, methods=("model_sensitivity",), lam="auto", secure_noise=True))
    everything = "\n".join(shown) + _texts(tmp_path) + repr(result) + result.spec.to_json()
    for seed in drawn:
        for form in (str(seed), f"{seed:x}", f"{seed:X}", f"{seed:.6g}", f"{float(seed)!r}"):
            assert form not in everything, form
    kept = {k[1] for k in context._CONTEXTS} | {k[1] for k in tuning._SUB_CONTEXT}
    assert not kept & set(drawn)


def test_make_generator_without_a_seed_is_fresh_every_time():
    a = torch.rand(8, generator=device.make_generator(None, "x"))
    b = torch.rand(8, generator=device.make_generator(None, "x"))
    assert not torch.equal(a, b)
    c, d = (torch.rand(8, generator=device.make_generator(3, "x")) for _ in range(2))
    assert torch.equal(c, d)  # a seed: the same stream
    assert 0 <= device.secure_seed() < 2 ** 63


def test_the_flag_travels_and_the_exploratory_spec_keeps_its_key():
    secure = replace(SPEC, secure_noise=True)
    assert '"secure_noise": true' in secure.to_json() and SweepSpec.from_json(secure.to_json()) == secure
    assert "secure_noise" not in SPEC.to_json()  # existing keys (cache, URLs, in-flight) unchanged
    with pytest.raises(TypeError, match="secure_noise must be True or False"):
        replace(SPEC, secure_noise="yes")
