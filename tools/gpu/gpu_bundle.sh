#!/usr/bin/env bash
# make gpu-bundle: what the bare CUDA machine lacks to build and run ./mala, carried with the
# working tree in gpu-bundle/ (git-ignored; name it in the device run's `carry`).
#
# The GPU machine has nvcc, gcc, the driver and PyTorch, and no network, no apt and none of our
# build dependencies. Run here (root, network), this script:
#   1. downloads with `apt-get download` the .deb files of OpenBLAS (OpenMP build), LAPACKE,
#      Check + subunit, zlib, stb and SDL2 (the viewer is part of ./mala), plus the packages of
#      every shared library those load, found by following DT_NEEDED from the unpacked files
#      (apt's Depends would add X11 / PulseAudio -dev packages that nothing opens) -> gpu-bundle/debs;
#   2. unpacks them with `dpkg-deb -x` into a private prefix, build-gpu/prefix (never /);
#   3. in a mount namespace whose /usr/include and /usr/lib/x86_64-linux-gnu are overlays from
#      which the system's copies of those packages are deleted, builds ./mala and the parity
#      suite against the prefix (sm_90 and sm_90a machine code plus compute_90 PTX), then shows
#      from the compiler's dependency files and from ldd where every header and library came
#      from, and runs gpu_check.sh's setup section there as the GPU machine will;
#   4. keeps the two binaries in gpu-bundle/bin with the stamp of the sources they came from.
# tools/gpu/gpu_check.sh sources this file for the same functions: there it unpacks the debs, runs
# the carried binaries with LD_LIBRARY_PATH on the prefix, and rebuilds with bundle_build when
# the sources changed since the bundle was made or a carried binary does not start.
set -uo pipefail

MULTI=x86_64-linux-gnu
BUNDLE_DIR=gpu-bundle
BUNDLE_PREFIX=$PWD/build-gpu/prefix
BUNDLE_OBJ=build-gpu/obj
# sm_90 (plain Hopper), sm_90a (its arch-specific instructions) and compute_90 PTX that a newer
# driver can compile at load time if neither cubin fits.
BUNDLE_CUDA_ARCH="-gencode arch=compute_90,code=sm_90 -gencode arch=compute_90a,code=sm_90a -gencode arch=compute_90,code=compute_90"
# What we build against; everything they load at run time is added by bundle_download.
BUNDLE_ROOTS="libopenblas0-openmp libopenblas-openmp-dev liblapacke liblapacke-dev check libsubunit0 libsubunit-dev"
BUNDLE_ROOTS="$BUNDLE_ROOTS zlib1g zlib1g-dev libstb-dev libsdl2-2.0-0 libsdl2-dev"
# Libraries that any machine with a working gcc and CUDA has, and that must match its own
# compiler and driver: glibc, GCC's runtime (libgomp comes with gcc's OpenMP), CUDA's libraries.
BUNDLE_BASE_RE='^(libc|libm|libdl|librt|libpthread|libresolv|libutil|libmvec|libanl)\.so\.[0-9]+$|^ld-linux-x86-64\.so\.2$|^(libgcc_s|libstdc\+\+|libgomp)\.so\.[0-9]+$|^lib(cuda|cudart|cublas|cublasLt|curand|nvrtc|nvJitLink)\.so\.[0-9]+$|^linux-vdso\.so\.1$'

bundle_log() { echo "gpu-bundle: $*" >&2; }

# The prefix's library folders: OpenBLAS's first (its libblas / liblapack.so.3), then the
# multiarch ones, then private ones such as pulseaudio/ (found through a RUNPATH outside the prefix).
bundle_libdirs() {
    local p=$1
    { echo "$p/usr/lib/$MULTI/openblas-openmp"; echo "$p/usr/lib/$MULTI"; echo "$p/lib/$MULTI"
      find "$p" -name 'lib*.so*' -printf '%h\n' 2>/dev/null | sort -u; } | awk '!seen[$0]++' | paste -sd:
}

# Hash of everything the two binaries are built from (no git needed: the GPU machine gets a copy
# of the tree, maybe without .git).
bundle_stamp() {
    { find core formats cpu cuda model sampler pipeline train eval compare cli viewer -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) -print
      echo tests/test_backend_parity.c; echo tests/testutil.h; echo Makefile; } | LC_ALL=C sort | xargs sha256sum |
        { cat; echo "$BUNDLE_CUDA_ARCH"; } | sha256sum | cut -c1-16
}

# Unpacks the .deb files of $1 (those of packages $3..., else all) into $2, wiped first, and points
# absolute symlinks into the prefix.
bundle_unpack() {
    local debs=$1 p=$2 d l t list=()
    shift 2
    if [ $# -gt 0 ]; then for d in "$@"; do list+=("$debs/${d}_"*.deb); done; else list=("$debs"/*.deb); fi
    rm -rf "$p"
    mkdir -p "$p"
    for d in "${list[@]}"; do
        if command -v dpkg-deb >/dev/null; then
            dpkg-deb -x "$d" "$p" || { bundle_log "cannot unpack $d"; return 1; }
        else
            python3 - "$d" "$p" <<'EOF' || { bundle_log "cannot unpack $d"; return 1; }
import io, sys, tarfile
with open(sys.argv[1], "rb") as f:
    data, out = f.read(), sys.argv[2]
assert data[:8] == b"!<arch>\n", "not an ar archive"
off = 8
while off < len(data):  # ar members: 60-byte header, name padded to 16, size at 48..58
    name, size = data[off:off + 16].decode().strip(), int(data[off + 48:off + 58])
    if name.startswith("data.tar"):
        kw = {"filter": "fully_trusted"} if hasattr(tarfile, "fully_trusted_filter") else {}  # links fixed after
        tarfile.open(fileobj=io.BytesIO(data[off + 60:off + 60 + size])).extractall(out, **kw)
    off += 60 + size + (size & 1)
EOF
        fi
    done
    find "$p" -type l | while read -r l; do
        t=$(readlink "$l")
        case $t in /*) ln -sfn "$p$t" "$l" ;; esac
    done
    printf "%s\n" "${list[@]##*/}" | sha256sum > "$p/.unpacked-from"
}

# True when $2 holds exactly the debs of $1.
bundle_unpacked() {
    [ -f "$2/.unpacked-from" ] && [ "$(ls "$1"/*.deb | xargs -n1 basename | sha256sum)" = "$(cat "$2/.unpacked-from")" ]
}

# The environment the build uses: headers and link-time libraries from the prefix only.
bundle_env() {
    local p=$1 libdirs
    libdirs=$(bundle_libdirs "$p")
    export CPATH="$p/usr/include:$p/usr/include/$MULTI:$p/usr/include/$MULTI/openblas-openmp:$p/usr/include/stb${CPATH:+:$CPATH}"
    export LIBRARY_PATH="$libdirs${LIBRARY_PATH:+:$LIBRARY_PATH}"
    # The Makefile appends to LDLIBS from the environment: ld then finds what the prefix's
    # libraries need (libgfortran, SDL's X11 and audio libraries) without LD_LIBRARY_PATH on
    # the compiler itself, which would hand the toolchain our copies of libz and libzstd.
    export LDLIBS="-Wl,-rpath-link,$libdirs${LDLIBS:+ $LDLIBS}"
}

# Where CUDA's libraries may be on an image: the toolkit, the driver, PyTorch's wheels.
cuda_roots() {
    local sp c=${CUDA_HOME:-/usr/local/cuda}
    echo "$c/lib64 $c/lib $c/targets/x86_64-linux/lib /usr/local/cuda/lib64 /usr/local/nvidia/lib64 /usr/lib/$MULTI"
    for sp in $(python3 -c 'import site; print(" ".join(site.getsitepackages()))' 2>/dev/null); do
        ls -d "$sp"/nvidia/*/lib 2>/dev/null
    done
}

# For a build: link names and headers of cuBLAS / cuRAND where the toolkit of nvcc $1 has none
# (an image whose CUDA libraries come only from PyTorch's wheels, say).
cuda_build_env() {
    local home=${1%/bin/nvcc} n f d link=$PWD/$BUNDLE_OBJ/cuda-link
    mkdir -p "$link"
    for n in cudart cublas cublasLt curand; do
        [ -e "$home/lib64/lib$n.so" ] && continue
        for d in $(CUDA_HOME=$home cuda_roots); do
            f=$(ls "$d/lib$n.so".* 2>/dev/null | head -1)
            [ -n "$f" ] && { ln -sfn "$f" "$link/lib$n.so"; LDLIBS="${LDLIBS:-} -Wl,-rpath-link,$d"; break; }
        done
    done
    export LIBRARY_PATH="$LIBRARY_PATH:$link" LDLIBS
    for n in cublas_v2.h curand_kernel.h; do
        [ -e "$home/include/$n" ] && continue
        for d in $(CUDA_HOME=$home cuda_roots); do
            [ -e "$d/../include/$n" ] && { export CPATH="$CPATH:$(cd "$d/../include" && pwd)"; break; }
        done
    done
}

# Builds $BUNDLE_OBJ/mala and $BUNDLE_OBJ/tests/test_backend_parity against prefix $1 with nvcc $2
# (further arguments go to make: -n -B prints the commands).
bundle_build() {
    local p=$1 nvcc=$2
    shift 2
    (
        bundle_env "$p"
        cuda_build_env "$nvcc"
        make -j"$(nproc)" CUDA=1 NVCC="$nvcc" BUILD="$BUNDLE_OBJ" MALA_BIN="$BUNDLE_OBJ/mala" \
            BLAS_DIR="$p/usr/lib/$MULTI/openblas-openmp" CUDA_ARCH="$BUNDLE_CUDA_ARCH" \
            SDL_CFLAGS="-D_REENTRANT -I$p/usr/include/SDL2" SDL_LIBS="-lSDL2" \
            CHECK_LIBS="-lcheck_pic -lrt -lm -lsubunit" "$@" \
            "$BUNDLE_OBJ/mala" "$BUNDLE_OBJ/tests/test_backend_parity"
    )
}

# Every header each C file of that build includes, system headers too: the build's own compile
# commands (make -n -B) with -M in place of -c / -o.
bundle_all_headers() {
    local p=$1 nvcc=$2
    bundle_build "$p" "$nvcc" -n -B 2> /dev/null | grep -E '^cc .*[^ ]+\.c( |$)' |
        sed -E 's/ -MMD -MP//; s/ -c ([^ ]+\.c) -o [^ ]+$/ -M \1/; s/ -o [^ ]+ (tests\/[^ ]+\.c) .*$/ -M \1/' > "$BUNDLE_OBJ/depcmds.sh"
    ( bundle_env "$p"; bash "$BUNDLE_OBJ/depcmds.sh" ) | tr ' \\' '\n\n' | grep -E '\.(h|hpp)$' | sort -u
}

# Lists the device code in binary $1: cuobjdump where there is one, else the fatbin headers read
# directly (kind 1 = PTX, 2 = ELF; arch at byte 28; flag 0x100000 at byte 40 = arch-specific "a").
bundle_device_code() {
    local bin=$1 cuobjdump
    cuobjdump=$(command -v cuobjdump || ls "$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")/cuobjdump" 2>/dev/null)
    if [ -n "$cuobjdump" ] && [ -x "$cuobjdump" ]; then
        { "$cuobjdump" --list-elf "$bin"; "$cuobjdump" --list-ptx "$bin"; } 2>&1 |
            sed -n 's/.*\.\(sm_[0-9]*a\{0,1\}\)\.cubin$/elf \1/p; s/.*\.\(sm_[0-9]*a\{0,1\}\)\.ptx$/ptx \1/p' |
            sed 's/^ptx sm_/ptx compute_/' | sort | uniq -c | awk '{printf "%s %s x%d\n", $2, $3, $1}'
        return
    fi
    local tmp
    tmp=$(mktemp)
    objcopy -O binary --only-section=.nv_fatbin "$bin" "$tmp" 2>/dev/null
    python3 - "$tmp" <<'EOF'
import collections, struct, sys
d = open(sys.argv[1], "rb").read()
seen = collections.Counter()
off = d.find(struct.pack("<I", 0xBA55ED50))
while off >= 0:
    _, hsz, fsz = struct.unpack_from("<HHQ", d, off + 4)
    p, end = off + hsz, off + hsz + fsz
    while p < end:
        kind, _, ehs, psz = struct.unpack_from("<HHIQ", d, p)
        arch, = struct.unpack_from("<I", d, p + 28)
        flags, = struct.unpack_from("<Q", d, p + 40)
        a = "a" if flags & 0x100000 else ""
        seen[("elf sm_%d%s" if kind == 2 else "ptx compute_%d%s") % (arch, a)] += 1
        p += ehs + psz
    off = d.find(struct.pack("<I", 0xBA55ED50), end)
for k in sorted(seen):
    print("%s x%d" % (k, seen[k]))
if not seen:
    print("no device code")
EOF
    rm -f "$tmp"
}

# ---------------------------------------------------------------- here only (make gpu-bundle)

# The Debian package that holds shared library $1 on this machine.
soname_package() {
    local path real c
    path=$(ldconfig -p | awk -v s="$1" '$1 == s && /x86-64/ {print $NF; exit}')
    [ -n "$path" ] || path=$(find /usr/lib/$MULTI -name "$1" -print -quit)  # a private folder (RUNPATH)
    [ -n "$path" ] || return 1
    real=$(readlink -f "$path")
    for c in "$path" "$real" "${real#/usr}" "${path#/usr}"; do
        dpkg -S "$c" 2>/dev/null | head -1 | cut -d: -f1 | grep . && return 0
    done
    return 1
}

# Downloads the roots and, until nothing is missing, the packages of libraries they need.
bundle_download() {
    local debs=$1 stage=$2 pkgs=$BUNDLE_ROOTS new p v f missing round=0
    mkdir -p "$debs"
    while :; do
        round=$((round + 1))
        for p in $pkgs; do
            ls "$debs/${p}_"*.deb >/dev/null 2>&1 && continue
            v=$(dpkg-query -W -f='${Version}' "$p" 2>/dev/null)
            # the version installed here (what `make test` passes with), else apt's candidate
            (cd "$debs" && { [ -n "$v" ] && apt-get download -q -o APT::Sandbox::User=root "$p=$v" > /dev/null 2>&1 ||
                                       apt-get download -q -o APT::Sandbox::User=root "$p" > /dev/null; }) ||
                { bundle_log "apt-get download $p failed"; return 1; }
        done
        bundle_unpack "$debs" "$stage" $pkgs || return 1
        # sonames the prefix provides, and those its ELF files need
        missing=$(find "$stage" \( -type f -o -type l \) -name '*.so*' -print | while read -r f; do
                      objdump -p "$f" 2>/dev/null | awk '$1 == "NEEDED" {print $2}'; done | sort -u |
                  while read -r f; do
                      [ -n "$(find "$stage" -name "$f" -print -quit)" ] || echo "$f"; done | grep -Ev "$BUNDLE_BASE_RE")
        [ -z "$missing" ] && break
        new=""
        for f in $missing; do
            p=$(soname_package "$f") || { bundle_log "no installed package holds $f (needed in the bundle)"; return 1; }
            case " $pkgs $new " in *" $p "*) ;; *) new="$new $p" ;; esac
        done
        [ -z "$new" ] && { bundle_log "unresolved: $missing"; return 1; }
        bundle_log "round $round: $(echo "$missing" | wc -w) libraries missing -> adding$new"
        pkgs="$pkgs$new"
        [ $round -lt 20 ] || { bundle_log "dependency closure did not converge"; return 1; }
    done
    # drop debs left from an earlier list
    for f in "$debs"/*.deb; do
        p=$(basename "$f"); p=${p%%_*}
        case " $(echo $pkgs) " in *" $p "*) ;; *) rm -f "$f"; bundle_log "removed stale $f" ;; esac
    done
    echo $pkgs | tr ' ' '\n' | sort > "$BUNDLE_DIR/packages.txt"
}

# The libraries that the tools these scripts run load (compiler, linker, nvcc, dpkg, python3, the
# shell utilities): they stay visible in the namespace, for those processes' own use.
toolchain_libs() {
    local t nv
    nv=$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
    for t in bash sh env make cc gcc g++ as ld ar objdump objcopy strip nm readelf ldd ldconfig \
             "$(gcc -print-prog-name=cc1)" "$(gcc -print-prog-name=cc1plus)" "$(gcc -print-prog-name=collect2)" \
             "$(gcc -print-prog-name=lto-wrapper)" "$nv"/* "$nv"/../nvvm/bin/* \
             awk gawk mawk sed grep find sort uniq xargs sha256sum cut tr head tail wc paste od tee cat ls cp mv ln rm \
             mkdir mktemp readlink dirname basename date timeout nproc uname du touch sleep mount umount unshare \
             dpkg dpkg-deb dpkg-query tar xz gzip zstd "$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null)"; do
        t=$(command -v "$t" 2>/dev/null) && [ -f "$t" ] && ldd "$t" 2>/dev/null | awk '/=>/ {print $3}'
    done | sort -u | while read -r t; do echo "$t"; readlink -f "$t"; done | sed 's,^/lib/,/usr/lib/,' | sort -u
}

# In this (already unshared) mount namespace: overlays over the system's include and library
# folders, from which every file of the bundled packages is deleted except the few that the
# toolchain itself loads (listed; our binaries load the prefix's copies of those, see ldd).
hide_system_copies() {
    local tmp=$1 d keep f
    keep=$(toolchain_libs)
    for p in $(cat "$BUNDLE_DIR/packages.txt"); do dpkg -L "$p"; done 2>/dev/null | sed 's,^/lib/,/usr/lib/,' |
        grep -E "^(/usr/include|/usr/lib/$MULTI)/" | sort -u | while read -r f; do
            [ -d "$f" ] && [ ! -L "$f" ] && continue
            if grep -qxF "$f" <<< "$keep"; then echo "kept $f"; else echo "hide $f"; fi
        done > "$tmp/hidden.txt"
    for d in /usr/include /usr/lib/$MULTI; do
        mkdir -p "$tmp/upper$d" "$tmp/work$d"
        mount -t overlay overlay -o "lowerdir=$d,upperdir=$tmp/upper$d,workdir=$tmp/work$d" "$d" || return 1
    done
    sed -n 's/^hide //p' "$tmp/hidden.txt" | xargs -d '\n' rm -f
    # folders that only our packages use go with their files
    for d in /usr/include/SDL2 /usr/include/stb /usr/include/subunit /usr/include/$MULTI/SDL2 \
             /usr/include/$MULTI/openblas-openmp /usr/lib/$MULTI/openblas-openmp; do
        rm -rf "$d"
    done
    echo "hid $(grep -c '^hide ' "$tmp/hidden.txt") system files of $(wc -l < "$BUNDLE_DIR/packages.txt") packages;" \
         "left for the toolchain's own use: $(sed -n 's,^kept .*/,,p' "$tmp/hidden.txt" | sort -u | tr '\n' ' ')"
}

# ldd of binary $1 with the prefix's folders first: every library must come from the prefix
# ("bundle") or be glibc, GCC's runtime or CUDA's ("system"); one line per library; fails on
# anything else (SYSTEM-COPY) or a library not found (MISSING).
bundle_ldd_check() {
    local bin=$1 libdirs=$2 bad=0 name path where
    while read -r name path; do
        name=${name##*/}
        case $path in
            "$BUNDLE_PREFIX"/*) where=bundle ;;
            "not found") where=MISSING; bad=1 ;;
            *) if grep -Eq "$BUNDLE_BASE_RE" <<<"$name"; then where=system; else where=SYSTEM-COPY; bad=1; fi ;;
        esac
        printf '  %-28s %-12s %s\n' "$name" "$where" "${path#$BUNDLE_PREFIX/}"
    done < <(LD_LIBRARY_PATH="$libdirs" ldd "$bin" | awk '/=>/ {print $1, ($3 == "not" ? "not found" : $3)} !/=>/ {print $1, $1}' | sort)
    return $bad
}

# The namespace part of `make gpu-bundle`: hide, build, show provenance, run the setup section.
bundle_selftest() {
    local tmp libdirs nvcc hdr
    tmp=$(mktemp -d)
    mount --make-rprivate / 2>/dev/null
    hide_system_copies "$tmp" || { bundle_log "cannot hide the system copies (overlay mount failed)"; return 1; }
    for hdr in /usr/include/check.h /usr/include/zlib.h /usr/include/lapacke.h /usr/include/SDL2/SDL.h \
               /usr/include/stb/stb_image.h /usr/include/$MULTI/openblas-openmp/cblas.h /usr/lib/$MULTI/libz.so \
               /usr/lib/$MULTI/libSDL2.so /usr/lib/$MULTI/liblapacke.so /usr/lib/$MULTI/libcheck_pic.a; do
        [ -e "$hdr" ] && { bundle_log "still visible: $hdr"; return 1; }
    done
    echo "in this namespace the system copies are gone: /usr/include/{check,zlib,lapacke}.h, SDL2/, stb/, openblas-openmp/, libz.so, libSDL2.so, liblapacke.so, libcheck_pic.a"
    nvcc=$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")
    echo "== build against the prefix ($BUNDLE_OBJ, $BUNDLE_CUDA_ARCH)"
    bundle_build "$BUNDLE_PREFIX" "$nvcc" > "$tmp/build.log" 2>&1 || { tail -30 "$tmp/build.log"; return 1; }
    tail -2 "$tmp/build.log"
    echo "== every header the C files include (cc -M with the build's own flags), by folder"
    bundle_all_headers "$BUNDLE_PREFIX" "$nvcc" > "$tmp/headers.txt"
    # the prefix's by folder, the system's by the Debian package that owns them (dpkg -S)
    { grep "^$BUNDLE_PREFIX/" "$tmp/headers.txt" | sed "s,^$BUNDLE_PREFIX/,prefix: ,; s,/[^/]*$,/,"
      grep -v "^$BUNDLE_PREFIX/" "$tmp/headers.txt" | grep '^/' | xargs -r readlink -f | xargs -r dpkg -S 2>&1 |
          sed 's/^\([^:]*\):.*/system package \1/; s/^dpkg-query: no path found matching pattern \(.*\)/NOT A PACKAGE \1/'
      grep -v '^/' "$tmp/headers.txt" | sed 's/.*/the project/'; } | sort | uniq -c | sed 's/^/  /'
    if grep -v "^$BUNDLE_PREFIX/" "$tmp/headers.txt" | grep -xFf <(sed -n 's/^hide //p' "$tmp/hidden.txt"); then
        bundle_log "headers of the bundled packages from the system (above)"; return 1
    fi
    if grep -v "^$BUNDLE_PREFIX/" "$tmp/headers.txt" | grep -E '/(check|zlib|lapacke|cblas|SDL|stb_image)\.h$'; then
        bundle_log "headers of the bundled packages from outside the prefix (above)"; return 1
    fi
    echo "  none of the bundled packages' headers from outside the prefix"
    libdirs=$(bundle_libdirs "$BUNDLE_PREFIX")
    for b in "$BUNDLE_OBJ/mala" "$BUNDLE_OBJ/tests/test_backend_parity"; do
        echo "== ldd $b (LD_LIBRARY_PATH = the prefix)"
        bundle_ldd_check "$b" "$libdirs" || { bundle_log "$b loads libraries from outside the bundle"; return 1; }
    done
    echo "== they start"
    LD_LIBRARY_PATH="$libdirs" "$BUNDLE_OBJ/mala" help | head -3
    CK_FORK=no LD_LIBRARY_PATH="$libdirs" "$BUNDLE_OBJ/tests/test_backend_parity" | tail -1
    echo "== device code in mala"
    bundle_device_code "$BUNDLE_OBJ/mala" | sed 's/^/  /'
    rm -rf "$tmp"
}

bundle_make() {
    local t0=$SECONDS
    command -v apt-get >/dev/null && command -v dpkg >/dev/null || { bundle_log "needs apt-get and dpkg (Debian)"; return 1; }
    command -v nvcc >/dev/null || [ -x /usr/local/cuda/bin/nvcc ] || { bundle_log "needs nvcc to build the binaries"; return 1; }
    mkdir -p "$BUNDLE_DIR/bin"
    echo "== 1. debs -> $BUNDLE_DIR/debs"
    bundle_download "$BUNDLE_DIR/debs" "$BUNDLE_PREFIX" || return 1
    echo "  $(ls "$BUNDLE_DIR"/debs/*.deb | wc -l) packages, $(du -sh "$BUNDLE_DIR/debs" | cut -f1): $(tr '\n' ' ' < "$BUNDLE_DIR/packages.txt")"
    echo "== 2. unpacked into $BUNDLE_PREFIX"
    echo "== 3. build and check in a mount namespace without the system's copies"
    PATH="$(dirname "$(readlink -f "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")"):$PATH" \
        unshare -m bash -c 'source tools/gpu/gpu_bundle.sh && bundle_selftest' | tee "$BUNDLE_DIR/selftest.txt"
    [ "${PIPESTATUS[0]}" = 0 ] || { bundle_log "self-test failed (output above)"; return 1; }
    echo "== 4. carried binaries -> $BUNDLE_DIR/bin"
    strip --strip-debug -o "$BUNDLE_DIR/bin/mala" "$BUNDLE_OBJ/mala"
    strip --strip-debug -o "$BUNDLE_DIR/bin/test_backend_parity" "$BUNDLE_OBJ/tests/test_backend_parity"
    bundle_stamp > "$BUNDLE_DIR/stamp"
    { echo "built $(date -u +%FT%TZ) on $(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1)"
      echo "$(cc --version | head -1); $(nvcc --version 2>/dev/null | tail -1)"
      echo "CUDA_ARCH $BUNDLE_CUDA_ARCH"; bundle_device_code "$BUNDLE_DIR/bin/mala"; } > "$BUNDLE_DIR/built.txt"
    echo "== 5. gpu_check.sh's setup section in the namespace as the GPU machine runs it: unpack, carried"
    echo "      binaries; then with GPU_CHECK_REBUILD=1, the build it falls back to"
    unshare -m bash -c 'source tools/gpu/gpu_bundle.sh && tmp=$(mktemp -d) && mount --make-rprivate / && hide_system_copies "$tmp" > /dev/null &&
        rm -rf "$BUNDLE_PREFIX" && GPU_CHECK_SECTIONS=setup OUT=$tmp/out tools/gpu/gpu_check.sh | tail -1 &&
        grep -q "carried binaries" $tmp/out/summary.txt &&
        GPU_CHECK_REBUILD=1 GPU_CHECK_SECTIONS=setup OUT=$tmp/out tools/gpu/gpu_check.sh | tail -1 &&
        grep -q "built here against the bundle" $tmp/out/summary.txt && rm -rf "$tmp"' ||
        { bundle_log "gpu_check.sh setup failed in the namespace"; return 1; }
    echo "== gpu-bundle ready in $((SECONDS - t0)) s: $(du -sh "$BUNDLE_DIR" | cut -f1) in $BUNDLE_DIR (debs $(du -sh "$BUNDLE_DIR/debs" | cut -f1), bin $(du -sh "$BUNDLE_DIR/bin" | cut -f1)); stamp $(cat "$BUNDLE_DIR/stamp")"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    cd "$(dirname "$0")/../.." || exit 1
    BUNDLE_PREFIX=$PWD/build-gpu/prefix
    bundle_make
fi
