"""Copy as code: the CLI command and the privcore Python call that reproduce a :class:`SweepSpec`.

Both are generated from the spec itself, so what a chart shows can be recomputed outside the
dashboard. By default they ask for secure noise (``--secure-noise`` / ``secure_noise=True``): code
copied out of the dashboard is what someone may run to publish a release, and a release whose noise
comes from a public seed can be undone by anyone who knows the seed. Without it
(``secure_noise=False``) they give the chart's rows exactly (same seed, same data, same knobs;
tested). A user's uploaded file appears under a name the caller chooses (its own file name), never
as a server path.
"""

from __future__ import annotations

import math
import shlex
from dataclasses import MISSING, fields
from typing import Any

from .. import knobs
from .specs import SweepSpec

__all__ = ["cli_command", "python_code"]

# SweepSpec field -> the knob whose CLI flag sets it.
_KNOB_OF = {"delta": "delta", "budget": "budget", "lam": "lam", "teachers": "teachers", "batch_size": "batch_size",
            "epochs": "epochs", "clip": "clip", "learning_rate": "learning_rate", "accounting": "accounting",
            "repeats": "repeats", "seed": "seed", "device": "device"}


def _num(v: Any) -> str:
    if isinstance(v, float):
        if math.isinf(v):
            return "inf"
        return repr(v)
    return str(v)


def _data_file(spec: SweepSpec, data_file_name: str | None) -> str | None:
    if spec.data.data_file is None:
        return None
    return data_file_name or spec.data.data_file


def cli_command(spec: SweepSpec, *, data_file_name: str | None = None, secure_noise: bool = True) -> str:
    """``python -m privcore sweep ...`` with every knob of ``spec`` spelled out (shell-quoted), ending
    with ``--secure-noise`` unless ``secure_noise`` is False (and the spec does not ask for it)."""
    d = spec.data
    args = ["python", "-m", "privcore", "sweep", "--dataset", d.name]
    path = _data_file(spec, data_file_name)
    if path is not None:
        args += ["--data-file", path]
        if d.label_column is not None:
            args += ["--label-column", d.label_column]
        if d.labels is not None:
            args += ["--labels", d.labels]
        if d.preprocess != "none":
            args += ["--preprocess", d.preprocess]
    for name in ("n", "dim", "classes"):
        v = getattr(d, name)
        if v is not None:
            args += [knobs.knob(name).cli_flag, str(v)]
    args += ["--methods", ",".join(spec.methods), "--epsilons", ",".join(_num(e) for e in spec.epsilons)]
    for fname, kname in _KNOB_OF.items():
        args += [knobs.knob(kname).cli_flag, _num(getattr(spec, fname))]
    if spec.vary is not None:
        args += ["--vary", spec.vary, "--values", ",".join(_num(v) for v in spec.values)]
    if spec.tuning != "configured":
        args += ["--tuning", spec.tuning]
    if secure_noise or spec.secure_noise:
        args.append("--secure-noise")
    return " ".join(shlex.quote(a) for a in args)


def _kwargs(obj: Any, skip: tuple[str, ...] = ()) -> list[str]:
    """``name=value`` for the fields of a frozen dataclass that differ from their defaults."""
    out = []
    for f in fields(obj):
        if f.name in skip:
            continue
        v = getattr(obj, f.name)
        if f.default is not MISSING:
            default = f.default
        elif f.default_factory is not MISSING:
            default = f.default_factory()
        else:
            default = MISSING
        if v == default:
            continue
        out.append(f"{f.name}={_literal(v)}")
    return out


def _literal(v: Any) -> str:
    if isinstance(v, float) and math.isinf(v):
        return "float('inf')"
    if isinstance(v, tuple):
        inner = ", ".join(_literal(x) for x in v)
        return f"({inner},)" if len(v) == 1 else f"({inner})"
    return repr(v)


#: The comment above ``secure_noise=True`` in the Python snippet.
SECURE_COMMENT = ("# Noise from the operating system's entropy, never shown or stored: what a release you publish\n"
                  "    # needs (anyone who knows a seed can recompute its noise). secure_noise=False reproduces the\n"
                  "    # dashboard's rows exactly from the seed, for exploring.")


def python_code(spec: SweepSpec, *, data_file_name: str | None = None, secure_noise: bool = True) -> str:
    """A runnable Python snippet that builds ``spec`` and prints its rows (method, x, accuracy);
    with ``secure_noise=True`` (unless False and the spec does not ask for it), commented."""
    data_args = _kwargs(spec.data, skip=("data_file",))
    path = _data_file(spec, data_file_name)
    if path is not None:
        data_args.insert(1 if data_args and data_args[0].startswith("name=") else 0, f"data_file={path!r}")
    spec_args = [f"data=DataSpec({', '.join(data_args)})"] + _kwargs(spec, skip=("data", "secure_noise"))
    if secure_noise or spec.secure_noise:
        spec_args.append(f"{SECURE_COMMENT}\n    secure_noise=True")
    body = ",\n    ".join(spec_args)
    x = spec.vary or "epsilon"
    return (
        "from privcore.engine.runner import run_sweep\n"
        "from privcore.engine.specs import DataSpec, SweepSpec\n\n"
        f"spec = SweepSpec(\n    {body},\n)\n"
        "result = run_sweep(spec)\n"
        "for row in result.rows:\n"
        f"    print(row['method'], row[{x!r}], round(row['accuracy_mean'], 4), round(row['accuracy_std'], 4))\n"
    )

