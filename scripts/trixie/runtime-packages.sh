#!/usr/bin/env bash
# scripts/trixie/runtime-packages.sh FILE...: prints the Debian packages that provide the
# shared libraries the FILEs (the tandem binary, the Python module) need directly, one
# per line; apt brings in the rest. The image's final stage installs exactly these
# (examples/sagemaker/Dockerfile), and scripts/test-cuda runs this on its own build, so
# CI proves the list can be derived.
#
# Two libraries are not taken from a package's file list:
#  - libcuda.so.1 is the GPU driver's: the NVIDIA container runtime mounts the host's
#    into the container, so it is skipped;
#  - libcudnn.so.9 is written by nvidia-cudnn's installer, not listed by dpkg.
set -euo pipefail
[ $# -gt 0 ] || { echo "usage: runtime-packages.sh FILE..." >&2; exit 2; }

# The packages one file needs, one per line.
needed_packages() {
  local bin=$1 needed ldd_out lib path real owner
  needed=$(readelf -d "$bin" | awk '/\(NEEDED\)/ {gsub(/[][]/, "", $5); print $5}')
  ldd_out=$(ldd "$bin")
  for lib in $needed; do
    case $lib in
      libcuda.so.*) continue ;;
      libcudnn.so.*) echo nvidia-cudnn; continue ;;
      ld-linux*|linux-vdso*) continue ;;
    esac
    path=$(awk -v l="$lib" '$1 == l && $3 ~ /^\// {print $3}' <<<"$ldd_out")
    [ -n "$path" ] || { echo "runtime-packages.sh: $bin needs $lib, which is not found" >&2; exit 1; }
    real=$(realpath "$path")
    owner=$(dpkg -S "$real" 2>/dev/null || dpkg -S "$path" 2>/dev/null || true)
    [ -n "$owner" ] || { echo "runtime-packages.sh: no Debian package owns $real (needed as $lib)" >&2; exit 1; }
    echo "${owner%%:*}"
  done
}

for f in "$@"; do needed_packages "$f"; done | sort -u
