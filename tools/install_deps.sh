#!/usr/bin/env bash
# Installs the Debian packages mala-dit needs to build, test and run. Works as root (no sudo
# needed: a fresh Debian often has none) and as a user with sudo (it elevates itself).
#
#   tools/install_deps.sh [--dry-run]    (--dry-run: print the commands instead of running them)
set -euo pipefail
dry=0
case "${1:-}" in
    --dry-run) dry=1 ;;
    "") ;;
    *) echo "usage: tools/install_deps.sh [--dry-run]" >&2; exit 2 ;;
esac
if [ "$(id -u)" = 0 ]; then
    elevate=()
elif command -v sudo >/dev/null 2>&1; then
    elevate=(sudo)
else
    echo "error: installing packages needs root: run this as root, or install sudo (you are $(id -un), and sudo is not on PATH)" >&2
    exit 1
fi
# clang-14 + libclang-rt-14-dev: libFuzzer and the sanitizers of `make fuzz` / `make fuzz-regress`;
# llvm-14: llvm-symbolizer, for readable stacks in their reports.
packages=(build-essential pkg-config check libsubunit-dev libopenblas-openmp-dev liblapacke-dev libdnnl-dev zlib1g-dev
          libstb-dev libjpeg62-turbo-dev libsdl2-dev dataset-fashion-mnist xvfb xauth
          libmicrohttpd-dev chromium  # mala serve (server/, docs/serve.md); chromium: its browser test
          clang-14 libclang-rt-14-dev llvm-14
          openmpi-bin libopenmpi-dev  # MPI: multi-process training (docs/design.md §9)
          python3-numpy  # tests/test_python.py: python/mala.py, the ctypes binding (numpy arrays in and out)
          python3-protobuf protobuf-compiler)  # test_tfevents: our event files read by Google's protobuf
          # (python3-numpy: tests/test_python.py, python/mala.py)
run() {
    if [ "$dry" = 1 ]; then echo "$*"; else "$@"; fi
}
export DEBIAN_FRONTEND=noninteractive
run "${elevate[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
run "${elevate[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${packages[@]}"
