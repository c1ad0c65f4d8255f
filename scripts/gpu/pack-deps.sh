#!/usr/bin/env bash
# Packs the Debian libraries tandem builds against (gRPC, Protobuf, spdlog, CLI11, json,
# libjpeg-turbo, ...) into .device/deps.tgz, for the GPU machine, which has
# CUDA and pip PyTorch but no package registry and sees only the repository. Run on a
# Debian bookworm machine with apt sources (a CPU development machine), from the repo root:
#
#   scripts/gpu/pack-deps.sh [extra Debian packages]
#
# Writes .device/deps.tgz (about 16 MB; .device/ is ignored by git) and
# .device/manifest.txt (each package's version). On the GPU machine
# scripts/gpu/build-on-device.sh unpacks it and builds; see docs/gpu.md.
set -euo pipefail
out=${OUT_DIR:-.device}
[ -f CMakeLists.txt ] && [ -d src ] || { echo "pack-deps.sh: run it from the repository root" >&2; exit 2; }
# scripts/build-packages.txt's device packages: the -dev packages and the libraries they need.
. scripts/packages.sh
pkgs="$(build_packages device scripts/build-packages.txt | tr '\n' ' ') $*"
command -v apt-get >/dev/null && command -v dpkg >/dev/null || {
  echo "pack-deps.sh: needs apt-get and dpkg (a Debian bookworm machine)" >&2; exit 2; }
work=$(mktemp -d); trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debs" "$work/root"
(cd "$work/debs" && for p in $pkgs; do
  apt-get download "$p" >/dev/null 2>&1 || { echo "pack-deps.sh: cannot download $p (run apt-get update?)" >&2; exit 1; }
done)
for d in "$work"/debs/*.deb; do dpkg -x "$d" "$work/root"; done
# Shared libraries are enough, except GoogleTest, whose CMake targets name its static libraries.
find "$work/root" -name '*.a' ! -name 'libgtest*' ! -name 'libgmock*' -delete
rm -rf "$work/root/usr/share/doc" "$work/root/usr/share/man" "$work/root/usr/share/lintian" "$work/root/usr/src"
ln -sf /lib/x86_64-linux-gnu/libz.so.1 "$work/root/usr/lib/x86_64-linux-gnu/libz.so"
# gRPC's CMake config looks for re2 as a CMake package first, then through pkg-config,
# whose re2.pc would point at /usr (and the GPU machine may have no pkg-config at all).
mkdir -p "$work/root/usr/lib/x86_64-linux-gnu/cmake/re2"
cat >"$work/root/usr/lib/x86_64-linux-gnu/cmake/re2/re2Config.cmake" <<'CMAKE'
# Written by scripts/gpu/pack-deps.sh: the packed re2, found without pkg-config.
get_filename_component(_re2_usr "${CMAKE_CURRENT_LIST_DIR}/../../../.." ABSOLUTE)
if(NOT TARGET re2::re2)
  add_library(re2::re2 SHARED IMPORTED)
  set_target_properties(re2::re2 PROPERTIES
    IMPORTED_LOCATION "${_re2_usr}/lib/x86_64-linux-gnu/libre2.so"
    INTERFACE_INCLUDE_DIRECTORIES "${_re2_usr}/include")
endif()
set(re2_FOUND TRUE)
CMAKE
mkdir -p "$out"
tar czf "$out/deps.tgz" -C "$work/root" .
{
  echo "packed $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME")"
  for d in "$work"/debs/*.deb; do dpkg-deb -f "$d" Package Version | sed 's/^[^:]*: //' | paste -sd' '; done
} >"$out/manifest.txt"
echo "wrote $out/deps.tgz ($(du -h "$out/deps.tgz" | cut -f1)) and $out/manifest.txt"
