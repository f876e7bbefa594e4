#!/usr/bin/env bash
# One-shot check on a machine with an NVIDIA GPU (make gpu-check): build with CUDA, run the
# CPU/CUDA parity suite, the same DDIM sampling on both devices, a 300-step training smoke test, the throughput benchmarks at DiT-S/2
# (mala and softmax, 32x32x4 and 64x64x4, batch 64) and, when PyTorch is importable, its eager
# peers. Needs no network; writes everything to $OUT (default gpu-check/) and a summary file.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-check}
mkdir -p "$OUT"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
note() { echo "$*" | tee -a "$SUMMARY"; }
run() { note "\$ $*"; "$@" 2>&1 | tee -a "$OUT/log.txt" | tail -n 20 | tee -a "$SUMMARY"; return "${PIPESTATUS[0]}"; }

note "== gpu-check $(date -u +%FT%TZ) on $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)"
run make -j"$(nproc)" CUDA=1 mala build/tests/test_backend_parity || { note "FAIL: build"; exit 1; }
CK_FORK=no run ./build/tests/test_backend_parity || note "FAIL: parity suite"

# The same DDIM run (eta 0, guidance 4, 20 steps, fp32 products) on both devices: the initial noise
# is the host's Philox on both, so the images must agree to float rounding.
npy_floats() { local h; h=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' '); od -An -v -f -w4 -j$((10 + h)) "$1"; }
for dev in cpu cuda; do
    run ./mala sample --device "$dev" --precision fp32 --labels 0,3,7,9 --sampler ddim --steps 20 --seed 3 \
        --save-npy "$OUT/ddim-$dev.npy" >/dev/null
done
paste <(npy_floats "$OUT/ddim-cpu.npy") <(npy_floats "$OUT/ddim-cuda.npy") | awk '{d = $1 - $2; if (d < 0) d = -d;
    if (d > m) m = d} END {printf "ddim cpu vs cuda (4 images, 20 steps, fp32): max |diff| %.3g: %s\n", m,
    (NR > 0 && m < 1e-3) ? "same images" : "DIFFERENT"}' | tee -a "$SUMMARY"

# Training smoke test on a folder of images sampled from the bundled model (no dataset needed).
DATA="$OUT/smoke-data"
rm -rf "$DATA" "$OUT/smoke-run"
for k in 0 1; do
    run ./mala sample --device cuda --class "$k" --n 64 --batch 64 --sampler ddim --steps 20 --out-dir "$DATA/class$k" >/dev/null
done
run ./mala train --device cuda --data "$DATA" --image-size 32 --channels 1 --classes 2 --model DiT-T/4 --batch 64 \
    --iters 300 --log-every 25 --ckpt-every 300 --sample-every 0 --lr 5e-4 --out "$OUT/smoke-run"
awk -F, 'NR==2{first=$2} END{last=$2; printf "smoke: loss %.4f at the first log, %.4f at the last: %s\n", first, last, (last < 0.7*first) ? "down" : "NOT DOWN"}' \
    "$OUT/smoke-run/log.csv" | tee -a "$SUMMARY"

for attn in mala softmax; do
    for s in 32 64; do
        run ./mala bench train --device cuda --model DiT-S/2 --attn "$attn" --image-size "$s" --channels 4 --batch 64 --steps 20
        run ./mala bench sample --device cuda --model DiT-S/2 --attn "$attn" --image-size "$s" --channels 4 --n 64 --steps 50
        if python3 -c 'import torch' 2>/dev/null; then
            run python3 tools/bench_train_torch.py --device cuda --model DiT-S/2 --attn "$attn" --image-size "$s" --channels 4 --batch 64 --steps 20
            run python3 tools/bench_sample_torch.py --device cuda --model DiT-S/2 --attn "$attn" --image-size "$s" --channels 4 --n 64 --steps 50
        fi
    done
done
note "== done; full log in $OUT/log.txt"
