#!/usr/bin/env bash
# The README's CPU figures: mala vs PyTorch eager on the same configs and thread count, one JSON
# line each into bench-cpu.jsonl. Run on an otherwise idle machine (figures are ratios within one run).
set -euo pipefail
cd "$(dirname "$0")/.."
T=${THREADS:-2}
PY=${PYTHON:-/usr/bin/python3}
out=bench-cpu.jsonl
: > "$out"
run() { echo "\$ $*" >&2; "$@" | tail -n 1 | tee -a "$out"; }
run ./mala bench train --model DiT-S/2 --attn mala --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --model DiT-S/2 --attn mala --batch 32 --steps 3 --threads "$T"
run ./mala bench train --model DiT-S/2 --attn softmax --batch 32 --steps 3 --threads "$T"
run ./mala bench sample --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 8 --threads "$T"
run "$PY" tools/bench_sample_torch.py --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 8 --threads "$T"
run ./mala bench inception --batch 16 --iters 3 --threads "$T"
run "$PY" tools/bench_inception_torch.py --batch 16 --iters 3 --threads "$T"
