#!/usr/bin/env bash
# Installs the Debian packages mala-dit needs to build, test and run (as root or via sudo).
set -euo pipefail
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y --no-install-recommends \
    build-essential pkg-config check libsubunit-dev libopenblas-openmp-dev liblapacke-dev zlib1g-dev \
    libstb-dev libsdl2-dev dataset-fashion-mnist xvfb xauth
