#!/usr/bin/env bash
# The paper's Figure 7 on Fashion-MNIST with the ResNet-20 (GroupNorm) of Section 4.3, in resumable pieces.
#
#   bash bench/figure7_deep.sh                 # everything that is missing, however long it takes
#   PIECE_SECONDS=300 bash bench/figure7_deep.sh   # one piece: stops (Ctrl-C, checkpointed) after 300 s
#   DRY=1 bash bench/figure7_deep.sh           # say what the next piece would run, train nothing
#
# Settings: the `paper` preset (all 60,000 / 10,000 images, batch 600, lr 0.1 divided by 10 three times, flips
# and crops, T = 16, delta = 1e-5, `corrected`), DP-SGD EPOCHS (100) and teachers TEACHER_EPOCHS (500), as the
# paper; PRESET=cpu-small DEVICE=cpu tries the plumbing on a CPU. Finished points go to the result cache
# ($PRIVCORE_CACHE) and a training in progress is checkpointed every minute and when the piece's time is up, so
# the next piece (the next lease, with the cache carried) continues where this one stopped.
# Order: DP-SGD at each epsilon and the non-private reference first (each checkpoint is one model, ~2 MB, so a
# cache in progress fits the device tool's carry), then the 16 teachers and their votes (their checkpoint is
# 16 models, ~37 MB: give that piece time to finish them). When nothing is missing the CSVs go to OUTDIR
# (docs/figures) as fig7{a,b}_fashion-mnist_resnet20_<card>[_e<EPOCHS>_t<TEACHER_EPOCHS>].csv: the name says
# the card and, when they differ from the paper's, the epochs; the columns say everything else.
set -uo pipefail
cd "$(dirname "$0")/.."
PRESET="${PRESET:-paper}"
DEVICE="${DEVICE:-cuda}"
EPOCHS="${EPOCHS:-100}"
TEACHER_EPOCHS="${TEACHER_EPOCHS:-500}"
OUTDIR="${OUTDIR:-docs/figures}"
start=$(date +%s)
args=(--dataset fashion-mnist --preset "$PRESET" --device "$DEVICE" --teacher-mode "${TEACHER_MODE:-auto}")
[ "$PRESET" = paper ] && args+=(--epochs "$EPOCHS" --teacher-epochs "$TEACHER_EPOCHS")

# What is missing, and so which methods this piece trains: DP-SGD (and the reference) while any of it is missing.
status=$(python3 - "$PRESET" "$EPOCHS" "$TEACHER_EPOCHS" <<'EOF'
import sys
from privcore.deep.run import missing_units
from privcore.deep.spec import figure7_specs

preset, epochs, teacher_epochs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
extra = {"epochs": epochs, "teacher_epochs": teacher_epochs} if preset == "paper" else {}
units = []
for spec in figure7_specs(preset, dataset="fashion-mnist", **extra):
    units += [u for u in missing_units(spec) if u not in units]
first = [u for u in units if u[0] != "teachers"]
print("dpsgd" if first else ("all" if units else "none"), len(units), " ".join(":".join(map(str, u)) for u in units))
EOF
) || { echo "figure7_deep.sh: could not read the cache's state (is privcore installed? pip install -e .)"; exit 2; }
read -r methods left units <<< "$status"
what="$PRESET"; [ "$PRESET" = paper ] && what="paper, DP-SGD ${EPOCHS} epochs, teachers ${TEACHER_EPOCHS}"
echo "Figure 7 ($what): ${left} unit(s) missing: ${units:-none}"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oiE '\b[A-Z][0-9]{2,3}\b' | head -1 \
       | tr 'A-Z' 'a-z')
card="${card:-$DEVICE}"
suffix=""
[ "$PRESET" = paper ] && { [ "$EPOCHS" = 100 ] && [ "$TEACHER_EPOCHS" = 500 ] || suffix="_e${EPOCHS}_t${TEACHER_EPOCHS}"; }
[ "$PRESET" = paper ] || suffix="_${PRESET}"
model=$([ "$PRESET" = paper ] && echo resnet20 || echo small-cnn)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if [ "$methods" = dpsgd ]; then
  args+=(--methods dpsgd)
  echo "this piece: DP-SGD and the non-private reference (the teachers come after)"
elif [ "$methods" = all ]; then
  echo "this piece: the teachers, their votes, and both CSVs"
else
  echo "this piece: nothing to train; writing both CSVs"
fi
if [ -n "${DRY:-}" ]; then
  echo "dry run: python3 -m privcore deep ${args[*]} --figure7 $tmp (limit ${PIECE_SECONDS:-none} s)"
  echo "CSVs when complete: $OUTDIR/fig7{a,b}_fashion-mnist_${model}_${card}${suffix}.csv"
  exit 0
fi
# python -m privcore deep, with SIGTERM and SIGINT raising KeyboardInterrupt (also where the shell started it with
# SIGINT ignored, as in a background job): the CLI then checkpoints the training in progress and exits 130.
wrap='import runpy, signal, sys
def stop(*_):
    raise KeyboardInterrupt
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
sys.argv = ["privcore", "deep", *sys.argv[1:]]
runpy.run_module("privcore", run_name="__main__", alter_sys=True)'
if [ -n "${PIECE_SECONDS:-}" ]; then
  timeout -s TERM -k 90 "$PIECE_SECONDS" python3 -c "$wrap" "${args[@]}" --figure7 "$tmp"; rc=$?
else
  python3 -c "$wrap" "${args[@]}" --figure7 "$tmp"; rc=$?
fi
took=$(( $(date +%s) - start ))
if [ "$rc" -ne 0 ]; then
  echo "piece stopped after ${took} s (rc $rc): finished points are cached, the training in progress checkpointed;" \
       "run again (with the cache) to continue"
  exit 0
fi
if [ "$methods" = dpsgd ]; then
  echo "piece finished DP-SGD and the reference in ${took} s; the teachers are next: run again"
  exit 0
fi
mkdir -p "$OUTDIR"
for panel in a b; do
  mv "$tmp/fig7${panel}_fashion-mnist_${model}.csv" "$OUTDIR/fig7${panel}_fashion-mnist_${model}_${card}${suffix}.csv"
  echo "wrote $OUTDIR/fig7${panel}_fashion-mnist_${model}_${card}${suffix}.csv"
done
echo "Figure 7 (Fashion-MNIST, $model, $card): complete; this piece took ${took} s"
