#!/usr/bin/env bash
# Builds tandem on the GPU machine against its pip PyTorch (LibTorch with CUDA and NCCL),
# with the Debian libraries that scripts/gpu/pack-deps.sh packed into .device/deps.tgz.
# Run from the repo root (docs/gpu.md):
#
#   scripts/gpu/build-on-device.sh [--python PY] [--build-dir build-gpu] [--target T]... [-- extra cmake args]
#
#   --python PY       the interpreter whose torch to build against, and for which the Python
#                     module is built (default: python3 on the PATH)
#   --build-dir DIR   default build-gpu
#   --target T        build only these targets (repeatable; default: everything)
#
# Unpacks the libraries to $TANDEM_DEPS (default DIR/deps: it stays with the build, which
# the GPU machine keeps between calls while it is warm), finds LibTorch through
# torch.utils.cmake_prefix_path and nccl.h in the pip NVIDIA packages torch loads NCCL from,
# configures and builds. Writes DIR/device-env.sh, to source before running what it built
# (PATH and LD_LIBRARY_PATH for the packed libraries).
set -euo pipefail
py=python3
build=build-gpu
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --python) py=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --target) targets+=(--target "$2"); shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) break ;;  # the rest goes to cmake
  esac
done
[ -f CMakeLists.txt ] && [ -d src ] || { echo "build-on-device.sh: run it from the repository root" >&2; exit 2; }
[ -f .device/deps.tgz ] || {
  echo "build-on-device.sh: no .device/deps.tgz: run scripts/gpu/pack-deps.sh on a CPU machine and carry .device" >&2
  exit 2; }
"$py" -c 'import torch' 2>/dev/null || { echo "build-on-device.sh: $py cannot import torch: pass --python" >&2; exit 2; }
py=$(command -v "$py")

# The packed libraries are Debian bookworm's: glibc 2.34 or later, and GCC 12's libstdc++
# (GLIBCXX_3.4.30) at run time.
glibc=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [ -n "$glibc" ] && ! printf '2.34\n%s\n' "$glibc" | sort -V -C; then
  echo "build-on-device.sh: glibc $glibc is older than 2.34, which the packed Debian bookworm libraries need" >&2
  exit 2
fi
stdcxx=$(${CXX:-c++} -print-file-name=libstdc++.so.6 2>/dev/null || true)
if [ -f "$stdcxx" ] && ! grep -qa GLIBCXX_3.4.30 "$stdcxx"; then
  echo "build-on-device.sh: warning: $stdcxx lacks GLIBCXX_3.4.30 (GCC 12's), which the packed libraries use" >&2
fi

mkdir -p "$build"
build=$(cd "$build" && pwd)
deps=${TANDEM_DEPS:-$build/deps}
if [ ! -f "$deps/.unpacked" ] || [ .device/deps.tgz -nt "$deps/.unpacked" ]; then
  rm -rf "$deps" && mkdir -p "$deps" && tar xzf .device/deps.tgz -C "$deps" && touch "$deps/.unpacked"
fi
export PATH="$deps/usr/bin:$PATH"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

torch_prefix=$("$py" -c 'import torch; print(torch.utils.cmake_prefix_path)')
# nccl.h of the very NCCL torch loads: in the pip NVIDIA packages (nvidia/nccl, or a
# per-CUDA folder such as nvidia/cu13 in newer wheels).
nccl_root=$("$py" - <<'PY' 2>/dev/null || true
import glob, os
import nvidia
for base in list(nvidia.__path__):
    found = sorted(glob.glob(os.path.join(base, "**", "include", "nccl.h"), recursive=True))
    if found:
        print(os.path.dirname(os.path.dirname(found[0])))
        break
PY
)
nccl_header_version=""
if [ -n "$nccl_root" ]; then
  nccl_header_version=$(awk '/#define NCCL_(MAJOR|MINOR|PATCH) /{v = v (v ? "." : "") $3} END{print v}' "$nccl_root/include/nccl.h")
fi
echo "torch: $("$py" -c 'import torch; print(torch.__version__, "CUDA", torch.version.cuda, "NCCL", ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else "(no GPU visible)")')"
echo "torch prefix: $torch_prefix"
echo "nccl.h: ${nccl_root:-not found in the pip nvidia packages} ${nccl_header_version:+(NCCL $nccl_header_version)}"

# The Python module needs no Python headers (libtandem_feed.so is a C ABI under ctypes):
# -DPython3_EXECUTABLE only picks the Python its tests run.

gen=(); command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$torch_prefix;$deps/usr" -DPython3_EXECUTABLE="$py" \
  ${nccl_root:+-DNCCL_ROOT="$nccl_root"} "$@"
cmake --build "$build" -j "$(nproc)" "${targets[@]}"

cat >"$build/device-env.sh" <<ENV
# Source before running what $build holds: the packed libraries' tools and shared objects.
export PATH="$deps/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
ENV
echo "built in $build; before running: source $build/device-env.sh"
