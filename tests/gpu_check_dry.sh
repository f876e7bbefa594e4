#!/usr/bin/env bash
# make test: tools/gpu_check.sh before any GPU time is spent on it.
#  1. The dry run (GPU_CHECK_DRY=1: every section on the CUDA emulator build, tiny sizes) must
#     exit 0 with nothing on stderr, end its output with the table (= summary.txt): every section
#     PASS, ok or n/a (torch.compile on a PyTorch without it), one row per benchmark, within its
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
GPU_CHECK_DRY=1 OUT=$tmp/out GPU_CHECK_WORK=$tmp/work tools/gpu_check.sh > "$tmp/stdout" 2> "$tmp/stderr"
rc=$?
secs=$((SECONDS - t0))
sed -n '/^== gpu-check/,$p' "$tmp/stdout"
[ $rc = 0 ] || fail "dry run exit $rc (log: rerun GPU_CHECK_DRY=1 tools/gpu_check.sh, see gpu-check/log.txt)"
[ -s "$tmp/stderr" ] && { cat "$tmp/stderr"; fail "dry run wrote to stderr (above)"; }
n=$(grep -c '' "$tmp/out/summary.txt")
cmp -s <(tail -n "$n" "$tmp/stdout") "$tmp/out/summary.txt" || fail "the last lines printed are not summary.txt"
for s in setup parity ddim smoke dist bench gemm torch compile; do
    grep -Eq "^$s +(PASS|ok|n/a) " "$tmp/out/summary.txt" || fail "section $s: $(grep "^$s " "$tmp/out/summary.txt" || echo 'no row')"
done
[ "$(grep -c '^  \(train\|sample\) ' "$tmp/out/summary.txt")" = 6 ] || fail "expected 6 benchmark rows"
grep -Eq '^  train DiT-T/4 mala 8x8x4 +mala [0-9.]+ \(' "$tmp/out/summary.txt" || fail "train row without mala's rate"
grep -Eq '^  sample DiG-T/4 8x8x4 +mala [0-9.]+/[0-9.]+ \| eager [0-9.]+/[0-9.]+ \(' "$tmp/out/summary.txt" || fail "sample row without rates"
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
    GPU_CHECK_BUDGET=8 OUT=$tmp/out2 GPU_CHECK_WORK=$tmp/work2 tools/gpu_check.sh > "$tmp/stdout2" 2>&1
rc=$?
[ $rc = 1 ] || fail "a failing run exited $rc, not 1"
grep -Eq '^ddim +FAIL .*mala sample failed' "$tmp/out2/summary.txt" || fail "ddim with a failing mala: $(grep '^ddim' "$tmp/out2/summary.txt")"
grep -Eq '^parity +TIMEOUT ' "$tmp/out2/summary.txt" || fail "a hanging parity suite: $(grep '^parity' "$tmp/out2/summary.txt")"
[ $((SECONDS - t0)) -lt 20 ] || fail "the 8 s budget took $((SECONDS - t0)) s"
tail -n "$(grep -c '' "$tmp/out2/summary.txt")" "$tmp/stdout2" | cmp -s - "$tmp/out2/summary.txt" || fail "no table at the end of a failing run"
echo "failing run: ddim FAIL, parity TIMEOUT at the budget, exit 1, table printed ($((SECONDS - t0))s)"
echo "1 passed, 0 failed"
