#!/usr/bin/env bash
# The fuzz campaign of docs/testing.md: every harness, one at a time at nice 19 (the machine is
# shared), for RUNS executions each (default 10^6), on a corpus that starts from the committed
# seeds and regression inputs. Prints one table row per harness (also in
# build-fuzz/campaign/table.md); a finding stops that harness and names its artifact. libFuzzer's
# -timeout is wall-clock time, and a process at nice 19 on a busy machine gets a few percent of a
# core, so the campaign allows 60 s per input (CI: 10 s); the table reports the slowest input.
# Columns: harness, executions, seconds, edges covered, corpus files, crashes, leaks, timeouts,
# out-of-memory, slowest input (s), exit status.
#
#   tests/fuzz/campaign.sh [RUNS] [HARNESS...]      # after `make fuzz-build`
set -uo pipefail
cd "$(dirname "$0")/../.."
RUNS=${1:-1000000}
shift || true
NAMES=${*:-image npz safetensors torch_legacy torch_zip json npy idx}
OUT=build-fuzz/campaign
mkdir -p "$OUT/artifacts"
for n in $NAMES; do
    bin=build-fuzz/fuzz_$n
    [ -x "$bin" ] || { echo "$bin missing: run make fuzz-build" >&2; exit 2; }
    mkdir -p "$OUT/corpus/$n"
    dict=()
    [ -f "tests/fuzz/dict/$n.dict" ] && dict=(-dict="tests/fuzz/dict/$n.dict")
    regress=()
    [ -d "tests/fuzz/regress/$n" ] && regress=("tests/fuzz/regress/$n")
    t0=$(date +%s)
    nice -n 19 "$bin" -runs="$RUNS" -timeout=60 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
        "${dict[@]}" -artifact_prefix="$OUT/artifacts/$n-" "$OUT/corpus/$n" "tests/fuzz/seeds/$n" "${regress[@]}" \
        > "$OUT/$n.log" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    execs=$(grep -h "stat::number_of_executed_units" "$OUT/$n.log" | awk '{print $2}')
    cov=$(grep -oE "cov: [0-9]+" "$OUT/$n.log" | tail -n 1 | awk '{print $2}')
    crashes=$(grep -c "ERROR: AddressSanitizer\|runtime error\|deadly signal" "$OUT/$n.log")
    leaks=$(grep -c "ERROR: LeakSanitizer" "$OUT/$n.log")
    timeouts=$(grep -c "ALARM: working on the last Unit" "$OUT/$n.log")
    ooms=$(grep -c "out-of-memory" "$OUT/$n.log")
    slowest=$(grep -h "stat::slowest_unit_time_sec" "$OUT/$n.log" | awk '{print $2}')
    row="| $n | ${execs:-0} | $secs | ${cov:-?} | $(ls "$OUT/corpus/$n" | wc -l) | $crashes | $leaks | $timeouts | $ooms | ${slowest:-?} | rc $rc |"
    echo "$row" | tee -a "$OUT/table.md"
    [ $rc -eq 0 ] || echo "   finding: $(ls -t "$OUT/artifacts" | head -n 1) (log: $OUT/$n.log)"
done
