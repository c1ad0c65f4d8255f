#!/bin/bash
# Run tandem's benchmarks and their peers side by side, print the ratios, write raw JSON.
#
#   bench/compare.sh [--out FILE] [--seconds S]
#
#   TANDEM=build/tandem   tandem binary (relative paths: from the current directory, else the repo root)
#   BENCH_SECONDS=15      measured seconds of each run (--seconds overrides)
#   BENCH_CORES=N         DataLoader workers of the Python feeder (default: tandem's threads, else nproc)
#
# Runs one after the other:
#   tandem bench pipeline   vs bench/python_feeder.py (gRPC + DataLoader) and bench/torchvision_pipeline.py
#   tandem bench transport  vs bench/iperf3_loopback.sh
#   tandem bench feed       (total vs the sum of each worker alone)
# A step that is missing or fails is reported as "not available"; the script goes on.
# Writes everything to FILE (default bench/results/latest.json).
set -uo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
CALLER_PWD=$PWD
PY=/usr/bin/python3

OUT=""
S=${BENCH_SECONDS:-15}
while [[ $# -gt 0 ]]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --out=*) OUT=${1#*=}; shift ;;
    --seconds) S=$2; shift 2 ;;
    --seconds=*) S=${1#*=}; shift ;;
    -h|--help) sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "compare.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if ! [[ "$S" =~ ^[0-9]+([.][0-9]+)?$ ]]; then
  echo "compare.sh: --seconds / BENCH_SECONDS must be a number, got '$S'" >&2; exit 2
fi
S_INT=$(printf '%.0f' "$S"); [[ "$S_INT" -ge 1 ]] || S_INT=1

if [[ -z "$OUT" ]]; then
  OUT="$ROOT/bench/results/latest.json"
elif [[ "$OUT" != /* ]]; then
  OUT="$CALLER_PWD/$OUT"
fi

TANDEM=${TANDEM:-build/tandem}
if [[ "$TANDEM" != /* ]]; then
  if [[ -e "$CALLER_PWD/$TANDEM" ]]; then TANDEM="$CALLER_PWD/$TANDEM"; else TANDEM="$ROOT/$TANDEM"; fi
fi

cd "$ROOT" || exit 1

if ! "$HERE/setup-peers"; then
  echo "compare.sh: bench/setup-peers failed; peers that need missing packages will show as not available" >&2
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT TERM
NPROC=$(nproc)

# run_step NAME TIMEOUT_SECONDS COMMAND...: stdout -> $TMP/NAME.out, stderr -> NAME.err, status -> NAME.rc
run_step() {
  local name=$1 limit=$2; shift 2
  printf '%s\n' "$@" >"$TMP/$name.cmd"
  printf '%-20s %s ... ' "$name" "$*" >&2
  local t0=$SECONDS
  timeout --kill-after=10 "$limit" "$@" >"$TMP/$name.out" 2>"$TMP/$name.err" </dev/null
  local rc=$?
  echo "$rc" >"$TMP/$name.rc"
  if [[ $rc -eq 0 ]]; then echo "done ($((SECONDS - t0)) s)" >&2
  elif [[ $rc -eq 124 || $rc -eq 137 ]]; then echo "timed out after ${limit} s" >&2
  else echo "failed (exit $rc)" >&2; fi
  return 0
}

# json_field FILE KEY: KEY of the last JSON object line in FILE, or nothing
json_field() {
  "$PY" - "$1" "$2" "$HERE" <<'EOF' 2>/dev/null
import sys
sys.path.insert(0, sys.argv[3])
from _peers import last_json_object
obj = last_json_object(open(sys.argv[1], errors="replace").read())
v = obj.get(sys.argv[2]) if isinstance(obj, dict) else None
if isinstance(v, (int, float)) and not isinstance(v, bool):
    print(int(v) if float(v).is_integer() else v)
EOF
}

echo "compare.sh: $S s per run, tandem = $TANDEM" >&2

# --- pipeline: tandem vs Python gRPC feeder vs torchvision on one core
run_step tandem_pipeline $((S_INT * 3 + 120)) "$TANDEM" bench pipeline --json --seconds "$S"
BATCH=$(json_field "$TMP/tandem_pipeline.out" batch_size)
IMAGE=$(json_field "$TMP/tandem_pipeline.out" image_size)
THREADS=$(json_field "$TMP/tandem_pipeline.out" threads)
CORES=${BENCH_CORES:-${THREADS:-$NPROC}}
run_step python_feeder $((S_INT * 2 + 180)) "$PY" "$HERE/python_feeder.py" --json --seconds "$S" \
  --cores "$CORES" --batch-size "${BATCH:-32}" --image-size "${IMAGE:-224}"
run_step torchvision $((S_INT * 2 + 120)) "$PY" "$HERE/torchvision_pipeline.py" --json --seconds "$S" \
  --image-size "${IMAGE:-224}"

# --- transport: tandem vs iperf3 over loopback
run_step tandem_transport $((S_INT * 3 + 120)) "$TANDEM" bench transport --json --seconds "$S"
run_step iperf3 $((S_INT * 2 + 90)) "$HERE/iperf3_loopback.sh" --seconds "$S"

# --- feed: all workers together vs each alone
run_step tandem_feed $((S_INT * (NPROC + 4) + 180)) "$TANDEM" bench feed --json --seconds "$S"

CPU_MODEL=$(grep -m1 -E '^(model name|Model|Hardware|cpu model)' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ *//')
DATE=$(date -u +%Y-%m-%dT%H:%M:%SZ)

mkdir -p "$(dirname "$OUT")"
NPROC="$NPROC" CPU_MODEL="${CPU_MODEL:-unknown}" DATE="$DATE" BENCH_S="$S" TANDEM_BIN="$TANDEM" \
  "$PY" - "$TMP" "$OUT" "$HERE" <<'EOF'
import json, os, platform, sys

tmp, out_path = sys.argv[1], sys.argv[2]
sys.path.insert(0, sys.argv[3])
from _peers import last_json_object  # noqa: E402
STEPS = ["tandem_pipeline", "python_feeder", "torchvision", "tandem_transport", "iperf3", "tandem_feed"]
REQUIRED = {
    "tandem_pipeline": ["images_per_sec", "threads", "batch_size", "dtype"],
    "python_feeder": ["images_per_sec", "cores", "batch_size"],
    "torchvision": ["images_per_sec_per_core"],
    "tandem_transport": ["bytes_per_sec"],
    "iperf3": ["bytes_per_sec"],
    "tandem_feed": ["images_per_sec", "workers", "solo_sum_images_per_sec"],
}


def read(name, ext):
    try:
        with open(os.path.join(tmp, f"{name}.{ext}"), errors="replace") as f:
            return f.read()
    except OSError:
        return ""


raw, status = {}, {}
for name in STEPS:
    rc_text = read(name, "rc").strip()
    rc = int(rc_text) if rc_text.lstrip("-").isdigit() else None
    obj = last_json_object(read(name, "out"))
    err_lines = [l.strip() for l in read(name, "err").splitlines() if l.strip()]
    # the most telling stderr line: skip usage hints such as CLI11's "Run with --help ..."
    telling = [l for l in err_lines if not l.startswith("Run with --help")] or err_lines
    error = None
    if rc is None:
        error = "did not run"
    elif rc in (124, 137):
        error = "timed out"
    elif rc != 0:
        error = f"exit {rc}" + (f": {telling[-1][:160]}" if telling else "")
    elif obj is None:
        error = "no JSON object on stdout"
    else:
        missing = [k for k in REQUIRED[name] if k not in obj]
        if missing:
            error = "JSON lacks " + ", ".join(missing)
    raw[name] = obj
    status[name] = {
        "ok": error is None,
        "rc": rc,
        "error": error,
        "command": read(name, "cmd").splitlines(),
        "stderr_tail": err_lines[-5:],
    }


def num(name, key):
    if not status[name]["ok"]:
        return None
    v = raw[name].get(key)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def ratio(label, num_name, num_v, den_name, den_v, target):
    why = [f"{n}: {status[n]['error']}" for n in dict.fromkeys((num_name, den_name)) if not status[n]["ok"]]
    if not why and (num_v is None or den_v is None or den_v <= 0):
        why = ["values missing or zero"]
    r = {"what": label, "target": target, "numerator": num_v, "denominator": den_v}
    if why:
        r.update(value=None, passed=None, reason="; ".join(why))
    else:
        v = num_v / den_v
        r.update(value=v, passed=(v >= target) if target is not None else None)
    return r


notes = []
tp_threads = num("tandem_pipeline", "threads")
tandem_per_core = None
if num("tandem_pipeline", "images_per_sec") is not None and tp_threads:
    tandem_per_core = num("tandem_pipeline", "images_per_sec") / tp_threads
if status["tandem_pipeline"]["ok"]:
    if raw["tandem_pipeline"].get("dtype") != "float32":
        notes.append(f"tandem pipeline dtype is {raw['tandem_pipeline'].get('dtype')}, the peers make float32")
    if status["python_feeder"]["ok"] and raw["python_feeder"].get("batch_size") != raw["tandem_pipeline"].get("batch_size"):
        notes.append("batch sizes differ between tandem and the Python feeder")

ratios = {
    "pipeline_vs_python_feeder": ratio(
        "tandem pipeline images/s / Python gRPC feeder images/s", "tandem_pipeline",
        num("tandem_pipeline", "images_per_sec"), "python_feeder", num("python_feeder", "images_per_sec"), 10.0),
    "pipeline_per_core_vs_torchvision": ratio(
        "tandem pipeline images/s per thread / torchvision images/s per core", "tandem_pipeline",
        tandem_per_core, "torchvision", num("torchvision", "images_per_sec_per_core"), None),
    "transport_vs_iperf3": ratio(
        "tandem transport bytes/s / iperf3 loopback bytes/s", "tandem_transport",
        num("tandem_transport", "bytes_per_sec"), "iperf3", num("iperf3", "bytes_per_sec"), 0.5),
    "feed_total_vs_solo_sum": ratio(
        "tandem feed images/s (all workers) / sum of each worker alone", "tandem_feed",
        num("tandem_feed", "images_per_sec"), "tandem_feed", num("tandem_feed", "solo_sum_images_per_sec"), 0.9),
}

machine = {
    "nproc": int(os.environ["NPROC"]),
    "cpu_model": os.environ["CPU_MODEL"],
    "date": os.environ["DATE"],
    "kernel": platform.release(),
    "loadavg": open("/proc/loadavg").read().split()[:3] if os.path.exists("/proc/loadavg") else None,
}
result = {
    "machine": machine,
    "seconds": float(os.environ["BENCH_S"]),
    "tandem": os.environ["TANDEM_BIN"],
    "raw": raw,
    "status": status,
    "ratios": ratios,
    "notes": notes,
}
with open(out_path, "w") as f:
    json.dump(result, f, indent=2)
    f.write("\n")


def fmt(v, unit=""):
    if v is None:
        return "not available"
    if unit == "B/s":
        return f"{v / 1e9:.3f} GB/s"
    return f"{v:,.1f} {unit}".strip()


print()
print(f"machine: {machine['nproc']} cores, {machine['cpu_model']}, {machine['date']}, "
      f"{os.environ['BENCH_S']} s per run, load {' '.join(machine['loadavg'] or [])}")
rows = [
    ("pipeline img/s", fmt(num("tandem_pipeline", "images_per_sec"), "img/s"),
     "python gRPC feeder", fmt(num("python_feeder", "images_per_sec"), "img/s"), ratios["pipeline_vs_python_feeder"]),
    ("pipeline img/s/core", fmt(tandem_per_core, "img/s"),
     "torchvision 1 core", fmt(num("torchvision", "images_per_sec_per_core"), "img/s"), ratios["pipeline_per_core_vs_torchvision"]),
    ("transport", fmt(num("tandem_transport", "bytes_per_sec"), "B/s"),
     "iperf3 loopback", fmt(num("iperf3", "bytes_per_sec"), "B/s"), ratios["transport_vs_iperf3"]),
    ("feed total", fmt(num("tandem_feed", "images_per_sec"), "img/s"),
     "solo sum", fmt(num("tandem_feed", "solo_sum_images_per_sec"), "img/s"), ratios["feed_total_vs_solo_sum"]),
]
header = ("measure", "tandem", "peer", "peer value", "ratio", "target", "")
table = [header]
for m, tv, pn, pv, r in rows:
    if r["value"] is None:
        rv, verdict = "not available", ""
    else:
        rv = f"{r['value']:.2f}x" if r["value"] >= 1.5 else f"{r['value']:.3f}"
        verdict = "" if r["passed"] is None else ("ok" if r["passed"] else "BELOW TARGET")
    tgt = "-" if r["target"] is None else f">= {r['target']:g}"
    table.append((m, tv, pn, pv, rv, tgt, verdict))
widths = [max(len(str(row[i])) for row in table) for i in range(len(header))]
for row in table:
    print("  ".join(str(c).ljust(w) for c, w in zip(row, widths)).rstrip())
for name in STEPS:
    if not status[name]["ok"]:
        print(f"not available: {name}: {status[name]['error']}")
for n in notes:
    print(f"note: {n}")
print(f"wrote {out_path}")
EOF
exit 0
