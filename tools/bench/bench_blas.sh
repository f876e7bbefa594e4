#!/usr/bin/env bash
# OpenBLAS against BLIS inside the program: builds ./mala-blis (`make BLAS=blis`, Debian's
# libblis-openmp-dev, installed here if missing) beside ./mala and times the same benchmarks with
# both, interleaved, REPEATS times (default 3), then prints per benchmark the median img/s of each
# library with the min and max, and the ratio of the medians. Run it on an idle machine (the
# figures are ratios within one run). mala itself picks BLIS's kernels as it picks OpenBLAS's
# (BLIS_ARCH_TYPE from CPUID, cli/main.c), since Debian's BLIS falls back to its AVX2 kernels on
# AVX-512 CPUs whose FMA unit count it does not know.
#   usage: tools/bench/bench_blas.sh            (env: THREADS, REPEATS)
set -euo pipefail
cd "$(dirname "$0")/../.."
case "${1:-}" in
    -h|--help) sed -n '2,9p' "$0"; exit 0 ;;
    "") ;;
    *) echo "bench_blas.sh: unknown argument '$1'" >&2; exit 2 ;;
esac
T=${THREADS:-2}
R=${REPEATS:-3}
if [ ! -e /usr/include/x86_64-linux-gnu/blis-openmp/cblas.h ]; then
    sudo=(); [ "$(id -u)" = 0 ] || sudo=(sudo)
    "${sudo[@]}" apt-get install -y --no-install-recommends libblis-openmp-dev
fi
make -s mala
make -s BLAS=blis BUILD=build-blis CUDA=0 MALA_BIN=mala-blis mala-blis
out=bench-blas.jsonl
: > "$out"
benches=(
    "bench train --model DiT-S/2 --attn mala --batch 32 --steps 3"
    "bench train --model DiT-T/4 --attn mala --batch 64 --steps 10"
    "bench sample --model DiT-S/2 --attn mala --sampler ddim --steps 10 --n 8"
)
for i in $(seq 1 "$R"); do
    for b in "${benches[@]}"; do
        for lib in openblas blis; do
            bin=./mala; [ "$lib" = blis ] && bin=./mala-blis
            echo "\$ $bin $b --threads $T" >&2
            # shellcheck disable=SC2086
            line=$($bin $b --threads "$T" | tail -n 1)
            echo "${line%\}},\"blas\":\"$lib\",\"run\":$i,\"what\":\"$b\"}" | tee -a "$out"
        done
    done
done
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = {}
for line in open(sys.argv[1]):
    j = json.loads(line)
    rows.setdefault(j["what"], {}).setdefault(j["blas"], []).append(j["img_per_s"])
print("\nimg/s over the runs: median [min .. max], OpenBLAS then BLIS, and OpenBLAS / BLIS")
for what, libs in rows.items():
    o, b = libs["openblas"], libs["blis"]
    mo, mb = statistics.median(o), statistics.median(b)
    print(f"  {mo:8.3f} [{min(o):.3f} .. {max(o):.3f}]  {mb:8.3f} [{min(b):.3f} .. {max(b):.3f}]  {mo / mb:5.2f}x  {what}")
EOF
