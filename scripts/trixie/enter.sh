#!/usr/bin/env bash
# scripts/trixie/enter.sh ROOT CACHE COMMAND...: runs COMMAND inside the trixie root with
# /proc, /sys and /dev mounted, the repository at /tandem and a persistent ccache (under
# CACHE). The mounts live in a private mount namespace of this command: nothing is
# mounted on the host, two sessions on one root do not disturb each other, and a killed
# run leaves nothing behind. Used by scripts/test-cuda; handy for debugging:
#   scripts/trixie/enter.sh /var/cache/tandem/trixie-root /var/cache/tandem bash
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
troot=${1:?usage: enter.sh ROOT CACHE COMMAND...}
cache=${2:?usage: enter.sh ROOT CACHE COMMAND...}
shift 2
if [ -z "${TANDEM_IN_NAMESPACE:-}" ]; then
  sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
  "${sudo[@]}" mkdir -p "$cache/ccache-trixie"
  exec "${sudo[@]}" env TANDEM_IN_NAMESPACE=1 unshare --mount --propagation private "$0" "$troot" "$cache" "$@"
fi
bind() {  # bind SRC DST-inside-root
  mkdir -p "$troot$2"
  mount --bind "$1" "$troot$2"
}
bind /proc /proc
bind /sys /sys
bind /dev /dev
bind /dev/pts /dev/pts
bind "$repo" /tandem
bind "$cache/ccache-trixie" /root/.ccache
chmod 1777 "$troot/tmp"
exec chroot "$troot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
  TERM="${TERM:-dumb}" DEBIAN_FRONTEND=noninteractive CCACHE_DIR=/root/.ccache CCACHE_MAXSIZE=5G "$@"
