#!/bin/bash
# iperf3 over loopback: the TCP ceiling of this machine, the peer of `tandem bench transport`.
#   bench/iperf3_loopback.sh [--seconds S] [--streams N]     (S defaults to $BENCH_SECONDS or 10)
# Prints one JSON line: {"peer":"iperf3","bytes_per_sec":...} where bytes_per_sec is the
# receiver's end.sum_received.bits_per_second / 8.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SECONDS_ARG=${BENCH_SECONDS:-10}
STREAMS=1
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seconds) SECONDS_ARG=$2; shift 2 ;;
    --seconds=*) SECONDS_ARG=${1#*=}; shift ;;
    --streams) STREAMS=$2; shift 2 ;;
    --streams=*) STREAMS=${1#*=}; shift ;;
    --json) shift ;;  # output is always JSON
    -h|--help) sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "iperf3_loopback: unknown argument $1" >&2; exit 2 ;;
  esac
done
# iperf3 -t takes whole seconds
T=$(printf '%.0f' "$SECONDS_ARG")
[[ "$T" -ge 1 ]] || T=1

command -v iperf3 >/dev/null 2>&1 || "$HERE/setup-peers"

PY=/usr/bin/python3
PORT=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')

TMP=$(mktemp -d)
SERVER_PID=""
cleanup() {
  if [[ -n "$SERVER_PID" ]] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$SERVER_PID" 2>/dev/null || true
  fi
  if [[ -n "$SERVER_PID" ]]; then wait "$SERVER_PID" 2>/dev/null || true; fi
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# -1: serve one test and exit; `timeout` bounds it even if no client ever comes.
timeout $((T + 30)) iperf3 -s -1 -B 127.0.0.1 -p "$PORT" >"$TMP/server.log" 2>&1 &
SERVER_PID=$!

# Wait (at most 5 s) until the server listens; probing by connecting would use up its
# single test, so read the LISTEN sockets from /proc/net/tcp instead.
PORT_HEX=$(printf '%04X' "$PORT")
listening=0
for _ in $(seq 50); do
  if awk -v p=":$PORT_HEX" '$2 ~ p"$" && $4 == "0A" {found=1} END {exit !found}' /proc/net/tcp 2>/dev/null; then
    listening=1; break
  fi
  kill -0 "$SERVER_PID" 2>/dev/null || break
  sleep 0.1
done
if [[ $listening -ne 1 ]]; then
  echo "iperf3_loopback: iperf3 server did not start on port $PORT:" >&2
  cat "$TMP/server.log" >&2
  exit 1
fi

if ! timeout $((T + 20)) iperf3 -c 127.0.0.1 -p "$PORT" -t "$T" -P "$STREAMS" -J >"$TMP/client.json" 2>"$TMP/client.err"; then
  echo "iperf3_loopback: iperf3 client failed:" >&2
  cat "$TMP/client.err" "$TMP/client.json" >&2
  exit 1
fi

"$PY" - "$TMP/client.json" "$T" "$STREAMS" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
if "error" in r:
    sys.exit("iperf3_loopback: " + r["error"])
recv = r["end"]["sum_received"]
sent = r["end"]["sum_sent"]
print(json.dumps({
    "peer": "iperf3",
    "bytes_per_sec": recv["bits_per_second"] / 8,
    "seconds": recv.get("seconds"),
    "streams": int(sys.argv[3]),
    "sent_bytes_per_sec": sent["bits_per_second"] / 8,
    "retransmits": sent.get("retransmits"),
    "iperf3": r.get("start", {}).get("version"),
}))
EOF
