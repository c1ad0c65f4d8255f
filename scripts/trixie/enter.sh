#!/usr/bin/env bash
# scripts/trixie/enter.sh ROOT CACHE COMMAND...: runs COMMAND inside the trixie root with
# /proc, /sys and /dev mounted, the repository at /tandem and a persistent ccache (under
# CACHE), and unmounts them afterwards. Used by scripts/test-cuda; handy for debugging:
#   scripts/trixie/enter.sh /var/cache/tandem/trixie-root /var/cache/tandem bash
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
troot=${1:?usage: enter.sh ROOT CACHE COMMAND...}
cache=${2:?usage: enter.sh ROOT CACHE COMMAND...}
shift 2
sudo=(); [ "$(id -u)" -eq 0 ] || sudo=(sudo)
mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do "${sudo[@]}" umount -l "${mounted[i]}" 2>/dev/null || true; done
}
trap cleanup EXIT
bind() {  # bind SRC DST-inside-root
  "${sudo[@]}" mkdir -p "$troot$2"
  if mountpoint -q "$troot$2"; then "${sudo[@]}" umount -l "$troot$2"; fi
  "${sudo[@]}" mount --bind "$1" "$troot$2"
  mounted+=("$troot$2")
}
"${sudo[@]}" mkdir -p "$cache/ccache-trixie"
bind /proc /proc
bind /sys /sys
bind /dev /dev
bind /dev/pts /dev/pts
bind "$repo" /tandem
bind "$cache/ccache-trixie" /root/.ccache
"${sudo[@]}" chmod 1777 "$troot/tmp"
"${sudo[@]}" chroot "$troot" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
  TERM="${TERM:-dumb}" CCACHE_DIR=/root/.ccache CCACHE_MAXSIZE=5G "$@"
