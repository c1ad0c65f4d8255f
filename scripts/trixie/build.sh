#!/usr/bin/env bash
# scripts/trixie/build.sh SRC BUILD [cmake args...]: configures and builds tandem with
# CUDA + NCCL against Debian trixie's LibTorch (Release, ninja, ccache when present).
# Run inside a trixie system that has scripts/build-packages.txt's trixie packages
# installed: scripts/test-cuda's root, or the build stage of examples/sagemaker/Dockerfile.
# Both use this one script.
set -euo pipefail
src=${1:?usage: build.sh SRC BUILD [cmake args...]}
build=${2:?usage: build.sh SRC BUILD [cmake args...]}
shift 2
# Precompiled headers and ccache agree only with these relaxations.
export CCACHE_SLOPPINESS=pch_defines,time_macros,include_file_mtime,include_file_ctime
if [ ! -f "$build/build.ninja" ]; then
  cmake -S "$src" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_WITH_CUDA=ON "$@"
fi
cmake --build "$build" -j "$(nproc)"
