#!/usr/bin/env bash
# Installs the Debian packages mala-dit needs to build, test and run (as root or via sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
    build-essential pkg-config check libsubunit-dev libopenblas-openmp-dev liblapacke-dev zlib1g-dev \
    libstb-dev libjpeg62-turbo-dev libsdl2-dev dataset-fashion-mnist xvfb xauth \
    clang-14 libclang-rt-14-dev llvm-14
# clang-14 + libclang-rt-14-dev: libFuzzer and the sanitizers of `make fuzz` / `make fuzz-regress`;
# llvm-14: llvm-symbolizer, for readable stacks in their reports.
