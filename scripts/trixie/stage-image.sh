#!/usr/bin/env bash
# scripts/trixie/stage-image.sh SRC BUILD OUT: stages what the SageMaker image's final
# stage copies from a build made by build.sh, inside a trixie system:
#   OUT/root/              `cmake --install` with DESTDIR: /opt/tandem (bin/tandem,
#                          share/tandem: prices, the dataset worker's Python files) and the
#                          Python module in python3's site directory (import tandem)
#   OUT/packages.txt       the Debian packages the final stage installs: those the binary
#                          and the module load (runtime-packages.sh) and python-packages.txt
# examples/sagemaker/Dockerfile runs it; scripts/test-cuda runs it on its own build and
# imports the staged module with trixie's Python, so CI proves what the image ships.
set -euo pipefail
src=${1:?usage: stage-image.sh SRC BUILD OUT}
build=${2:?usage: stage-image.sh SRC BUILD OUT}
out=${3:?usage: stage-image.sh SRC BUILD OUT}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/packages.sh"

module=$(ls "$build"/python/tandem/libtandem_feed.so 2>/dev/null | head -1)
[ -n "$module" ] || { echo "stage-image.sh: $build has no Python module (libtandem_feed.so: configured with -DTANDEM_PYTHON=OFF?)" >&2; exit 1; }
rm -rf "$out/root"
mkdir -p "$out/root"
DESTDIR="$out/root" cmake --install "$build" --prefix /opt/tandem >/dev/null
{ "$here/runtime-packages.sh" "$build/tandem" "$module"; trixie_packages "$src/scripts/trixie/python-packages.txt"; } \
  | sort -u > "$out/packages.txt"
