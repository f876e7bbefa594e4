#!/usr/bin/env bash
# The include-layer check (docs/design.md §0). Every project include names its header from the
# repository root (`#include "core/backend.h"`), the one include root (-I.), so no header can be
# reached by two paths; and a file may include headers of its own layer or the layers below,
# never above. A weak reference is an include in disguise (the linker resolves it to whatever
# defines the name), so a weak declaration of a function defined in a higher layer is a
# violation too: such calls go through a table the higher layer registers (core/dist.h's
# DistDeviceOps). Prints every violation and exits 1; `make test` runs it.
# Usage: tools/check_layers.sh [ROOT]   (ROOT: the tree to check, the repository by default)
set -euo pipefail
cd "${1:-$(dirname "$0")/..}"
declare -A layer=([core]=0 [formats]=1 [cpu]=1 [cuda]=1 [data]=2 [model]=2 [sampler]=2 [pipeline]=3 [train]=3 [eval]=3
                  [compare]=4 [api]=4 [include]=4 [cli]=5 [viewer]=5 [server]=5)
bad=0 checked=0
for dir in "${!layer[@]}"; do
    [ -d "$dir" ] || continue
    while IFS= read -r -d '' f; do
        while IFS= read -r inc; do
            top=${inc%%/*}
            if [[ $inc != */* || -z ${layer[$top]:-} ]]; then
                # not root-relative: fine only for a header that is not the project's (system, stb, CUDA)
                if [ -f "$(dirname "$f")/$inc" ] || ls ./*/"$inc" >/dev/null 2>&1; then
                    echo "unqualified include: $f includes \"$inc\" (name it from the repository root)"
                    bad=$((bad + 1))
                fi
                continue
            fi
            if [ ! -f "$inc" ]; then echo "missing header: $f includes \"$inc\""; bad=$((bad + 1)); continue; fi
            checked=$((checked + 1))
            if (( layer[$top] > layer[$dir] )); then
                echo "layer violation: $f (layer ${layer[$dir]}, $dir/) includes $inc (layer ${layer[$top]}, $top/)"
                bad=$((bad + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) -print0)
done
# weak declarations: `... name(...) __attribute__((weak));`, and where each name is defined
weak=0
for dir in "${!layer[@]}"; do
    [ -d "$dir" ] || continue
    while IFS= read -r -d '' f; do
        while IFS= read -r name; do
            weak=$((weak + 1))
            while IFS= read -r def; do
                top=${def%%/*}
                if [ -n "${layer[$top]:-}" ] && (( layer[$top] > layer[$dir] )); then
                    echo "layer violation: $f (layer ${layer[$dir]}, $dir/) has a weak reference to $name, defined in $def (layer ${layer[$top]}, $top/): register a table of functions instead"
                    bad=$((bad + 1))
                fi
            done < <(grep -rlE --include='*.c' --include='*.cu' --include='*.cc' "^[A-Za-z_].*[^A-Za-z0-9_]$name\([^;]*\)[[:space:]]*\{?[[:space:]]*\$" \
                         "${!layer[@]}" 2>/dev/null | grep -v "^$f\$" || true)
        done < <(sed -n 's/^.*[^A-Za-z0-9_]\([A-Za-z_][A-Za-z0-9_]*\)([^;]*)[[:space:]]*__attribute__((weak));.*$/\1/p' "$f")
    done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' \) -print0)
done
# Only the selection, the CPU backend and the front ends name the CPU backend (core/backend.h):
# library code gets backend_host / backend_on_host.
while IFS= read -r hit; do
    echo "layer violation: $hit names backend_cpu(): use backend_host() or backend_on_host(be) (core/backend.h)"
    bad=$((bad + 1))
done < <(grep -rn --include='*.c' --include='*.h' --include='*.cu' 'backend_cpu()' \
             $(for d in "${!layer[@]}"; do case $d in cpu|cli|viewer) ;; *) [ -d "$d" ] && echo "$d";; esac; done) 2>/dev/null |
         grep -v '^core/backend_select\.c:' || true)
if [ "$bad" -gt 0 ]; then echo "check_layers: $bad violation(s) (docs/design.md §0)"; exit 1; fi
echo "check_layers: $checked project includes, all from the root, none climbs a layer; $weak weak declarations, none reaches up"
