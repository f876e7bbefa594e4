#!/usr/bin/env bash
# Calibration of `mala eval --features fmnist` (docs/eval.md's table): FD, class accuracy,
# precision/recall and KID of real test images, per-class mean images and Gaussian noise, each
# against the statistics of the real training images.
#
#   tools/bench/fmnist_calibration.sh [N_TRAIN] [N]    (default 60000 and 10000; run from the repository root)
set -euo pipefail
ntrain=${1:-60000}
n=${2:-10000}
mala=${MALA_BIN:-./mala}
dir=$(mktemp -d /tmp/mala_calib_XXXXXX)
trap 'rm -rf "$dir"' EXIT
/usr/bin/python3 tools/ref/make_calibration_sets.py "$dir" "$n" >&2
"$mala" eval stats --features fmnist --data fashion-mnist --limit "$ntrain" --out "$dir/train.npz" >/dev/null 2>"$dir/log" \
    || { cat "$dir/log" >&2; exit 1; }
echo "| samples (n = $n) vs train (n = $ntrain) | FD | class acc | precision | recall | KID |"
echo "|---|---|---|---|---|---|"
for s in fashion-mnist-test "$dir/class_means.npz" "$dir/noise.npz"; do
    line=$("$mala" eval fid --features fmnist --samples "$s" --ref "$dir/train.npz" --limit "$n" 2>"$dir/log") \
        || { cat "$dir/log" >&2; exit 1; }
    /usr/bin/python3 -c '
import json, sys
r = json.loads(sys.argv[1]); name = sys.argv[2].split("/")[-1]
acc = "%.4f" % r["class_acc"] if "class_acc" in r else "-"
print("| %s | %.3f | %s | %.4f | %.4f | %.5f +- %.5f |" % (name, r["fd"], acc, r["precision"], r["recall"], r["kid_mean"], r["kid_std"]))
' "$line" "$s"
done
