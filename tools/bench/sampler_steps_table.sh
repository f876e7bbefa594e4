#!/bin/sh
# The sampler / step-count table of docs/sample.md: DDPM-250, DDIM and DPM-Solver++(2M) at 5, 10, 20,
# 50 steps on the bundled model, all from the same initial noise (--seed), guidance 4, clipping on.
# Measured by tools/bench/sampler_table.py (numpy): the mean absolute difference of each run's samples
# from a DDIM-1000 run of the same noise (the probability-flow ODE solved finely: how far a
# deterministic sampler is from its limit), and a Frechet distance in PIXEL space (1024 values
# of the 32x32 image in [0, 1], not Inception features) against the Fashion-MNIST test set.
#   usage: tools/bench/sampler_steps_table.sh [N_IMAGES [OUT_DIR]]     (default 32, /tmp/mala_steps)
set -eu
N=${1:-32}
OUT=${2:-/tmp/mala_steps}
MALA=${MALA_BIN:-./mala}
mkdir -p "$OUT"
run() {  # kind steps
    f="$OUT/$1_$2.npy"
    [ -s "$f" ] || "$MALA" sample --sampler "$1" --steps "$2" --n "$N" --batch 64 --seed 1 --threads "${THREADS:-1}" \
        --save-npy "$f" >/dev/null 2>&1
}
run ddim 1000
run ddpm 250
for s in 5 10 20 50; do run ddim $s; run dpm++2m $s; done
/usr/bin/python3 "$(dirname "$0")/sampler_table.py" "$OUT" ddim_1000 ddpm_250 \
    ddim_5 ddim_10 ddim_20 ddim_50 dpm++2m_5 dpm++2m_10 dpm++2m_20 dpm++2m_50
