"""Ghost clipping against torch.func on CUDA and on the CPU, same ResNet-20 weights and images: the
largest relative differences per parameter and of the norms, computed inside
privcore.precision.exact_fp32 (prints a table).

    python bench/gpu_ghost_check.py [--batch 24] [--size 32] [--deterministic]

A diagnostic for tests/deep/test_deep_gpu.py::test_ghost_clipping_matches_torch_func_on_the_gpu.
"""

from __future__ import annotations

import argparse


import torch

from privcore.deep.dpsgd import clip_and_sum, per_sample_grads
from privcore.deep.ghost import ghost_clip_and_sum
from privcore.deep.models import build_model
from privcore.precision import exact_fp32


def _gen(seed: int, device: str) -> torch.Generator:
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.double() - b.double()).norm() / b.double().norm().clamp_min(1e-30))


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--batch", type=int, default=24)
    p.add_argument("--size", type=int, default=32)
    p.add_argument("--channels", type=int, default=3)
    p.add_argument("--deterministic", action="store_true", help="cuDNN's deterministic algorithms only")
    p.add_argument("--like-test", action="store_true",
                   help="weights and images drawn on CUDA, as tests/deep/test_deep_gpu.py draws them")
    args = p.parse_args()
    p_det = args.deterministic
    torch.backends.cudnn.deterministic = p_det
    print(f"cuDNN deterministic: {p_det}; TF32 off only inside privcore.precision.exact_fp32")
    gdev = "cuda" if args.like_test else "cpu"  # where the weights and images are drawn
    x = torch.randn(args.batch, args.channels, args.size, args.size, generator=_gen(1, gdev), device=gdev).cpu()
    y = torch.arange(args.batch) % 10
    model = build_model("resnet20", args.channels, 10, _gen(0, gdev), gdev, size=args.size).cpu()
    res = {}
    for dev in ("cpu", "cuda"):
        m = build_model("resnet20", args.channels, 10, _gen(0, "cpu"), "cpu", size=args.size).to(dev)
        m.load_state_dict(model.state_dict())
        params = {k: v.detach().to(dev) for k, v in m.named_parameters()}
        for dtype in (torch.float32, torch.float64):
            pd = {k: v.to(dtype) for k, v in params.items()}
            md = m.to(dtype)
            with exact_fp32(dev):
                res[dev, dtype, "func"] = clip_and_sum(per_sample_grads(md, pd, {}, x.to(dev, dtype), y.to(dev)), 1.0)
                res[dev, dtype, "ghost"] = ghost_clip_and_sum(md, pd, {}, x.to(dev, dtype), y.to(dev), 1.0)
    ref_sums, ref_norms = res["cpu", torch.float64, "func"]
    print("| variant | norms rel. | worst parameter | its rel. difference |\n|---|---|---|---|")
    for key, (sums, norms) in res.items():
        diffs = {k: rel(sums[k].cpu(), ref_sums[k]) for k in ref_sums}
        worst = max(diffs, key=diffs.get)
        print(f"| {key[0]} {str(key[1]).replace('torch.', '')} {key[2]} | {rel(norms.cpu(), ref_norms):.2e} | "
              f"{worst} | {diffs[worst]:.2e} | conv.weight {diffs['conv.weight']:.2e} |")
    n64 = ref_norms
    print("norms (float64, CPU): min %.4g median %.4g max %.4g; clip 1" % (n64.min(), n64.median(), n64.max()))


if __name__ == "__main__":
    main()
