#!/bin/sh
# fp32 against --precision bf16 on the CPU (issue 35 item 2; docs/performance.md, "bf16"):
# `mala bench train` and `mala bench sample` on one model, the two precisions interleaved,
# ROUNDS rounds, then the median img/s of each and the bf16 / fp32 ratios. On a shared machine
# only the ratios mean anything.
#
#   tools/bench_bf16.sh [ROUNDS] [MODEL] [BATCH]     (defaults 3, DiT-S/2, 32; THREADS=2)
set -eu
ROUNDS=${1:-3}
MODEL=${2:-DiT-S/2}
BATCH=${3:-32}
THREADS=${THREADS:-2}
MALA=${MALA:-./mala}
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
r=1
while [ "$r" -le "$ROUNDS" ]; do
    for p in fp32 bf16; do
        "$MALA" bench train --model "$MODEL" --batch "$BATCH" --steps 3 --threads "$THREADS" --device cpu \
            --precision "$p" >>"$OUT"
        "$MALA" bench sample --model "$MODEL" --n 8 --steps 10 --repeats 1 --threads "$THREADS" --device cpu \
            --precision "$p" >>"$OUT"
    done
    r=$((r + 1))
done
python3 - "$OUT" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
def pick(bench, prec, key):
    return [r[key] for r in rows if r["bench"] == bench and r["precision"] == prec]
for bench, key, what in [("train", "img_per_s", "training"), ("sample", "img_per_s", "sampling, unguided"),
                         ("sample", "img_per_s_cfg", "sampling, guided")]:
    f, b = pick(bench, "fp32", key), pick(bench, "bf16", key)
    ratios = [y / x for x, y in zip(f, b)]
    print(f"{rows[0]['model']} {what}: fp32 {statistics.median(f):.3f} img/s {f}, bf16 {statistics.median(b):.3f} "
          f"{b}; bf16/fp32 per round {[round(x, 2) for x in ratios]}, median {statistics.median(ratios):.2f}x")
for prec in ("fp32", "bf16"):
    t = [r for r in rows if r["bench"] == "train" and r["precision"] == prec]
    print(f"train {prec}: GFLOP/s {[r['gflops'] for r in t]}, GEMM ceiling in the same precision "
          f"{[r['sgemm_gflops'] for r in t]}, fraction {[r['fraction_of_sgemm'] for r in t]}")
EOF
