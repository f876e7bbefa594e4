#!/bin/sh
# The bundled model: MALA-DiT-T/4 seed 1 of the comparison (the same recipe:
# batch 64, AdamW 5e-4, warmup 500, EMA 0.999), continued from its step-10,000 checkpoint to
# 36,000 steps (2.3M images), the rate decaying linearly from step 30,000 to 2.5e-5 at 36,000.
# Run from the repository root; stop it at any time (Ctrl-C), the same command continues it.
#   1. ./mala compare --config configs/compare-fmnist.ini --out results/compare-fmnist --runs mala-dit-s1
#      mkdir -p results/bundled-fmnist/checkpoints
#      cp results/compare-fmnist/runs/mala-dit-s1/checkpoints/0010000.safetensors results/bundled-fmnist/checkpoints/
#      cp results/compare-fmnist/runs/mala-dit-s1/log.csv results/bundled-fmnist/
#   2. this script (1 h 48 min on 2 cores at 250-330 img/s, measured over two sessions)
set -eu
MALA=${MALA_BIN:-./mala}
exec "$MALA" train --resume --out results/bundled-fmnist --iters 36000 --decay-start 30000 --decay-end 36000 \
    --lr-end 2.5e-5 --ckpt-every 1000 --sample-every 4000 --keep 40 --threads 2
