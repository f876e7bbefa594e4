#!/usr/bin/env bash
# tools/check_layers.sh must fail on a tree that breaks a layer: an include that climbs, and a weak
# reference from core/ to a function defined in cuda/ (the way core/dist.c once reached NCCL),
# and model/ naming the CPU backend, and pass the same tree once the reference goes through a registered table.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/core" "$t/cuda/nccl" "$t/model"
cat > "$t/core/dist.c" <<'C'
int dist_nccl_sum(float *x, unsigned long n) __attribute__((weak));
int dist_sum(float *x, unsigned long n) { return dist_nccl_sum ? dist_nccl_sum(x, n) : -1; }
C
cat > "$t/cuda/nccl/dist_nccl.c" <<'C'
int dist_nccl_sum(float *x, unsigned long n) {
    return 0;
}
C
echo '#include "model/net.h"' > "$t/core/up.c"
echo 'const void *plan_backend(void) { return backend_cpu(); }' > "$t/model/plan.c"
echo 'int net;' > "$t/model/net.h"
fail() { echo "check_layers_test: $*"; exit 1; }
out=$("$here/tools/check_layers.sh" "$t" 2>&1) && fail "passed a tree with an upward weak reference and include"
grep -q "core/dist.c (layer 0, core/) has a weak reference to dist_nccl_sum, defined in cuda/nccl/dist_nccl.c" <<<"$out" ||
    fail "no line for the weak reference: $out"
grep -q "layer violation: core/up.c" <<<"$out" || fail "no line for the include: $out"
grep -q "layer violation: model/plan.c:1:.* names backend_cpu()" <<<"$out" || fail "no line for backend_cpu() in model/: $out"
rm "$t/core/up.c" "$t/model/plan.c"
printf 'int (*dist_sum_fn)(float *, unsigned long);\nint dist_sum(float *x, unsigned long n) { return dist_sum_fn ? dist_sum_fn(x, n) : -1; }\n' > "$t/core/dist.c"
out=$("$here/tools/check_layers.sh" "$t" 2>&1) || fail "refused a clean tree: $out"
echo "check_layers_test: an upward weak reference and include are caught, a clean tree passes"
