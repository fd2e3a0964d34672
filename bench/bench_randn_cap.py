"""How far torch.randn's float32 normals reach (prints the largest |z|; not a test).

    python bench/bench_randn_cap.py [--draws 1e9]

torch's CPU float32 normals come from 24-bit uniforms by Box-Muller, so |z| never exceeds
sqrt(2 * 24 ln 2) = 5.7681; a true normal exceeds 5.77 about 8 times in 1e9 draws. DP-SGD's noise therefore
comes from privcore.tails.gaussian_noise (docs/spec.md, "Sampling the noise"), whose largest |z| is printed
beside (it is not capped). About 10 s per 1e9 draws of each here.
"""

from __future__ import annotations

import argparse
import math

import torch

from privcore import tails


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draws", type=float, default=1e9)
    args = ap.parse_args()
    chunk, total = 50_000_000, int(args.draws)
    g = torch.Generator().manual_seed(1)
    top_randn = top_tails = 0.0
    for start in range(0, total, chunk):
        n = min(chunk, total - start)
        top_randn = max(top_randn, float(torch.randn(n, generator=g).abs().max()))
        top_tails = max(top_tails, float(tails.gaussian_noise(n, g).abs().max()))
    print(f"{total:.3g} draws: torch.randn float32 max |z| {top_randn:.7f} (cap sqrt(2 * 24 ln 2) = "
          f"{math.sqrt(48 * math.log(2)):.7f}); tails.gaussian_noise max |z| {top_tails:.7f}")
    print(f"expected count above 5.77 for a true normal: {total * math.erfc(5.77 / math.sqrt(2)):.2f}")


if __name__ == "__main__":
    main()
