#!/usr/bin/env bash
# The one script a lease of a lent GPU machine (the `device` tool) runs, in about 9 minutes:
#
#   bash bench/gpu_session.sh                 # install, pytest -m gpu, bench_deep.py on CUDA, the next piece of Figure 7
#   bash bench/gpu_session.sh PART [PART...]  # any of: pytest deep fig7, or engine ghost-check large-n deep-variants
#   DRY=1 bash bench/gpu_session.sh           # the same steps on this CPU, tiny: checks the script, not the GPU
#
# Logs under $OUT (or bench/out/gpu), one file per step, times in summary.txt. Carry (the device tool's `carry`):
# .whl/ (wheels the machine's Python lacks: installed with pip, no index), .fmnist/ (the Fashion-MNIST idx files)
# and, from the second Figure 7 piece on, .fig7cache/ (the result cache the last piece returned). The package is
# installed with `pip install -e .` (no PYTHONPATH); the machine's own torch is used.
# Figure 7 (bench/figure7_deep.sh, the paper's settings on Fashion-MNIST) runs for FIG7_LIMIT seconds (default
# 240), checkpoints, and returns the cache as $OUT/fig7_cache.tgz.part-* (15 MB pieces) for the next lease:
#   mkdir -p .fig7cache && cat <files_at>/fig7_cache.tgz.part-* | tar -xz -C .fig7cache
# When the figure is complete its two CSVs come back in $OUT/figures/ (copy them to docs/figures/).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out/gpu}"; mkdir -p "$out"
: > "$out/summary.txt"
if [ -n "${DRY:-}" ]; then dev=cpu; else dev=cuda; fi

step() {  # step NAME SECONDS CMD...: run CMD under a time limit, log to $out/NAME.txt, report its time
  local name=$1 limit=$2; shift 2; local t0; t0=$(date +%s%N)
  timeout -k 30 "$limit" "$@" > "$out/$name.txt" 2>&1; local rc=$?
  printf '== %s: rc %s, %s ms (limit %s s)\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$limit" \
    | tee -a "$out/summary.txt"
}

install() {  # the carried wheels, then this checkout as an editable package (no PYTHONPATH anywhere)
  # (DRY: the wheels are for the GPU machine's Python; this machine has the packages already)
  if [ -z "${DRY:-}" ] && [ -d .whl ] && compgen -G ".whl/*.whl" > /dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/*.whl || return 1
  fi
  # Asked from another folder: from the checkout's root, `import privcore` finds the source folder
  # itself, and the scripts under bench/ (run as files) would still not find it.
  local here; here=$(cd / && python3 -c "import pathlib, privcore; print(pathlib.Path(privcore.__file__).resolve().parents[1])" \
                     2>/dev/null)
  if [ "$here" != "$PWD" ]; then
    # pip's editable install needs setuptools >= 64 on the machine (no index): else the same by a .pth file
    python3 -m pip install -q --no-index --no-deps --no-build-isolation -e . \
      || echo "$PWD" > "$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/privcore-checkout.pth" \
      || return 1
  fi
  python3 -c "import privcore, torch, opacus; print('privcore from', privcore.__file__)"
}

[ -d .fmnist ] && export PRIVCORE_FASHION_MNIST_DIR="$PWD/.fmnist"
export PYTHONUNBUFFERED=1 PRIVCORE_CACHE="${PRIVCORE_CACHE:-/tmp/privcore_cache}"
install > "$out/install.txt" 2>&1 || { cat "$out/install.txt"; echo "install failed"; exit 1; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader 2>/dev/null || echo "no GPU"
  python3 -c "import os, torch, numpy, scipy, opacus, dp_accounting, privcore; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'opacus', opacus.__version__, 'cpus', os.cpu_count(), 'load', os.getloadavg())"
} 2>&1 | tee "$out/machine.txt"

[ $# -eq 0 ] && set -- pytest deep fig7  # the default: what a GPU lease runs
for part in "$@"; do case "$part" in
  pytest)
    step pytest_gpu "${PYTEST_LIMIT:-100}" python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_noise.py \
      tests/deep/test_deep_gpu.py tests/deep/test_deep_teacher_independence.py tests/test_leakage_run.py tests/test_engine.py
    tail -15 "$out/pytest_gpu.txt" ;;
  deep)  # the issue's table: non-private, privcore's routes, Opacus hooks and ghost mode; batches 600 and 2,048
    if [ -n "${DRY:-}" ]; then
      step deep 300 python3 bench/bench_deep.py --device cpu --models small-cnn --batches 16 --rounds 1 --steps 1 \
        --skip-teachers --skip-preset --fast
    else
      step deep "${DEEP_LIMIT:-150}" python3 bench/bench_deep.py --device cuda --batches 600,2048 --rounds 5 \
        --skip-teachers --skip-preset --fast
    fi
    tail -8 "$out/deep.txt"
    # whole training steps: Poisson batches split at the old physical batch (600) against one call (1,024)
    if [ -n "${DRY:-}" ]; then
      step deep_steps 200 python3 bench/bench_deep_steps.py --device cpu --models small-cnn --n 2000 --batch 20 \
        --physical 20,1024 --rounds 1 --steps 2
    else
      step deep_steps "${STEPS_LIMIT:-90}" python3 bench/bench_deep_steps.py --device cuda
    fi
    tail -5 "$out/deep_steps.txt"
    # DP-SGD's exact-tailed noise against torch.randn on the card (one host read-back per draw)
    step dpsgd_noise 60 python3 bench/bench_dpsgd_noise.py --device "$dev" --rounds "${NOISE_ROUNDS:-15}"
    tail -6 "$out/dpsgd_noise.txt" ;;
  fig7)
    if [ -d .fig7cache ]; then mkdir -p "$PRIVCORE_CACHE" && cp -r .fig7cache/. "$PRIVCORE_CACHE/"; fi
    if [ -n "${DRY:-}" ]; then
      step fig7 200 env -u DRY PRESET=cpu-small DEVICE=cpu PIECE_SECONDS="${FIG7_LIMIT:-30}" OUTDIR="$out/figures" \
        bash bench/figure7_deep.sh
    else
      step fig7 $(( ${FIG7_LIMIT:-240} + 120 )) env PIECE_SECONDS="${FIG7_LIMIT:-240}" OUTDIR="$out/figures" \
        bash bench/figure7_deep.sh
    fi
    tail -12 "$out/fig7.txt"
    rm -f "$out"/fig7_cache.tgz.part-*
    tar -C "$PRIVCORE_CACHE" -cf - . | gzip -1 | split -b 15m - "$out/fig7_cache.tgz.part-"
    parts=$(ls "$out"/fig7_cache.tgz.part-* | wc -l)
    echo "result cache: $parts piece(s) of at most 15 MB in $out" | tee -a "$out/summary.txt"
    [ "$parts" -le 3 ] || echo "WARNING: more than 3 pieces: some will not come back (8 files per call)" ;;
  engine)
    step engine "${ENGINE_LIMIT:-280}" python3 bench/bench_engine.py --device "$dev" --max-n 1000000 --loop-fraction 0.02
    tail -45 "$out/engine.txt" ;;
  deep-variants)  # ResNet-20 only, with ghost clipping's older settings and the TF32 comparison
    step deep_variants 200 python3 bench/bench_deep.py --device "$dev" --batches 600 --rounds 5 --skip-preset \
      --skip-teachers --models resnet20 --gpu-variants
    tail -8 "$out/deep_variants.txt" ;;
  deep-teachers)  # 16 teachers vmapped against one by one
    step deep_teachers 200 python3 bench/bench_deep.py --device "$dev" --batches 600 --rounds 3 --skip-preset \
      --models resnet20,small-cnn
    tail -8 "$out/deep_teachers.txt" ;;
  ghost-check)  # ghost clipping against torch.func, CUDA and CPU, TF32 off
    step ghost_check 120 python3 bench/gpu_ghost_check.py
    step ghost_check_det 120 python3 bench/gpu_ghost_check.py --deterministic
    cat "$out/ghost_check.txt" "$out/ghost_check_det.txt" ;;
  large-n)  # N = 1,000,000: the four-method sweep's parts
    step large_n 200 python3 bench/bench_large_n.py --n 1000000 --device "$dev"
    tail -40 "$out/large_n.txt" ;;
  *) echo "unknown part $part"; exit 2 ;;
esac; done
cat "$out/summary.txt"
