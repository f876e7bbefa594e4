#!/usr/bin/env bash
# docs/performance.md's CPU table: mala in fp32 and in bf16 (--precision bf16)
# against PyTorch eager in fp32 and under torch.autocast("cpu", torch.bfloat16), on the same
# configs and thread count: DiT-S/2 MALA and softmax, DiG-S/2 and DiC-S at 32x32x4 (training at
# batch 32, guided and plain DDIM-10 sampling of 8 images), the SD-VAE at 256x256 (batch 1) and the
# FID Inception (batch 16). ROUNDS rounds (default 3), each running every command once in the same
# order, so the runs of one benchmark are interleaved with the others'; one JSON line per run into
# bench-cpu.jsonl, then bench-cpu.md: the median over the rounds with [min .. max], the ratios of
# the medians, GFLOP/s and the fraction of the same-precision GEMM rate that `mala bench train`
# measures in its own process (oneDNN's matmul in a oneDNN build).
#
# The machine must be idle: two-thread runs lose tens of percent to a busy neighbour. Before
# starting, the 1-minute load average must be below MAX_LOAD (default 0.5) and the processes
# waiting for a CPU (sampled 10 times over a second from /proc/loadavg, this script's own reader
# not counted) below MAX_RUNNABLE (default 0.5) on average; the same sampling runs before every
# benchmark. A busy machine stops the script, unless --force is given: then it warns, runs, and
# marks the lines "busy". (This project's sandbox reads ~0.7 runnable when idle: MAX_RUNNABLE=1.5.)
# A run that fails or passes RUN_TIMEOUT seconds (default 900) is recorded with its error.
# CASES picks the set: `small` (the default: the configs above), `xl` (DiT's released network,
# DiT-XL/2 with softmax attention and 1000 classes, at 256x256 = 32x32x4 latents and 512x512 =
# 64x64x4: one training step at batch 2, guided DDIM-5 of 2 images and 1 image; against PyTorch),
# `int8` (sampling in fp32, bf16 and int8 on both sides, PyTorch's int8 being quantize_dynamic on the
# blocks' linears: DiT-S/2 MALA at 32x32x4, guided DDIM-10 of 8 images, and DiT-XL/2 at 256 as in
# `xl`; with `mala bench gemm`'s in-process linear rates in the three precisions), `tokens` (mala only: one plain step of one image of DiT-XL/2 with softmax against MALA attention
# at 256, 1024 and 4096 tokens, latents 32, 64 and 128: how the cost per image grows), or `all`.
# PyTorch runs with tcmalloc preloaded (TORCH_MALLOC, default the first of libtcmalloc.so.4 and
# libtcmalloc_minimal.so.4 found; Debian: apt-get install libgoogle-perftools4), as PyTorch's CPU
# performance guide advises: with glibc's malloc its big activations come back from the kernel as
# fresh pages on every call, and its DiT-S/2 forward at batch 16 took 2.4-3.0 s against 0.9 s with
# tcmalloc on the AMD EPYC (jemalloc with the guide's MALLOC_CONF measured as tcmalloc). TORCH_MALLOC=glibc
# runs it without. mala allocates its buffers once and runs with the system's malloc.
#   usage: tools/bench/bench_cpu.sh [--force] [--only REGEX]
#   env: THREADS (2), ROUNDS (3), CASES (small), MAX_LOAD, MAX_RUNNABLE, RUN_TIMEOUT, PYTHON (/usr/bin/python3),
#        MALA (./mala), TORCH_MALLOC
set -euo pipefail
cd "$(dirname "$0")/../.."
FORCE=0 ONLY=.
while [ $# -gt 0 ]; do
    case "$1" in
        --force) FORCE=1 ;;
        --only) ONLY=${2:?--only needs a regular expression}; shift ;;
        -h|--help) sed -n '2,36p' "$0"; exit 0 ;;
        *) echo "bench_cpu.sh: unknown argument '$1' (--force, --only REGEX)" >&2; exit 2 ;;
    esac
    shift
done
T=${THREADS:-2}
R=${ROUNDS:-${REPEATS:-3}}
MAX_LOAD=${MAX_LOAD:-0.5}
MAX_RUNNABLE=${MAX_RUNNABLE:-0.5}
RUN_TIMEOUT=${RUN_TIMEOUT:-900}
CASES=${CASES:-small}
case $CASES in small|xl|int8|tokens|all) ;; *) echo "bench_cpu.sh: CASES=$CASES: expected small, xl, int8, tokens or all" >&2; exit 2 ;; esac
PY=${PYTHON:-/usr/bin/python3}
if [ -z "${TORCH_MALLOC:-}" ]; then
    for f in /usr/lib/x86_64-linux-gnu/libtcmalloc.so.4 /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4; do
        [ -e "$f" ] && TORCH_MALLOC=$f && break
    done
fi
case ${TORCH_MALLOC:-glibc} in
    glibc) TORCH_MALLOC=glibc; PYRUN=$PY
           echo "bench_cpu.sh: WARNING: PyTorch runs with glibc's malloc (no tcmalloc found: apt-get install libgoogle-perftools4); it is up to 3x slower so" >&2 ;;
    *) [ -e "$TORCH_MALLOC" ] || { echo "bench_cpu.sh: TORCH_MALLOC=$TORCH_MALLOC: no such file" >&2; exit 2; }
       PYRUN="env LD_PRELOAD=$TORCH_MALLOC $PY" ;;
esac
MALA=${MALA:-./mala}
out=bench-cpu.jsonl
busy=false
[ -x "$MALA" ] || { echo "bench_cpu.sh: $MALA not found: run make first" >&2; exit 1; }

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
echo "bench_cpu.sh: OpenBLAS kernels: ${OPENBLAS_CORETYPE:-the library default}, for mala and PyTorch; PyTorch's malloc: $TORCH_MALLOC" >&2

# One benchmark per line: CASE|WHO|PRECISION|COMMAND (WHO mala or torch; the command gets
# --precision PRECISION, PyTorch's bf16 being its autocast; PRECISION "-": nothing is added).
small_cases() {
    local m a f p
    for m in "DiT-S/2 mala" "DiT-S/2 softmax" "DiG-S/2 -" "DiC-S -"; do
        a=${m#* }; m=${m%% *}
        f="--model $m --channels 4 --threads $T"
        local lab=$m
        [ "$a" != - ] && f="$f --attn $a" && lab="$m $a"
        local tb=""
        case $m in DiG-*) tb="--backbone dig" ;; DiC-*) tb="--backbone dic" ;; esac
        for p in fp32 bf16; do
            echo "train $lab|mala|$p|$MALA bench train $f --batch 32 --steps 2 --device cpu"
            echo "train $lab|torch|$p|$PYRUN tools/bench/bench_train_torch.py $tb $f --batch 32 --steps 2"
        done
        for p in fp32 bf16; do
            echo "sample $lab|mala|$p|$MALA bench sample $f --sampler ddim --steps 10 --n 8 --repeats 1 --device cpu"
            echo "sample $lab|torch|$p|$PYRUN tools/bench/bench_sample_torch.py $tb $f --sampler ddim --steps 10 --n 8"
        done
    done
    for p in fp32 bf16; do
        echo "vae 256|mala|$p|$MALA bench vae --image-size 256 --batch 1 --reps 1 --threads $T --device cpu"
        echo "vae 256|torch|$p|$PYRUN tools/bench/bench_vae_torch.py --size 256 --batch 1 --reps 1 --threads $T"
    done
    for p in fp32 bf16; do
        echo "inception|mala|$p|$MALA bench inception --batch 16 --iters 2 --threads $T --device cpu"
        echo "inception|torch|$p|$PYRUN tools/bench/bench_inception_torch.py --batch 16 --iters 2 --threads $T"
    done
}

# DiT's released network: softmax attention without RoPE and LePE, 1000 classes, learned sigma.
XL="--model DiT-XL/2 --attn softmax --rope 0 --lepe 0 --classes 1000 --channels 4"
xl_cases() {
    local s p f
    for s in 256 512; do
        f="$XL --image-size $((s / 8)) --threads $T"
        for p in fp32 bf16; do
            echo "train XL/2 $s|mala|$p|$MALA bench train $f --batch 2 --steps 1 --device cpu"
            echo "train XL/2 $s|torch|$p|$PYRUN tools/bench/bench_train_torch.py $f --batch 2 --steps 1"
        done
        local n=2
        [ "$s" = 512 ] && n=1
        for p in fp32 bf16; do
            echo "sample XL/2 $s|mala|$p|$MALA bench sample $f --sampler ddim --steps 5 --n $n --repeats 1 --device cpu"
            echo "sample XL/2 $s|torch|$p|$PYRUN tools/bench/bench_sample_torch.py $f --sampler ddim --steps 5 --n $n"
        done
    done
}

# Sampling with int8 linears against fp32 and bf16, both programs (case names start "int8 ": a table of
# their own).
int8_cases() {
    local m f p
    for m in "DiT-S/2 32|--model DiT-S/2 --channels 4 --threads $T|10 --n 8" \
             "DiT-XL/2 256|$XL --image-size 32 --threads $T|5 --n 2"; do
        IFS='|' read -r lab f st <<< "$m"
        for p in fp32 bf16 int8; do
            echo "int8 sample $lab|mala|$p|$MALA bench sample $f --sampler ddim --steps $st --repeats 1 --device cpu"
            echo "int8 sample $lab|torch|$p|$PYRUN tools/bench/bench_sample_torch.py $f --sampler ddim --steps $st"
        done
    done
    echo "int8 gemm|mala|-|$MALA bench gemm --repeats 3 --threads $T"
}

token_cases() {
    local l a f
    for l in 32 64 128; do
        for a in "softmax --rope 0 --lepe 0" "mala"; do
            f="--model DiT-XL/2 --attn $a --classes 1000 --channels 4 --image-size $l --threads $T"
            echo "tokens $((l * l / 4)) ${a%% *}|mala|fp32|$MALA bench sample $f --sampler ddim --steps 1 --n 1 --repeats 1 --device cpu"
        done
    done
}

cases() {
    [ "$CASES" = small ] || [ "$CASES" = all ] && small_cases
    [ "$CASES" = xl ] || [ "$CASES" = all ] && xl_cases
    [ "$CASES" = int8 ] || [ "$CASES" = all ] && int8_cases
    [ "$CASES" = tokens ] || [ "$CASES" = all ] && token_cases
    return 0
}

check_idle start
: > "$out"
n=0
for r in $(seq 1 "$R"); do
    while IFS='|' read -r case who prec cmd; do
        [[ "$case $who $prec" =~ $ONLY ]] || continue
        check_idle "round $r: $case $who $prec"
        full="$cmd"
        [ "$prec" != - ] && full="$cmd --precision $prec"
        echo "\$ $full   (round $r of $R)" >&2
        err=$(mktemp) res=$(mktemp) st=0
        timeout "$RUN_TIMEOUT" $full >"$res" 2>"$err" || st=$?
        if [ "$prec" = - ]; then  # several JSON lines (bench gemm: one per layer): one array
            line=$(grep '^{' "$res" | paste -sd, -) || true
            [ -n "$line" ] && line="{\"lines\":[$line]}"
        else
            line=$(grep '^{' "$res" | tail -n 1) || true
        fi
        if [ -z "$line" ]; then  # a failed run: how it ended, else its last line of stderr, is its result
            case $st in
                124) msg="timed out after $RUN_TIMEOUT s" ;;
                137) msg="killed by SIGKILL (the kernel's out-of-memory killer, when dmesg says so)" ;;
                *) msg=$(tail -n 1 "$err" | tr -d '"\\' | cut -c1-200); msg="exit status $st${msg:+: $msg}" ;;
            esac
            line="{\"error\":\"$msg\"}"
        fi
        rm -f "$err" "$res"
        line="${line%\}}"
        line="$line,\"case\":\"$case\",\"who\":\"$who\",\"prec\":\"$prec\",\"round\":$r,\"busy\":$busy,\"torch_malloc\":\"${TORCH_MALLOC##*/}\",\"cmd\":\"$full\"}"
        echo "$line" | tee -a "$out"
        n=$((n + 1))
    done < <(cases)
done
[ "$n" -gt 0 ] || { echo "bench_cpu.sh: --only '$ONLY' matched no benchmark" >&2; exit 2; }
"$PY" tools/bench/bench_cpu_table.py "$out" | tee bench-cpu.md
