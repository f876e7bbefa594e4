#!/usr/bin/env bash
# The installed library (docs/library.md): `make install PREFIX=` into a temporary folder, then
#  - the installed mala samples from the bundled model it installed (share/mala/);
#  - libmala.so's soname carries the API version and its dynamic symbols are mala_* only;
#  - examples/generate.c builds with `pkg-config --cflags --libs mala` alone and runs, and its PNG
#    holds the same pixels as `mala sample` with the same parameters (the PNGs' IDAT bytes: the
#    same writer, only mala sample's text chunk differs);
#  - tests/api_threads.c: two threads on separate contexts and models make what one thread makes;
#  - python/mala.py makes what `mala sample --save-npy` and `mala vae` make, bit for bit (tests/test_python.py;
#    SKIP where no python3 has numpy; MALA_PYTHON: the interpreters to try, default python3 /usr/bin/python3);
#  - make uninstall removes what make install put there.
# usage: tests/test_library.sh [MAKE ARGS...]   (from the repository root; MALA_BIN: the mala binary)
set -euo pipefail
mala=${MALA_BIN:-./mala}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
make -s install PREFIX="$tmp/prefix" "$@" >/dev/null
lib=$tmp/prefix/lib
for f in bin/mala include/mala.h lib/libmala.a lib/libmala.so lib/libmala.so.1 lib/pkgconfig/mala.pc; do
    [ -e "$tmp/prefix/$f" ] || fail "make install did not install $f"
done
soname=$(objdump -p "$lib/libmala.so" | awk '/SONAME/ {print $2}')
[ "$soname" = libmala.so.1 ] || fail "libmala.so's soname is '$soname', expected libmala.so.1"
others=$(nm -D --defined-only "$lib/libmala.so" | awk '{print $3}' | grep -v '^mala_' || true)
[ -z "$others" ] || fail "libmala.so exports more than mala_*: $(echo $others | head -c 300)"
(cd "$tmp" && prefix/bin/mala sample --n 1 --steps 2 --sampler ddim --out one.png 2>/dev/null) ||
    fail "the installed mala does not find its bundled model (share/mala/)"
echo "ok: make install; soname $soname; $(nm -D --defined-only "$lib/libmala.so" | wc -l) exported symbols, all mala_*"

export PKG_CONFIG_PATH=$lib/pkgconfig
cc -std=c11 -Wall -Wextra -Werror examples/generate.c -o "$tmp/generate" $(pkg-config --cflags --libs mala)
args=(--class Sneaker --n 16 --sampler ddim --steps 8 --seed 5)
(cd "$tmp" && ./generate "$OLDPWD/assets/mala-dit-fmnist.safetensors" Sneaker ex.png 8 5 >/dev/null 2>&1) ||
    fail "examples/generate failed"
"$mala" sample "${args[@]}" --out "$tmp/cli.png" 2>/dev/null
idat() {  # the concatenated IDAT chunks of a PNG (stdlib only)
    python3 - "$1" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read(); i, out = 8, b""
while i < len(b):
    n, t = struct.unpack(">I4s", b[i:i + 8])
    if t == b"IDAT": out += b[i + 8:i + 8 + n]
    i += 12 + n
sys.stdout.buffer.write(out)
PY
}
cmp -s <(idat "$tmp/ex.png") <(idat "$tmp/cli.png") || fail "examples/generate's PNG differs from mala sample ${args[*]}"
echo "ok: examples/generate.c built with pkg-config against the installed library; its PNG = mala sample ${args[*]}"

# examples/train.c: a run through the API writes the checkpoints `mala train` writes with the same
# settings, byte for byte, and `mala train --resume` continues it
cc -std=c11 -Wall -Wextra -Werror examples/train.c -o "$tmp/train" $(pkg-config --cflags --libs mala)
"$tmp/train" "$tmp/api-run" DiT-T/4 4 8 64 >"$tmp/train.log" 2>&1 || { cat "$tmp/train.log" >&2; fail "examples/train failed"; }
grep -q "^step 4 " "$tmp/train.log" || fail "examples/train printed no log line for step 4"
"$mala" train --model DiT-T/4 --iters 4 --batch 8 --limit 64 --ckpt-every 100 --log-every 50 --sample-every 0 \
    --tensorboard 0 --threads 2 --out "$tmp/cli-run" 2>/dev/null || fail "mala train (the example's twin) failed"
cmp -s "$tmp/api-run/checkpoints/0000004.safetensors" "$tmp/cli-run/checkpoints/0000004.safetensors" ||
    fail "examples/train's checkpoint differs from mala train's"
"$tmp/train" "$tmp/api-run" DiT-T/4 4 8 64 >/dev/null 2>"$tmp/again.err" && fail "a second run into the same directory was not refused"
grep -q "already holds a run" "$tmp/again.err" || fail "the refusal of a used directory does not say why: $(cat "$tmp/again.err")"
"$mala" train --resume --iters 6 --out "$tmp/api-run" --threads 2 2>/dev/null || fail "mala train --resume of the API's run"
echo "ok: examples/train.c: its checkpoint = mala train's with the same settings; a used directory refused; --resume continues it"

cc -std=c11 -Wall -Wextra -Werror tests/api_train.c -o "$tmp/api_train" $(pkg-config --cflags --libs mala)
"$tmp/api_train" "$tmp" || fail "tests/api_train.c"

cc -std=c11 -Wall -Wextra -Werror tests/api_threads.c -o "$tmp/api_threads" -lpthread $(pkg-config --cflags --libs mala)
"$tmp/api_threads" assets/mala-dit-fmnist.safetensors || fail "tests/api_threads.c"

py=
for p in ${MALA_PYTHON:-python3 /usr/bin/python3}; do
    if command -v "$p" >/dev/null && "$p" -c 'import numpy' 2>/dev/null; then py=$p; break; fi
done
if [ -z "$py" ]; then
    echo "SKIP: python/mala.py (no python3 with numpy here; Debian: apt-get install python3-numpy)"
else
    "$mala" sample "${args[@]}" --save-npy "$tmp/cli.npy" 2>/dev/null
    MALA_BIN=$mala MALA_LIB=$lib/libmala.so.1 "$py" tests/test_python.py "$tmp/cli.npy" || fail "tests/test_python.py"
fi
make -s uninstall PREFIX="$tmp/prefix" "$@" >/dev/null
left=$(find "$tmp/prefix" -type f -o -type l)
[ -z "$left" ] || fail "make uninstall left: $left"
echo "ok: make uninstall removed every file make install put there"
echo "all library checks passed"
