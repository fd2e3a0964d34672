#!/usr/bin/env bash
# One lease of a lent GPU machine (the `device` tool): install the carried wheels, then run the GPU checks
# the developers' guide asks for, each under its own time limit, logs under $OUT (or bench/out/gpu).
#
#   bash bench/gpu_session.sh checks          # pytest -m gpu, bench_deep.py on CUDA, bench_engine.py --max-n 1e6
#   bash bench/gpu_session.sh PART [PART...]  # any of: deep deep-variants pytest engine ghost-check large-n fig7
#   FIG7_ARGS="--epochs 10" bash bench/gpu_session.sh fig7   # Figure 7 with arguments of `privcore deep`
#   (FIG7_PRESET / FIG7_DEVICE: another preset or device, e.g. cpu-small on cpu to try the resume here)
#
# The machine's own torch (2.11 with CUDA) is used; packages it lacks travel as wheels in .whl/ and the
# Fashion-MNIST idx files in .fmnist/ (both ignored by git, named in the tool's `carry`).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${OUT:-bench/out/gpu}"; mkdir -p "$out"
if [ -d .whl ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH="/tmp/site:$PWD"
fi
[ -d .fmnist ] && export PRIVCORE_FASHION_MNIST_DIR="$PWD/.fmnist"
export PYTHONUNBUFFERED=1 PRIVCORE_CACHE="${PRIVCORE_CACHE:-/tmp/privcore_cache}"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.sm --format=csv,noheader | tee "$out/gpu.txt"
python3 -c "import torch, numpy, scipy, opacus, dp_accounting, privcore; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), 'numpy', numpy.__version__, 'scipy', scipy.__version__, 'opacus', opacus.__version__, 'cpus', __import__('os').cpu_count())" 2>&1 | tee -a "$out/gpu.txt" || exit 1
step() {  # step NAME SECONDS CMD...: run CMD under a time limit, log to $out/NAME.txt, report its time
  local name=$1 limit=$2; shift 2; local t0=$(date +%s%N)
  timeout "$limit" "$@" > "$out/$name.txt" 2>&1; local rc=$?
  printf '== %s: rc %s, %s ms (limit %s s)\n' "$name" "$rc" "$(( ($(date +%s%N) - t0) / 1000000 ))" "$limit" | tee -a "$out/summary.txt"
}
[ $# -eq 0 ] || [ "$1" = checks ] && set -- deep pytest engine  # what the developers' guide asks for on every lease
for part in "$@"; do case "$part" in
  deep)
    step deep 150 python3 bench/bench_deep.py --device cuda --batch 600 --rounds 5 --skip-preset --channels-last
    tail -40 "$out/deep.txt" ;;
  deep-variants)  # ResNet-20 only, with ghost clipping's routes, autocast and the TF32 comparison
    step deep_variants 200 python3 bench/bench_deep.py --device cuda --batch 600 --rounds 5 --skip-preset \
      --skip-teachers --models resnet20 --gpu-variants
    tail -30 "$out/deep_variants.txt" ;;
  pytest)
    step pytest_gpu 150 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_noise.py tests/deep/test_deep_gpu.py \
      tests/test_leakage_run.py tests/test_engine.py
    tail -15 "$out/pytest_gpu.txt" ;;
  engine)
    step engine "${ENGINE_LIMIT:-280}" python3 bench/bench_engine.py --device cuda --max-n 1000000 --loop-fraction 0.02
    tail -45 "$out/engine.txt" ;;
  ghost-check)  # ghost clipping against torch.func, CUDA and CPU, TF32 off
    step ghost_check 120 python3 bench/gpu_ghost_check.py
    step ghost_check_det 120 python3 bench/gpu_ghost_check.py --deterministic
    step ghost_check_like_test 120 python3 bench/gpu_ghost_check.py --deterministic --like-test
    cat "$out/ghost_check.txt" "$out/ghost_check_det.txt" "$out/ghost_check_like_test.txt" ;;
  large-n)  # N = 1,000,000: the four-method sweep's parts
    step large_n 200 python3 bench/bench_large_n.py --n 1000000 --device cuda
    tail -40 "$out/large_n.txt" ;;
  fig7)  # FIG7_ARGS: extra arguments of python -m privcore deep (e.g. reduced epochs)
    # Across leases: a carried .fig7cache/ (finished points, the checkpoint in progress) seeds the result cache,
    # and the cache comes back as $out/fig7_cache.tgz.part-* (15 MB pieces); see docs/gpu/README.md.
    if [ -d .fig7cache ]; then mkdir -p "$PRIVCORE_CACHE" && cp -r .fig7cache/. "$PRIVCORE_CACHE/"; fi
    step fig7 "${FIG7_LIMIT:-540}" python3 -m privcore deep --dataset fashion-mnist --preset "${FIG7_PRESET:-paper}" \
      --device "${FIG7_DEVICE:-cuda}" --figure7 "$out" ${FIG7_ARGS:-}
    tail -30 "$out/fig7.txt"
    rm -f "$out"/fig7_cache.tgz.part-*
    tar -C "$PRIVCORE_CACHE" -cf - . | gzip -1 | split -b 15m - "$out/fig7_cache.tgz.part-"
    parts=$(ls "$out"/fig7_cache.tgz.part-* | wc -l)
    echo "result cache: $parts piece(s) of at most 15 MB in $out" | tee -a "$out/summary.txt"
    [ "$parts" -le 3 ] || echo "WARNING: more than 3 pieces: some will not come back (8 files per call)" ;;
  *) echo "unknown part $part"; exit 2 ;;
esac; done
cat "$out/summary.txt"
