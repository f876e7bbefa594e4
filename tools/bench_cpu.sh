#!/usr/bin/env bash
# docs/performance.md's CPU figures: mala vs PyTorch eager on the same configs and thread count, one JSON
# line each into bench-cpu.jsonl, every benchmark run REPEATS times (default 3), then a summary:
# the median of the runs with their min and max (each run's own line holds the spread of its
# repeated steps). Figures are ratios within one run of this script.
#
# The machine must be idle: two-thread runs lose tens of percent to a busy neighbour. Before
# starting, the 1-minute load average must be below MAX_LOAD (default 0.5) and the processes
# waiting for a CPU (sampled 10 times over a second from /proc/loadavg, this script's own reader
# not counted) below MAX_RUNNABLE (default 0.5) on average; the same sampling runs before every
# benchmark. A busy machine stops the script, unless --force is given: then it warns, runs, and
# marks the lines "busy". (This project's sandbox reads ~0.7 runnable when idle: MAX_RUNNABLE=1.5.)
#   usage: tools/bench_cpu.sh [--force]      (env: THREADS, REPEATS, MAX_LOAD, MAX_RUNNABLE, PYTHON)
set -euo pipefail
cd "$(dirname "$0")/.."
FORCE=0
for a in "$@"; do
    case "$a" in
        --force) FORCE=1 ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "bench_cpu.sh: unknown argument '$a' (--force)" >&2; exit 2 ;;
    esac
done
T=${THREADS:-2}
R=${REPEATS:-3}
MAX_LOAD=${MAX_LOAD:-0.5}
MAX_RUNNABLE=${MAX_RUNNABLE:-0.5}
PY=${PYTHON:-/usr/bin/python3}
out=bench-cpu.jsonl
busy=false

# Average number of other runnable processes over a second (/proc/loadavg field 4: running/total;
# the awk that reads it is running itself).
runnable() {
    local s=0 i
    for i in 1 2 3 4 5 6 7 8 9 10; do
        s=$((s + $(awk '{split($4, a, "/"); print a[1] - 1}' /proc/loadavg)))
        sleep 0.1
    done
    awk -v s="$s" 'BEGIN { printf "%.1f", s / 10 }'
}

check_idle() {  # $1: what is about to run
    local load run
    load=$(cut -d' ' -f1 /proc/loadavg)
    run=$(runnable)
    local why=""
    if [ "$1" = start ] && awk -v l="$load" -v m="$MAX_LOAD" 'BEGIN { exit !(l >= m) }'; then
        why="1-minute load average $load >= MAX_LOAD $MAX_LOAD"
    fi
    if awk -v r="$run" -v m="$MAX_RUNNABLE" 'BEGIN { exit !(r >= m) }'; then
        why="${why:+$why; }$run other processes waiting for a CPU on average"
    fi
    [ -z "$why" ] && return 0
    if [ "$FORCE" = 1 ]; then
        echo "bench_cpu.sh: WARNING: machine busy before $1 ($why): figures are not comparable" >&2
        busy=true
        return 0
    fi
    echo "bench_cpu.sh: machine busy before $1 ($why); rerun when it is idle, or pass --force" >&2
    exit 1
}

# The same OpenBLAS kernels for both sides: mala picks them from CPUID (cpu/blas_core.c); PyTorch
# links the same OpenBLAS, which on a CPU model it does not know falls back to slow SSE3 kernels.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && [ -x build/blas_core ]; then
    core=$(build/blas_core)
    [ -n "$core" ] && export OPENBLAS_CORETYPE=$core
fi
echo "bench_cpu.sh: OpenBLAS kernels: ${OPENBLAS_CORETYPE:-the library default}, for mala and PyTorch" >&2

check_idle start
: > "$out"
run() {
    local i line
    for i in $(seq 1 "$R"); do
        check_idle "run $i of: $*"
        echo "\$ $*" >&2
        line=$("$@" | tail -n 1)
        line="${line%\}}"  # the closing brace: the line gets the run's number, busy flag and command
        line="$line,\"run\":$i,\"busy\":$busy,\"cmd\":\"$*\"}"
        echo "$line" | tee -a "$out"
    done
}
run ./mala bench train --model DiT-S/2 --attn mala --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --model DiT-S/2 --attn mala --batch 32 --steps 3 --threads "$T"
run ./mala bench train --model DiT-S/2 --attn softmax --batch 32 --steps 3 --threads "$T"
run ./mala bench sample --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 8 --threads "$T"
run "$PY" tools/bench_sample_torch.py --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 8 --threads "$T"
# MALA against softmax at 256 tokens and batch 1 (one image, DDIM 10 steps)
run ./mala bench sample --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 1 --repeats 5 --threads "$T"
run ./mala bench sample --model DiT-S/2 --attn softmax --sampler ddim --steps 10 --n 1 --repeats 5 --threads "$T"
# the paper's comparison at latent size (32x32x4): DiT-S/2 mala and softmax, DiG-S/2, DiC-S
run ./mala bench train --model DiT-S/2 --attn mala --channels 4 --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --model DiT-S/2 --attn mala --channels 4 --batch 32 --steps 3 --threads "$T"
run ./mala bench train --model DiT-S/2 --attn softmax --channels 4 --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --model DiT-S/2 --attn softmax --channels 4 --batch 32 --steps 3 --threads "$T"
run ./mala bench train --model DiG-S/2 --channels 4 --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --backbone dig --model DiG-S/2 --channels 4 --batch 32 --steps 3 --threads "$T"
run ./mala bench train --model DiC-S --channels 4 --batch 32 --steps 3 --threads "$T"
run "$PY" tools/bench_train_torch.py --backbone dic --model DiC-S --channels 4 --batch 32 --steps 3 --threads "$T"
run ./mala bench vae --image-size 256 --batch 1 --reps 2 --threads "$T"
run "$PY" tools/bench_vae_torch.py --size 256 --batch 1 --reps 2 --threads "$T"
run ./mala bench inception --batch 16 --iters 3 --threads "$T"
run "$PY" tools/bench_inception_torch.py --batch 16 --iters 3 --threads "$T"

# Summary: per command, the median of the runs' img/s with the min and max.
"$PY" - "$out" <<'EOF'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    runs.setdefault(j["cmd"], []).append(j)
print("\nimg/s over the runs: median [min .. max]" + (" (BUSY machine)" if any(
    j["busy"] for v in runs.values() for j in v) else ""))
for cmd, js in runs.items():
    for key in ("img_per_s", "img_per_s_cfg", "encode_img_per_s", "decode_img_per_s"):
        v = [j[key] for j in js if key in j]
        if v:
            print(f"  {statistics.median(v):9.3f} [{min(v):.3f} .. {max(v):.3f}]  {key:13s} {cmd}")
EOF
