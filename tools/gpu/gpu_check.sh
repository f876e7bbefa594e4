#!/usr/bin/env bash
# make gpu-check: the one-shot check on a machine with an NVIDIA GPU, made to run to the end in one
# call on a bare CUDA image (no network, none of our build dependencies: see tools/gpu/gpu_bundle.sh).
# Sections, in order of value; each has its own time limit, all share one budget
# (GPU_CHECK_BUDGET, 450 s), and a failure in one never stops the next:
#   setup    unpack gpu-bundle/, run its carried binaries (rebuilt there if the sources changed
#            since the bundle was made or they do not start), list their device code
#   parity   the CPU-vs-CUDA parity suite (every op of the table, models, 10 training steps)
#   ddim     the same DDIM run on the CPU and on the GPU must give the same images
#   smoke    300 training steps on images sampled from the bundled model: the loss must fall
#   dist     NCCL on one GPU (tools/gpu/nccl_check.c: mala's NCCL calls on a 1-rank communicator),
#            then `mpirun -np 2 mala train` with and without --zero 1 (same weights), or a
#            skip that says why (no nccl.h, no mpirun, a mala without MPI)
#   bench    mala bench train (batch 256) and sample (batch 64) in tf32 and bf16 (PyTorch's bf16
#            is its autocast) at 32x32x4: DiT-S/2 mala and softmax, DiG-S/2, DiC-S, DiT-XL/2
#            mala and softmax (DiT-S/2 mala also in fp32); mala bench vae (SD-VAE at 256, batch
#            8); then DiT-S/2 and DiG-S/2 at 64x64x4 in tf32, as time allows
#   gemm     PyTorch's fp32, TF32 and bf16 matrix-product rates on this GPU
#   torch    the PyTorch eager peers of those runs (tools/bench/bench_*_torch.py --device cuda)
#   compile  the same with torch.compile (--compile), in the time left
# The last lines printed are one table (also $OUT/summary.txt); everything else goes to $OUT
# (default gpu-check/): log.txt, env.txt, build.txt, parity.txt, bench.jsonl, smoke-log.csv.
# GPU_CHECK_DRY=1 runs every section against the CUDA emulator build (build/cuda_emu/mala, the
# emulated parity suite) at tiny sizes, bench train on the CPU (the emulator's cuBLAS needs 45 s
# for its GEMM ceiling alone) and PyTorch on the CPU: `make test` runs it so that script errors
# show before GPU time is spent. GPU_CHECK_SECTIONS="setup parity" runs a subset (the sections
# that run ./mala need setup); GPU_CHECK_REBUILD=1 ignores the carried binaries.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
source tools/gpu/gpu_bundle.sh

DRY=${GPU_CHECK_DRY:-0}
OUT=${OUT:-gpu-check}
WORK=${GPU_CHECK_WORK:-build-gpu/check-work}
SECTIONS=" ${GPU_CHECK_SECTIONS:-setup parity ddim smoke dist bench gemm torch compile} "
if [ "$DRY" = 1 ]; then BUDGET=${GPU_CHECK_BUDGET:-160}; else BUDGET=${GPU_CHECK_BUDGET:-450}; fi
mkdir -p "$OUT" "$WORK" || exit 1
OUT=$(cd "$OUT" && pwd)
LOG=$OUT/log.txt
JSONL=$OUT/bench.jsonl
for f in summary.txt log.txt env.txt build.txt parity.txt bench.jsonl smoke-log.csv; do : > "$OUT/$f"; done

if [ "$DRY" = 1 ]; then
    MODELS="DiT-T/4:mala DiT-T/4:softmax DiG-T/4:- DiC-T:-"; SIZE1=8; MODELS2=""; SIZE2=""
    TRAIN_BATCH=2; SAMPLE_BATCH=2; TRAIN_STEPS=1; SAMPLE_STEPS=2; VAE_SIZE=8; VAE_BATCH=1
    DDIM_LABELS=0,3; DDIM_STEPS=3
    SMOKE_N=4; SMOKE_STEPS=2; SMOKE_SIZE=16; SMOKE_BATCH=4; SMOKE_ITERS=6; SMOKE_LOG=2; SMOKE_DROP=1.0
    DIST_ITERS=2
    BENCH_TRAIN_DEV=cpu; TORCH_DEV=cpu; THREADS="--threads 2"
    export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
else
    # Training at batch 256, sampling at batch 64, as DiT's paper measures
    MODELS="DiT-S/2:mala DiT-S/2:softmax DiG-S/2:- DiC-S:- DiT-XL/2:mala DiT-XL/2:softmax"; SIZE1=32
    MODELS2="DiT-S/2:mala DiT-S/2:softmax DiG-S/2:-"; SIZE2=64
    TRAIN_BATCH=256; SAMPLE_BATCH=64; TRAIN_STEPS=10; SAMPLE_STEPS=20; VAE_SIZE=256; VAE_BATCH=8
    DDIM_LABELS=0,3,7,9; DDIM_STEPS=20
    SMOKE_N=64; SMOKE_STEPS=10; SMOKE_SIZE=32; SMOKE_BATCH=64; SMOKE_ITERS=300; SMOKE_LOG=25; SMOKE_DROP=0.7
    DIST_ITERS=10
    BENCH_TRAIN_DEV=cuda; TORCH_DEV=cuda; THREADS=""
fi
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# ---- clock, sections, steps, table rows
now() { echo "${EPOCHREALTIME/,/.}"; }
T_START=$(now)
since() { awk -v a="$(now)" -v b="$1" 'BEGIN {printf "%.1f", a - b}'; }
left_of() { awk -v e="$1" -v n="$(now)" 'BEGIN {printf "%d", e - n}'; }
progress() { printf '[%4.0fs] %s\n' "$(since "$T_START")" "$*"; }
ROWS=(); BROWS=(); FAILED=0

# begin NAME LIMIT: the section ends LIMIT seconds from now, or at the end of the budget if sooner.
begin() {
    SEC=$1; SEC_T0=$(now)
    SEC_END=$(awk -v n="$SEC_T0" -v l="$2" -v e="$T_START" -v b="$BUDGET" 'BEGIN {x = n + l; if (e + b < x) x = e + b; printf "%.3f", x}')
    progress "$SEC"
    printf '\n==== %s (limit %ss, %ss of the budget left)\n' "$SEC" "$2" "$(left_of "$(awk -v e="$T_START" -v b="$BUDGET" 'BEGIN {print e + b}')")" >> "$LOG"
}
# step LIMIT CMD...: runs CMD for at most LIMIT seconds and what the section has left; its output
# goes to $WORK/step.out and the log. STEP_RC is its exit status (124: stopped at the limit).
step() {
    local lim=$1 left t0; shift
    left=$(left_of "$SEC_END")
    STEP_SECS=0
    if [ "$left" -lt 3 ]; then
        echo "(not run, section time limit: $*)" >> "$LOG"; : > "$WORK/step.out"; STEP_RC=124; return 124
    fi
    [ "$lim" -gt "$left" ] && lim=$left
    echo "\$ $* (limit ${lim}s)" >> "$LOG"
    t0=$(now)
    timeout -k 5 "$lim" "$@" > "$WORK/step.out" 2>&1 < /dev/null
    STEP_RC=$?
    STEP_SECS=$(since "$t0")
    tr '\r' '\n' < "$WORK/step.out" | grep -v '^sampling images .* ETA' >> "$LOG"
    echo "[exit $STEP_RC after ${STEP_SECS}s]" >> "$LOG"
    return $STEP_RC
}
rc_word() { case $1 in 0) echo ok ;; 124|137) echo TIMEOUT ;; *) echo FAIL ;; esac; }
bad_word() { [ "$1" = 0 ] && echo FAIL || rc_word "$1"; }  # a result that failed although the command did not
finish() {  # finish STATUS DETAIL: the section's row
    ROWS+=("$(printf '%-8s %-7s %6s  %s' "$SEC" "$1" "$(since "$SEC_T0")" "$2")")
    case $1 in FAIL|TIMEOUT) FAILED=1 ;; esac
}
jget() { sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" | tail -1; }
want() { case $SECTIONS in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
MALA=(); PARITY=(); RUN_LD=""
have_mala() { [ ${#MALA[@]} -gt 0 ] || { finish SKIP "no mala binary (setup failed or not run)"; return 1; }; }

# ---- setup ----------------------------------------------------------------------------------
# Adds to RUN_LD the folders of the libraries binary $1 cannot find yet (CUDA's, wherever they are).
resolve_libs() {
    local so d i missing
    for i in 1 2 3 4; do
        missing=$(LD_LIBRARY_PATH="$RUN_LD" ldd "$1" 2>/dev/null | awk '/not found/ {print $1}')
        [ -z "$missing" ] && return 0
        for so in $missing; do
            for d in $(cuda_roots); do
                [ -e "$d/$so" ] && { RUN_LD="$RUN_LD:$d"; echo "  $so: $d" >> "$LOG"; break; }
            done
        done
    done
    LD_LIBRARY_PATH="$RUN_LD" ldd "$1" | grep 'not found' >> "$LOG"
    return 1
}
starts() { resolve_libs "$1" && LD_LIBRARY_PATH="$RUN_LD" "$1" help > /dev/null 2>> "$LOG"; }
use_bins() { MALA=(env LD_LIBRARY_PATH="$RUN_LD" "$1"); PARITY=(env LD_LIBRARY_PATH="$RUN_LD" "$2"); }

sec_setup() {
    begin setup 240
    {
        echo "date: $(date -u +%FT%TZ)"; echo "host: $(uname -srm), $(nproc) cores"
        (. /etc/os-release 2>/dev/null && echo "os: $PRETTY_NAME"); echo "libc: $(ldd --version 2>&1 | head -1)"
        echo "gcc: $(gcc --version 2>&1 | head -1)"; echo "nvcc: $(nvcc --version 2>&1 | tail -1)"
        nvidia-smi 2>&1 | head -20
        for p in python3 /usr/bin/python3; do
            $p -c 'import importlib.metadata as m, sys; print(sys.executable, sys.version.split()[0], "torch", m.version("torch"))' 2>&1 | tail -1
        done
    } > "$OUT/env.txt" 2>&1
    local how nvcc bin code
    if [ "$DRY" = 1 ]; then
        local emu=${GPU_CHECK_MALA:-build/cuda_emu/mala} par=${GPU_CHECK_PARITY:-build/tests/test_backend_parity_emu}
        if [ ! -x "$emu" ] || [ ! -x "$par" ]; then
            finish FAIL "dry run: no $emu or $par (make $emu $par)"; return
        fi
        MALA=(env "$emu"); PARITY=(env "$par")
        how="dry run: emulator build $emu, $par"
    else
        nvcc=$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
        export CUDA_HOME=${nvcc%/bin/nvcc}
        if ls "$BUNDLE_DIR"/debs/*.deb > /dev/null 2>&1; then
            if ! bundle_unpacked "$BUNDLE_DIR/debs" "$BUNDLE_PREFIX"; then
                step 60 bash -c 'source tools/gpu/gpu_bundle.sh && bundle_unpack "$1" "$2"' _ "$BUNDLE_DIR/debs" "$BUNDLE_PREFIX" ||
                    { finish "$(rc_word $STEP_RC)" "cannot unpack $BUNDLE_DIR/debs (log.txt)"; return; }
            fi
            RUN_LD=$(bundle_libdirs "$BUNDLE_PREFIX")
            chmod +x "$BUNDLE_DIR"/bin/* 2> /dev/null  # in case the copy lost the mode bits
            if [ "${GPU_CHECK_REBUILD:-0}" != 1 ] && [ "$(cat "$BUNDLE_DIR/stamp" 2>/dev/null)" = "$(bundle_stamp)" ] &&
               starts "$BUNDLE_DIR/bin/mala" && resolve_libs "$BUNDLE_DIR/bin/test_backend_parity"; then
                use_bins "$BUNDLE_DIR/bin/mala" "$BUNDLE_DIR/bin/test_backend_parity"
                how="carried binaries (stamp $(cat "$BUNDLE_DIR/stamp"))"
            else
                echo "not using the carried binaries: stamp $(cat "$BUNDLE_DIR/stamp" 2>/dev/null) vs sources $(bundle_stamp), rebuild ${GPU_CHECK_REBUILD:-0}, or they did not start (above)" >> "$LOG"
                step 240 bash -c 'source tools/gpu/gpu_bundle.sh && bundle_build "$1" "$2"' _ "$BUNDLE_PREFIX" "$nvcc"
                if [ $STEP_RC != 0 ] || ! starts "$BUNDLE_OBJ/mala"; then
                    tail -15 "$WORK/step.out" > "$OUT/build.txt"
                    finish "$(bad_word $STEP_RC)" "the build against the bundle failed (build.txt)"; return
                fi
                resolve_libs "$BUNDLE_OBJ/tests/test_backend_parity"
                use_bins "$BUNDLE_OBJ/mala" "$BUNDLE_OBJ/tests/test_backend_parity"
                how="built here against the bundle in ${STEP_SECS}s"
            fi
        else  # no bundle: the system's packages, if this machine has them
            step 240 make -j"$(nproc)" CUDA=1 NVCC="$nvcc" BUILD=build-gpu/system-obj MALA_BIN=build-gpu/system-obj/mala \
                CUDA_ARCH="$BUNDLE_CUDA_ARCH" build-gpu/system-obj/mala build-gpu/system-obj/tests/test_backend_parity
            [ $STEP_RC = 0 ] || { finish "$(rc_word $STEP_RC)" "no $BUNDLE_DIR/, and the build with the system's packages failed"; return; }
            use_bins build-gpu/system-obj/mala build-gpu/system-obj/tests/test_backend_parity
            how="no $BUNDLE_DIR/: built with the system's packages"
        fi
    fi
    bin=${MALA[${#MALA[@]}-1]}
    { echo "== $bin"; LD_LIBRARY_PATH="$RUN_LD" ldd "$bin"
      command -v cuobjdump > /dev/null && { cuobjdump --list-elf "$bin"; cuobjdump --list-ptx "$bin"; } | head -100
      echo "== device code"; bundle_device_code "$bin"; } > "$OUT/build.txt" 2>&1
    code=$(sed '1,/^== device code/d; s/ x[0-9]*$//' "$OUT/build.txt" | tr '\n' ' ')
    finish ok "$how; device code: ${code% }"
}

# ---- parity ---------------------------------------------------------------------------------
sec_parity() {
    begin parity 150
    have_mala || return
    step 150 env CK_FORK=no "${PARITY[@]}"
    local rc=$STEP_RC s worst
    grep -E '\(tol |Checks|skipped|:[EF]:' "$WORK/step.out" > "$OUT/parity.txt"
    s=$(grep -E '[0-9]+%: Checks' "$WORK/step.out" | tail -1 | sed 's/^[0-9]*%: //')
    worst=$(awk '/\(tol / {for (i = 2; i < NF; i++) if ($i == "(tol") {v = $(i - 1); t = $(i + 1); sub(/\)/, "", t);
                if (t > 0 && v / t >= w) {w = v / t; n = $1 " " $2}}}
             END {if (n != "") printf "worst %.2g of its tolerance (%s)", w, n}' "$WORK/step.out")
    if grep -q '^skipped' "$WORK/step.out"; then finish FAIL "$(grep -m1 '^skipped' "$WORK/step.out")"
    elif [ $rc = 0 ] && [ -n "$s" ]; then finish PASS "$s; $worst"
    else finish "$(bad_word $rc)" "${s:-no result}; $(grep -m1 -E ':[EF]:' "$WORK/step.out" | cut -c1-100)"; fi
}

# ---- ddim: CPU vs CUDA ----------------------------------------------------------------------
# The same DDIM run (eta 0, guidance 4, fp32 products) on both devices: the initial noise is the
# host's Philox on both, so the images must agree to float rounding.
npy_floats() { local h; h=$(od -An -tu2 -j8 -N2 "$1" | tr -d ' '); od -An -v -f -w4 -j$((10 + h)) "$1"; }
sec_ddim() {
    begin ddim 40
    have_mala || return
    local dev r=""
    rm -f "$WORK"/ddim-*.npy
    for dev in cpu cuda; do
        step 20 "${MALA[@]}" sample --device $dev --precision fp32 --labels $DDIM_LABELS --sampler ddim \
            --steps $DDIM_STEPS --seed 3 --save-npy "$WORK/ddim-$dev.npy" || r="$r $dev: $(rc_word $STEP_RC)"
    done
    [ -n "$r" ] && { finish FAIL "mala sample failed:$r"; return; }
    r=$(paste <(npy_floats "$WORK/ddim-cpu.npy") <(npy_floats "$WORK/ddim-cuda.npy") | awk '{d = $1 - $2; if (d < 0) d = -d;
        if (d > m) m = d} END {printf "%s max |cpu - cuda| %.2g over %d values", (NR > 0 && m < 1e-3) ? "PASS" : "FAIL", m, NR}')
    finish "${r%% *}" "${r#* } (labels $DDIM_LABELS, $DDIM_STEPS steps, fp32)"
}

# ---- smoke: training on the GPU -------------------------------------------------------------
sec_smoke() {
    begin smoke 90
    have_mala || return
    local data=$WORK/smoke-data run=$WORK/smoke-run k r rc
    rm -rf "$data" "$run"; mkdir -p "$data"
    for k in 0 1; do  # a two-class image folder sampled from the bundled model: no dataset needed
        step 30 "${MALA[@]}" sample --device cuda --class $k --n $SMOKE_N --batch $SMOKE_N --sampler ddim --steps $SMOKE_STEPS \
            --out-dir "$data/class$k" || { finish "$(rc_word $STEP_RC)" "sampling the training images failed"; return; }
    done
    step 90 "${MALA[@]}" train --device cuda --data "$data" --image-size $SMOKE_SIZE --channels 1 --classes 2 --model DiT-T/4 \
        --batch $SMOKE_BATCH --iters $SMOKE_ITERS --log-every $SMOKE_LOG --ckpt-every $SMOKE_ITERS --sample-every 0 \
        --lr 5e-4 --out "$run"
    rc=$STEP_RC
    cp "$run/log.csv" "$OUT/smoke-log.csv" 2>/dev/null
    r=$(awk -F, -v drop=$SMOKE_DROP 'NR == 2 {f = $2; fs = $1} NR > 1 {l = $2; s = $1; ips = $6}
        END {if (NR < 3) print "FAIL fewer than two log rows";
             else printf "%s loss %.4f at step %d, %.4f at step %d (below %g of the first: %s img/s)",
                         (l < drop * f) ? "PASS" : "FAIL", f, fs, l, s, drop, ips}' "$run/log.csv" 2>/dev/null ||
        echo "FAIL no log.csv")
    if [ $rc != 0 ]; then finish "$(rc_word $rc)" "mala train exit $rc; ${r#* }"
    else finish "${r%% *}" "${r#* }"; fi
}

# ---- dist: NCCL on one GPU, and two processes -----------------------------------------------
# nccl.h and libnccl: CUDA's, the system's, or the nvidia-nccl wheel PyTorch brings.
nccl_dirs() {
    local d
    for d in "$CUDA_HOME/include" /usr/include /usr/local/include $(ls -d /usr/local/lib/python3*/dist-packages/nvidia/nccl/include \
             /usr/lib/python3/dist-packages/nvidia/nccl/include "$HOME"/.local/lib/python3*/site-packages/nvidia/nccl/include \
             2> /dev/null); do
        [ -f "$d/nccl.h" ] || continue
        for l in "${d%/include}/lib64" "${d%/include}/lib" /usr/lib/x86_64-linux-gnu; do
            ls "$l"/libnccl.so* > /dev/null 2>&1 && { echo "$d $l"; return 0; }
        done
    done
    return 1
}
# 1. tools/gpu/nccl_check.c, built here and run on GPU 0 (the dry run builds it only: no GPU).
# 2. mpirun -np 2 mala train, --zero 0 and 1: the same checkpoint bytes (2 ranks: each sum is one
#    addition). On one GPU both ranks share it and the sums go through the host over MPI (NCCL
#    refuses two ranks on one GPU); with two GPUs they go through NCCL. The dry run does this on
#    the emulator build (the CUDA backend's host-staged path).
sec_dist() {
    begin dist 120
    have_mala || return
    local st=ok ran=0 notes="" dirs inc lib cuda_inc=${CUDA_HOME:-/usr/local/cuda} bin z data=$WORK/dist-data k
    [ "$DRY" = 1 ] && cuda_inc=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")")
    if dirs=$(CUDA_HOME=$cuda_inc nccl_dirs); then
        inc=${dirs% *}; lib=${dirs#* }
        step 60 cc -O2 -std=c11 -D_GNU_SOURCE -I. -I"$inc" -I"$cuda_inc/include" tools/gpu/nccl_check.c \
            cuda/nccl/dist_nccl.c core/dist.c core/common.c -L"$lib" -Wl,-rpath,"$lib" -L"$cuda_inc/lib64" \
            -Wl,-rpath,"$cuda_inc/lib64" -lnccl -lcudart -o "$WORK/nccl_check"
        if [ $STEP_RC != 0 ]; then st=FAIL; notes="nccl_check did not build (log.txt)"
        elif [ "$DRY" = 1 ]; then notes="nccl_check built against $inc (not run: no GPU in a dry run)"
        else
            step 30 env LD_LIBRARY_PATH="$RUN_LD" "$WORK/nccl_check"
            [ $STEP_RC = 0 ] || st=FAIL
            ran=1
            notes="$(tail -1 "$WORK/step.out" | cut -c1-140)"
        fi
    else
        notes="1-GPU NCCL check skipped: no nccl.h with a libnccl (CUDA's, /usr/include, PyTorch's nvidia-nccl)"
    fi
    bin=${MALA[${#MALA[@]}-1]}
    if ! command -v mpirun > /dev/null; then
        notes="$notes; 2 processes skipped: no mpirun on this machine (openmpi-bin)"
    elif ! LD_LIBRARY_PATH="$RUN_LD" ldd "$bin" 2> /dev/null | grep -q libmpi; then
        notes="$notes; 2 processes skipped: $bin was built without MPI (libopenmpi-dev)"
    else
        rm -rf "$data" "$WORK"/dist-z*; mkdir -p "$data"
        [ -d "$WORK/smoke-data/class1" ] && data=$WORK/smoke-data  # the smoke section's images
        for k in 0 1; do
            [ "$data" = "$WORK/smoke-data" ] && break
            step 30 "${MALA[@]}" sample --device cuda --class $k --n 4 --batch 4 --sampler ddim --steps 2 \
                --out-dir "$data/class$k" || { finish "$(rc_word $STEP_RC)" "$notes; sampling the training images failed"; return; }
        done
        for z in 0 1; do
            step 45 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 "${MALA[@]}" train --device cuda \
                --data "$data" --image-size 16 --channels 1 --classes 2 --model DiT-T/4 --batch 4 --iters $DIST_ITERS \
                --log-every 1 --sample-every 0 --zero $z --out "$WORK/dist-z$z"
            [ $STEP_RC = 0 ] || { finish "$(rc_word $STEP_RC)" "$notes; mpirun -np 2 mala train --zero $z failed (log.txt)"; return; }
        done
        k=$(printf '%07d' $DIST_ITERS)
        ran=1
        if cmp -s "$WORK/dist-z0/checkpoints/$k.safetensors" "$WORK/dist-z1/checkpoints/$k.safetensors"; then
            notes="$notes; mpirun -np 2 train, --zero 0 and 1: the same checkpoint bytes after $DIST_ITERS steps"
        else
            st=FAIL; notes="$notes; mpirun -np 2 train: --zero 1 wrote other weights than --zero 0"
        fi
    fi
    [ "$st" = ok ] && [ "$DRY" != 1 ] && { [ $ran = 1 ] && st=PASS || st=SKIP; }
    finish "$st" "${notes#; }"
}

# ---- bench: mala, then the PyTorch peers of the same runs ----------------------------------
# One spec per run: KIND MODEL ATTN SIZE PRECISION (ATTN - for DiG and DiC, which have none), in
# order of value (a section out of time drops the last): every model at the first size in tf32 and
# bf16 (and the first in fp32, for its fraction of the fp32 GEMM rate), the VAE decode, then the
# second size in tf32.
bench_specs() {
    local m a first=1
    for m in $MODELS; do
        a=${m#*:}; m=${m%%:*}
        echo "train $m $a $SIZE1 tf32"
        [ $first = 1 ] && echo "train $m $a $SIZE1 fp32"
        echo "train $m $a $SIZE1 bf16"
        echo "sample $m $a $SIZE1 tf32"
        echo "sample $m $a $SIZE1 bf16"
        first=0
    done
    echo "vae SD-VAE - $VAE_SIZE tf32"
    echo "vae SD-VAE - $VAE_SIZE bf16"
    for m in $MODELS2; do
        a=${m#*:}; m=${m%%:*}
        echo "train $m $a $SIZE2 tf32"
        echo "sample $m $a $SIZE2 tf32"
    done
}
spec_flags() {  # the flags mala and the PyTorch scripts share for spec $1..$5
    local f="--image-size $4 --precision $5"
    [ "$1" = vae ] && { echo "$f --batch $VAE_BATCH --reps 2"; return; }
    f="--model $2 $f --channels 4"
    [ "$3" != - ] && f="$f --attn $3"
    case $2 in DiG-*) f="$f --backbone dig" ;; DiC-*) f="$f --backbone dic" ;; esac
    if [ "$1" = train ]; then f="$f --batch $TRAIN_BATCH --steps $TRAIN_STEPS"; else f="$f --n $SAMPLE_BATCH --steps $SAMPLE_STEPS"; fi
    echo "$f"
}
spec_key() { echo "$1/$2/$3/$4/$5"; }
declare -A RES
sec_bench() {
    begin bench 200  # 33 runs: tf32 and bf16 (and one fp32 training) at the first size, the VAE, tf32 at the second
    have_mala || return
    local spec n=0 bad=0 dev first=""
    while read -r spec; do
        set -- $spec
        dev=cuda; [ "$1" = train ] && dev=$BENCH_TRAIN_DEV
        # dry run: bench train on the first model only (on the CPU each run measures sgemm for 3 s)
        first=${first:-$2$3}; [ "$DRY" = 1 ] && [ "$1" = train ] && [ "$2$3" != "$first" ] && continue
        [ "$DRY" = 1 ] && [ "$1" = vae ] && dev=cpu  # the full-width VAE on the emulator: minutes
        step 45 "${MALA[@]}" bench $1 --device $dev $THREADS $(spec_flags $spec)
        n=$((n + 1))
        if [ $STEP_RC = 0 ] && grep -q '^{' "$WORK/step.out"; then
            grep '^{' "$WORK/step.out" | sed 's/^{/{"impl":"mala",/' >> "$JSONL"
            RES[mala:$(spec_key $spec)]=$(grep '^{' "$WORK/step.out" | tail -1)
        else
            RES[mala:$(spec_key $spec)]=$(rc_word $STEP_RC); bad=$((bad + 1))
        fi
    done < <(bench_specs)
    if [ $bad = 0 ]; then finish ok "$n runs"; else finish FAIL "$bad of $n runs failed (log.txt)"; fi
}

# The PyTorch side runs in one python process per section (one import of torch, not one per run):
# each run has its own time limit (SIGALRM) and JSON line, and an error in one is that run's result.
TORCH_DRIVER='
import contextlib, io, json, signal, sys, time
sys.path[:0] = ["tools/bench", "tools/ref"]
import torch
dump = lambda r: print(json.dumps(r, separators=(",", ":")), flush=True)
if sys.argv[1] == "gemm":
    dev = sys.argv[2]
    shapes = [(8192, 384, 1152), (8192, 8192, 8192)] if dev == "cuda" else [(512, 384, 1152)]
    for prec in (["fp32", "tf32", "bf16"] if dev == "cuda" else ["fp32"]):
        torch.backends.cuda.matmul.allow_tf32 = prec == "tf32"
        dt_in = torch.bfloat16 if prec == "bf16" else torch.float32
        for m, k, n in shapes:
            a, b = torch.randn(m, k, device=dev, dtype=dt_in), torch.randn(k, n, device=dev, dtype=dt_in)
            reps = max(3, int(3e12 / (2 * m * k * n))) if dev == "cuda" else 3
            for r in range(reps + 3):
                if r == 3:
                    torch.cuda.synchronize() if dev == "cuda" else None
                    t0 = time.perf_counter()
                c = a @ b
            torch.cuda.synchronize() if dev == "cuda" else None
            dt = time.perf_counter() - t0
            dump({"bench": "gemm", "impl": "torch", "precision": prec, "m": m, "k": k, "n": n,
                  "gflops": round(2 * m * k * n * reps / dt / 1e9, 1)})
    sys.exit(0)
import bench_train_torch, bench_sample_torch, bench_vae_torch
benches = {"train": bench_train_torch, "sample": bench_sample_torch, "vae": bench_vae_torch}
deadline, per = time.time() + float(sys.argv[2]), float(sys.argv[3])
class Late(Exception): pass
def late(*_): raise Late()
signal.signal(signal.SIGALRM, late)
for spec in sys.argv[4:]:
    key, kind, args = spec.split(";")
    left = deadline - time.time()
    rec = {"key": key, "args": args}
    if left < 5:
        rec["error"] = "not run: section time limit"
    else:
        sys.argv = ["bench_%s_torch.py" % kind] + args.split()
        buf = io.StringIO()
        signal.alarm(max(1, int(min(per, left))))
        try:
            with contextlib.redirect_stdout(buf):
                benches[kind].main()
        except Late:
            rec["error"] = "TIMEOUT after %ds" % min(per, left)
        except SystemExit as e:
            if e.code:  # sys.exit(0) after a JSON line (an autocast failure) is that line
                rec["error"] = str(e.code)
        except Exception as e:
            rec["error"] = ("%s: %s" % (type(e).__name__, e)).splitlines()[0][:160]
        finally:
            signal.alarm(0)
        lines = [l for l in buf.getvalue().splitlines() if l.startswith("{")]
        if "error" not in rec:
            if lines:
                rec.update(json.loads(lines[-1]))
            else:
                rec["error"] = "no JSON line"
        if hasattr(torch, "_dynamo"):
            torch._dynamo.reset()
        if torch.cuda.is_available():
            rec["cuda_peak_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
            torch.cuda.reset_peak_memory_stats(); torch.cuda.empty_cache()
    dump(rec)
'
PY=""
pick_python() {  # the python3 with torch: PATH's (the GPU image's), else Debian's
    local p
    [ -n "$PY" ] && return 0
    for p in python3 /usr/bin/python3; do
        "$p" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2> /dev/null && { PY=$p; return 0; }
    done
    return 1
}
sec_gemm() {
    begin gemm 30
    pick_python || { finish SKIP "no python3 with torch"; return; }
    step 30 "$PY" -c "$TORCH_DRIVER" gemm $TORCH_DEV
    [ $STEP_RC = 0 ] || { finish "$(rc_word $STEP_RC)" "$(tail -1 "$WORK/step.out" | cut -c1-100)"; return; }
    grep '^{' "$WORK/step.out" >> "$JSONL"
    finish ok "$(grep '^{' "$WORK/step.out" | while read -r l; do
        printf '%s %sx%sx%s %s; ' "$(jget precision <<< "$l")" "$(jget m <<< "$l")" "$(jget k <<< "$l")" "$(jget n <<< "$l")" \
            "$(awk -v g="$(jget gflops <<< "$l")" 'BEGIN {if (g >= 1000) printf "%.1f TFLOP/s", g / 1000; else printf "%.1f GFLOP/s", g}')"
        done | sed 's/; $//')"
}
sec_torch() {  # $1 = torch (the eager peers) | compile
    local name=$1 flag="" per=60 lim=140 specs=() spec l key ok=0 bad=0 na=0 rc dev
    [ "$name" = compile ] && { flag=" --compile"; per=150; lim=$BUDGET; }
    begin "$name" "$lim"
    pick_python || { finish SKIP "no python3 with torch"; return; }
    while read -r spec; do
        set -- $spec
        [ "$5" = fp32 ] && continue  # the fp32 runs are for mala's fraction of the fp32 GEMM rate
        [ "$1" = vae ] && [ -n "$flag" ] && continue  # bench_vae_torch.py has no --compile
        dev=$TORCH_DEV; [ "$DRY" = 1 ] && [ "$1" = vae ] && dev=cpu
        specs+=("$(spec_key $spec);$1;$(spec_flags $spec) --device $dev $THREADS$flag")
    done < <(bench_specs)
    step "$lim" env PYTHONUNBUFFERED=1 "$PY" -c "$TORCH_DRIVER" peers "$(( $(left_of "$SEC_END") - 8 ))" $per "${specs[@]}"
    rc=$STEP_RC
    while read -r l; do
        key=$name:$(jget key <<< "$l")
        if grep -q '"error"' <<< "$l"; then  # the table says a word; the message is in log.txt
            case $l in
                *'"error":"autocast: '*) RES[$key]="autocast raises"; na=$((na + 1)); continue ;;  # a finding, not a failure
                *TIMEOUT*) RES[$key]=timeout ;; *"not run"*) RES[$key]="not run" ;; *"needs PyTorch 2"*) RES[$key]=n/a ;; *) RES[$key]=error ;; esac
            bad=$((bad + 1))
        else RES[$key]=$l; ok=$((ok + 1)); echo "$l" >> "$JSONL"; fi
    done < <(grep '^{' "$WORK/step.out")
    local total=$((${#specs[@]} - na)) nas=""
    [ $na -gt 0 ] && nas="; PyTorch's autocast raises on $na"
    if [ $ok = 0 ] && grep -q 'needs PyTorch 2' "$WORK/step.out"; then
        finish n/a "torch $("$PY" -c 'import importlib.metadata as m; print(m.version("torch"))') has no torch.compile ($PY)"
    elif [ $ok = 0 ]; then finish "$(bad_word $rc)" "no run finished: $(grep -v '^{' "$WORK/step.out" | tail -1 | cut -c1-100)"
    elif [ $ok = "$total" ]; then finish ok "$total runs ($PY)$nas"
    elif [ "$name" = compile ]; then finish partial "$ok of $total runs in the time left (log.txt)"
    else finish "$(bad_word $rc)" "$ok of $total runs done (log.txt)"; fi
}

# ---- the table's benchmark rows -------------------------------------------------------------
# val RESULT KEY: a number from a run's JSON line, or the word the run ended with (-: not run).
val() { if [ "${1:0:1}" = "{" ]; then jget "$2" <<< "$1"; else echo "${1:--}"; fi; }
pct() { awk -v x="$1" -v p="$2" 'BEGIN {if (x + 0 > 0) printf " (%.0f%% of the %s GEMM rate)", 100 * x, p}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a + 0 > 0 && b + 0 > 0) printf " (%.2fx)", a / b}'; }
vae_pair() { if [ "${1:0:1}" = "{" ]; then echo "$(val "$1" encode_img_per_s)/$(val "$1" decode_img_per_s)"; else echo "${1:--}"; fi; }
pair() { if [ "${1:0:1}" = "{" ]; then echo "$(val "$1" img_per_s)/$(val "$1" img_per_s_cfg)"; else echo "${1:--}"; fi; }
bench_rows() {
    local spec k m e c f what a
    while read -r spec; do
        set -- $spec
        [ "$5" = fp32 ] && continue
        k=$(spec_key $spec); a=$3; [ "$a" = - ] && a=""
        what="$1 $2${a:+ $a} ${4}x${4}x4 $5"; [ "$1" = vae ] && what="vae decode ${4}x${4}x3 $5"
        m=${RES[mala:$k]:-}; e=${RES[torch:$k]:-}; c=${RES[compile:$k]:-}
        [ -z "$m$e$c" ] && continue
        if [ "$1" = vae ]; then  # encode/decode img/s; the ratios are the decode's
            BROWS+=("$(printf '  %-34s mala %s | eager %s%s' "$what enc/dec" "$(vae_pair "$m")" "$(vae_pair "$e")" \
                "$(ratio "$(val "$m" decode_img_per_s)" "$(val "$e" decode_img_per_s)")")")
        elif [ "$1" = train ]; then
            f=""; [ "$5" = tf32 ] && f=${RES[mala:$(spec_key $1 $2 $3 $4 fp32)]:-}
            BROWS+=("$(printf '  %-34s mala %s%s%s | eager %s%s | compile %s%s' "$what" \
                "$(val "$m" img_per_s)" "$(pct "$(val "$m" fraction_of_sgemm)" "$5")" \
                "${f:+; fp32 $(val "$f" img_per_s)$(pct "$(val "$f" fraction_of_sgemm)" fp32)}" \
                "$(val "$e" img_per_s)" "$(ratio "$(val "$m" img_per_s)" "$(val "$e" img_per_s)")" \
                "$(val "$c" img_per_s)" "$(ratio "$(val "$m" img_per_s)" "$(val "$c" img_per_s)")")")
        else
            BROWS+=("$(printf '  %-34s mala %s | eager %s%s | compile %s%s' "$what" "$(pair "$m")" \
                "$(pair "$e")" "$(ratio "$(val "$m" img_per_s_cfg)" "$(val "$e" img_per_s_cfg)")" \
                "$(pair "$c")" "$(ratio "$(val "$m" img_per_s_cfg)" "$(val "$c" img_per_s_cfg)")")")
        fi
    done < <(bench_specs)
}

want setup && sec_setup
want parity && sec_parity
want ddim && sec_ddim
want smoke && sec_smoke
want dist && sec_dist
want bench && sec_bench
want gemm && sec_gemm
want torch && sec_torch torch
want compile && sec_torch compile
bench_rows

{
    if [ "$DRY" = 1 ]; then what="DRY RUN on the emulator, tiny sizes"; else
        what=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -1); fi
    echo "== gpu-check $(date -u +%FT%TZ) ${what:-no nvidia-smi}: $(since "$T_START")s of the ${BUDGET}s budget"
    printf '%-8s %-7s %6s  %s\n' section status secs result
    printf '%s\n' "${ROWS[@]}"
    if [ ${#BROWS[@]} -gt 0 ]; then
        echo "benchmarks, img/s (sample: plain/guided); (x) = mala's rate over PyTorch's (guided, for sample)"
        printf '%s\n' "${BROWS[@]}"
    fi
} > "$OUT/summary.txt"
cat "$OUT/summary.txt"
exit $FAILED
