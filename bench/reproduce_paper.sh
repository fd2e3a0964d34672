#!/usr/bin/env bash
# Reproduce the shapes of the paper's Figures 1-6 on mnist-5k from the command line.
# Writes one CSV per panel to docs/figures/ (mean and std over R repetitions per point).
# Usage: bash bench/reproduce_paper.sh [REPEATS]   (default 10; the paper used 100)
set -euo pipefail
cd "$(dirname "$0")/.."
R=${1:-10}
OUT=docs/figures
mkdir -p "$OUT"
# The paper's five methods. The registry also holds Confident-GNMax, sparse vector and the PATE student,
# and `sweep` runs every registered method by default, so the panels name theirs explicitly.
FIVE=model_sensitivity,loss_perturbation,dpsgd,prediction_sensitivity,subsample_aggregate
run() { local name=$1; shift; echo "== $name" >&2; python -m privcore sweep --repeats "$R" --format csv "$@" > "$OUT/$name.csv"; }
EPS=0.1,0.2,0.5,1,2,5,10,20,50,100
run fig1a_eps_delta0       --methods $FIVE --epsilons $EPS --delta 0    --budget 100
run fig1b_eps_delta1e-5    --methods $FIVE --epsilons $EPS --delta 1e-5 --budget 100
run fig2a_budget_delta0    --methods $FIVE --epsilons 1 --delta 0    --vary budget --values 1,2,5,10,20,50,100,200,500,1000
run fig2b_budget_delta1e-5 --methods $FIVE --epsilons 1 --delta 1e-5 --vary budget --values 1,2,5,10,20,50,100,200,500,1000
run fig3_delta             --methods $FIVE --epsilons 1 --budget 100 --vary delta --values 1e-10,1e-8,1e-6,1e-5,1e-4,1e-3,1e-2
run fig4_n                 --epsilons 1 --delta 0 --budget 100 --vary n --values 500,1000,2000,4000,8000,16000,32000 \
                           --methods model_sensitivity,loss_perturbation,prediction_sensitivity,subsample_aggregate
run fig5a_dim              --methods $FIVE --epsilons 1 --delta 0 --budget 100 --vary dim --values 5,10,20,50,100,200,784
run fig5b_classes          --methods $FIVE --epsilons 1 --delta 0 --budget 100 --vary classes --values 2,3,4,5,6,7,8,9,10
run fig6a_lambda           --epsilons 1,10,100 --delta 0 --budget 100 --methods loss_perturbation \
                           --vary lam --values 1e-5,1e-4,1e-3,1e-2,1e-1,0.5
run fig6b_teachers         --epsilons 1,10,100 --delta 0 --budget 100 --methods subsample_aggregate \
                           --vary teachers --values 1,2,4,8,16,32,64,128,256
echo "done: $(ls $OUT/*.csv | wc -l) CSV files in $OUT" >&2
