#!/usr/bin/env bash
# make test: tools/gpu/gpu_check.sh before any GPU time is spent on it.
#  1. The dry run (GPU_CHECK_DRY=1: every section on the CUDA emulator build, tiny sizes) must
#     exit 0 with nothing on stderr, end its output with the table (= summary.txt): every section
#     PASS, ok or n/a (torch.compile on a PyTorch without it; SKIP for the PyTorch sections on a
#     machine without a python3 with torch), one row per benchmark, within its
#     budget, and leave each output file non-empty.
#  2. With a mala that fails and a parity suite that hangs, the table must still come, with ddim
#     FAIL and parity TIMEOUT at the budget, and the exit status must say so.
# GPU_CHECK_MALA / GPU_CHECK_PARITY name the emulator binaries (default: build/'s).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

t0=$SECONDS
GPU_CHECK_DRY=1 OUT=$tmp/out GPU_CHECK_WORK=$tmp/work tools/gpu/gpu_check.sh > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
secs=$((SECONDS - t0))
sed -n '/^== gpu-check/,$p' "$tmp/stdout"
[ $rc = 0 ] || fail "dry run exit $rc (log: rerun GPU_CHECK_DRY=1 tools/gpu/gpu_check.sh, see gpu-check/log.txt)"
[ -s "$tmp/stderr" ] && { cat "$tmp/stderr"; fail "dry run wrote to stderr (above)"; }
n=$(grep -c '' "$tmp/out/summary.txt")
cmp -s <(tail -n "$n" "$tmp/stdout") "$tmp/out/summary.txt" || fail "the last lines printed are not summary.txt"
# the PyTorch peers' sections need a python3 with torch (python3-torch; the GPU image has one): on a
# machine without it they must say so, and the rest must pass
has_torch=0
for p in python3 /usr/bin/python3; do
    "$p" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' 2>/dev/null && has_torch=1
done
for s in setup parity ddim smoke dist bench gemm torch compile; do
    ok='(PASS|ok|n/a) '
    case $s in gemm|torch|compile) [ $has_torch = 1 ] || ok='SKIP +[0-9.]+ +no python3 with torch$' ;; esac
    grep -Eq "^$s +$ok" "$tmp/out/summary.txt" || fail "section $s: $(grep "^$s " "$tmp/out/summary.txt" || echo 'no row')"
done
# rows, in tf32 and in bf16: mala's train, its four samples and the VAE, and the PyTorch peers'
# three other trains when they ran
rows=$((has_torch ? 18 : 12))  # tf32 and bf16 of each
[ "$(grep -c '^  \(train\|sample\|vae\) ' "$tmp/out/summary.txt")" = $rows ] || fail "expected $rows benchmark rows"
# (its share of the GEMM rate may round to nothing on a busy machine, and then is not printed)
grep -Eq '^  train DiT-T/4 mala 8x8x4 tf32 +mala [0-9][0-9.]*[ ;]' "$tmp/out/summary.txt" || fail "train row without mala's rate"
eager='eager [0-9.]+/[0-9.]+ \('
[ $has_torch = 1 ] || { eager='eager -( |$)'; echo "(no python3 with torch here: the PyTorch sections must say they were skipped)"; }
grep -Eq "^  sample DiG-T/4 8x8x4 bf16 +mala [0-9.]+/[0-9.]+ \| $eager" "$tmp/out/summary.txt" || fail "sample row without rates"
grep -Eq "^  vae decode 8x8x3 tf32 enc/dec +mala [0-9.]+/[0-9.]+ \| ${eager%\\(}" "$tmp/out/summary.txt" || fail "vae row without rates"
budget=$(sed -n 's/.*: \([0-9.]*\)s of the \([0-9]*\)s budget$/\1 \2/p' "$tmp/out/summary.txt")
awk -v b="$budget" 'BEGIN {split(b, x, " "); exit !(x[1] > 0 && x[1] < x[2])}' || fail "over the dry run's budget: $budget"
for f in log.txt env.txt build.txt parity.txt bench.jsonl smoke-log.csv; do
    [ -s "$tmp/out/$f" ] || fail "$f is empty"
done
echo "dry run: ${secs}s (sections by their own timers above)"

# 2. failures and time limits
printf '#!/bin/sh\necho "mala: broken on purpose" >&2\nexit 3\n' > "$tmp/mala"
printf '#!/bin/sh\nsleep 60\n' > "$tmp/parity"
chmod +x "$tmp/mala" "$tmp/parity"
t0=$SECONDS
GPU_CHECK_DRY=1 GPU_CHECK_MALA=$tmp/mala GPU_CHECK_PARITY=$tmp/parity GPU_CHECK_SECTIONS="setup ddim parity" \
    GPU_CHECK_BUDGET=8 OUT=$tmp/out2 GPU_CHECK_WORK=$tmp/work2 tools/gpu/gpu_check.sh > "$tmp/stdout2" 2>&1
rc=$?
[ $rc = 1 ] || fail "a failing run exited $rc, not 1"
grep -Eq '^ddim +FAIL .*mala sample failed' "$tmp/out2/summary.txt" || fail "ddim with a failing mala: $(grep '^ddim' "$tmp/out2/summary.txt")"
grep -Eq '^parity +TIMEOUT ' "$tmp/out2/summary.txt" || fail "a hanging parity suite: $(grep '^parity' "$tmp/out2/summary.txt")"
[ $((SECONDS - t0)) -lt 20 ] || fail "the 8 s budget took $((SECONDS - t0)) s"
tail -n "$(grep -c '' "$tmp/out2/summary.txt")" "$tmp/stdout2" | cmp -s - "$tmp/out2/summary.txt" || fail "no table at the end of a failing run"
echo "failing run: ddim FAIL, parity TIMEOUT at the budget, exit 1, table printed ($((SECONDS - t0))s)"
echo "1 passed, 0 failed"
