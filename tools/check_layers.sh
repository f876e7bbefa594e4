#!/usr/bin/env bash
# The include-layer check (docs/design.md §0): a file may include headers of its own layer or the
# layers below, never above. Each quoted #include is resolved as the compiler does (the file's own
# folder first, then the -I folders in the Makefile's order) and its folder's layer compared.
# Prints every violation and exits 1; `make test` runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A layer=([core]=0 [cuda]=1 [model]=2 [sampler]=2 [pipeline]=3 [train]=3 [eval]=3 [app]=4)
search=(core model pipeline sampler train eval app)
bad=0 checked=0
for dir in "${!layer[@]}"; do
    while IFS= read -r -d '' f; do
        while IFS= read -r inc; do
            if [[ $inc == */* ]]; then path=$inc
            elif [ -f "$(dirname "$f")/$inc" ]; then path=$(dirname "$f")/$inc
            else
                path=""
                for d in "${search[@]}"; do [ -f "$d/$inc" ] && { path=$d/$inc; break; }; done
                [ -n "$path" ] || continue  # a system or third-party header
            fi
            top=${path%%/*}
            [ -n "${layer[$top]:-}" ] || continue
            checked=$((checked + 1))
            if (( layer[$top] > layer[$dir] )); then
                echo "layer violation: $f (layer ${layer[$dir]}, $dir/) includes $path (layer ${layer[$top]}, $top/)"
                bad=$((bad + 1))
            fi
        done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
    done < <(find "$dir" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.inc' \) -print0)
done
if [ "$bad" -gt 0 ]; then echo "check_layers: $bad include(s) climb a layer (docs/design.md §0)"; exit 1; fi
echo "check_layers: $checked project includes, none climbs a layer"
