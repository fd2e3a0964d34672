#!/usr/bin/env bash
# The paper's Figure 7 on Fashion-MNIST with the ResNet-20 (GroupNorm) of Section 4.3: a GPU job.
# Writes docs/figures/fig7{a,b}_fashion-mnist_resnet20.csv and prints the time each panel took.
# Resumable: finished points are cached and a training in progress is checkpointed every minute,
# so running it again after an interruption continues where it stopped.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
python -m privcore deep --dataset fashion-mnist --preset paper --device "${DEVICE:-cuda}" \
    --teacher-mode "${TEACHER_MODE:-auto}" --figure7 docs/figures "$@"
echo "Figure 7 (Fashion-MNIST, ResNet-20): $(( $(date +%s) - start )) s in total"
