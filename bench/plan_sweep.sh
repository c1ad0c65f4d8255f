#!/usr/bin/env bash
# bench/plan_sweep.sh: is `tandem plan` right? Measures a sweep of simulated jobs with
# 1..MAX_WORKERS data workers, plans from short runs of the sweep (the 1- and 3-worker
# ones), and compares, at each N, the plan's predicted samples/s with the measured rate
# (steady state: the log windows after the first; target: within 10%), and the recommended worker count with the measured cheapest one
# (target: the same N, or within 10% of its cost per sample).
#
# One machine cannot hold MAX_WORKERS real worker hosts, so each simulated worker runs one
# thread slowed down SLOWDOWN times (--emulate-slowdown: it sleeps (SLOWDOWN-1) x the CPU
# time each chunk of a batch took, its Python processes' included, and reports the
# stretched time as its compute time, as a core that much slower would), and each training
# step (tandem's, or the script's between two batches of tandem.Feed) takes at least
# STEP_MS (--emulate-step-ms; 0 = off): the step of an accelerator that slow, which leaves
# the host's CPU free. The loop's real CPU work, which on 2 shared cores runs slower after
# each wait for data (by up to 27% here), then does not set its speed. Prices:
# bench/plan_sweep_prices.json (a trainer at 10 x a worker).
#
#   bench/plan_sweep.sh [--out FILE] [--data SPEC] [--data-args JSON] [--script]
#       TANDEM, SLOWDOWN (20), STEP_MS (0), STEPS (300), MAX_WORKERS (4), LOG_EVERY (50),
#       SCRIPT_MODEL, PIN
#   --data SPEC      what the workers serve (default blur-benchmark, tandem's C++ pipeline);
#                    python:FILE:NAME runs a Python dataset in one process per worker
#   --script         train with examples/python/train_ddp.py (torchvision's resnet18, or
#                    SCRIPT_MODEL), fed by tandem.Feed, instead of tandem's own trainer
#                    (resnet18)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
slowdown=${SLOWDOWN:-20}
step_ms=${STEP_MS:-0}
steps=${STEPS:-300}
max=${MAX_WORKERS:-4}
result=$root/bench/results/plan-sweep/plan_sweep.json
data=(--data blur-benchmark)
script=()
kind="tandem trainer (resnet18)"
while [ $# -gt 0 ]; do
  case $1 in
    --out) result=$2; shift 2 ;;
    --data) data=(--data "$2"); shift 2 ;;
    --data-args) data+=(--data-args "$2"); shift 2 ;;
    --script) script=(-- /usr/bin/python3 "$root/examples/python/train_ddp.py" --model "${SCRIPT_MODEL:-resnet18}")
              kind="train_ddp.py --model ${SCRIPT_MODEL:-resnet18} through tandem.Feed"; shift ;;
    *) echo "plan_sweep: unknown argument $1 (see the comment at the top)" >&2; exit 2 ;;
  esac
done
case ${data[1]} in python:*) data+=(--python-procs 1) ;; esac
work=$(mktemp -d /tmp/tandem-plan-sweep-XXXXXX)
prices=$root/bench/plan_sweep_prices.json
common=(--model resnet18 --image-size 32 --batch-size 16 --train-threads 1 --local-workers 0 --log-every "${LOG_EVERY:-50}"
        "${data[@]}" --threads 1 --emulate-slowdown "$slowdown" --emulate-step-ms "$step_ms" --steps "$steps")

# The script trains on one thread, as tandem's trainer does here (--train-threads 1).
if [ ${#script[@]} -gt 0 ]; then export OMP_NUM_THREADS=1; fi
# PIN=1: threads pinned. Every simulated host on the last core, then the trainer host (where
# tandem's trainer runs, or the script) moved to core 0 as soon as it starts, with every
# thread it has, so that the workers never take the trainer's core. On a 2-core machine that
# leaves the trainer one core for training and for receiving every worker's stream, which
# a GPU host does not lack (docs/plan.md shows both). Default: not pinned.
last=$(( $(nproc) - 1 ))
trainer_host() {  # trainer_host RUN_DIR: the simulated trainer host's name, once simulate wrote the config
  python3 -c 'import json, sys
groups = json.load(open(sys.argv[1]))["instance_groups"]
print(next(g["hosts"][0] for g in groups if g["instance_group_name"].startswith("train")))' \
    "$1/algo-1/input/config/resourceconfig.json" 2> /dev/null
}
pin_trainer() {  # pin_trainer PID RUN_DIR: until PID ends, pins the trainer host's processes to core 0
  local seen=" " host=""
  while kill -0 "$1" 2> /dev/null; do
    [ -n "$host" ] || host=$(trainer_host "$2") || true
    [ -n "$host" ] || { sleep 0.05; continue; }
    for pid in $(pgrep -f -- "tandem launch --sagemaker-root $2/$host\$|examples/python/train_ddp.py" || true); do
      case $seen in *" $pid "*) continue ;; esac
      taskset -a -p -c 0 "$pid" > /dev/null 2>&1 && seen="$seen$pid "
    done
    sleep 0.05
  done
}
for n in $(seq 1 "$max"); do
  echo "plan_sweep: $n worker(s)" >&2
  pin=()
  [ "${PIN:-0}" = 1 ] && pin=(taskset -c "$last")
  PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}" timeout 900 "${pin[@]}" \
    "$tandem" simulate --worker-hosts "$n" --run-dir "$work/n$n" "${common[@]}" "${script[@]}" > "$work/n$n.log" 2>&1 &
  sim=$!
  pinner=
  if [ "${PIN:-0}" = 1 ]; then pin_trainer "$sim" "$work/n$n" & pinner=$!; fi
  wait "$sim" || { echo "plan_sweep: the run with $n worker(s) failed; see $work/n$n.log" >&2; exit 1; }
  [ -z "$pinner" ] || wait "$pinner" || true
done
froms=(1)
[ "$max" -ge 3 ] && froms+=(3)
for from in "${froms[@]}"; do
  "$tandem" plan "$work/n$from" --prices "$prices" --trainer-type sim.trainer --worker-type sim.worker \
    --max-workers "$max" --json > "$work/plan-from-$from.json"
done

froms_csv=$(IFS=,; echo "${froms[*]}")
python3 - "$work" "$max" "$result" "$slowdown" "$steps" "$froms_csv" "${data[1]}" "$kind" "$step_ms" <<'PY'
import json, os, sys
work, top, out, slowdown, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
froms, data, kind, step_ms = [int(f) for f in sys.argv[6].split(",")], sys.argv[7], sys.argv[8], float(sys.argv[9])
trainer_usd, worker_usd = 10.0, 1.0


def records_of(n):
    """The trainer host's summary.json and metrics.jsonl (the one host that has them)."""
    for d in sorted(os.listdir(f"{work}/n{n}")):
        p = f"{work}/n{n}/{d}/output/data"
        if os.path.exists(f"{p}/summary.json"):
            with open(f"{p}/metrics.jsonl") as f:
                return json.load(open(f"{p}/summary.json")), [json.loads(line) for line in f]
    raise SystemExit(f"plan_sweep: no summary.json under {work}/n{n}")


def steady_rate(windows):
    """samples/s over the log windows after the first (the queues filling, the first steps)."""
    later = windows[1:] or windows
    return sum(w["samples_per_sec"] * w["window_s"] for w in later) / sum(w["window_s"] for w in later)


measured = []
for n in range(1, top + 1):
    s, windows = records_of(n)
    rate = steady_rate(windows)
    measured.append({"workers": n, "samples_per_sec": rate, "whole_run_samples_per_sec": s["throughput"]["global_samples_per_sec"],
                     "usd_per_million_samples": (trainer_usd + n * worker_usd) / 3600 / rate * 1e6,
                     "data_wait_pct": 100 * s["data_wait_fraction"],
                     "ceiling_samples_per_sec": s["throughput"]["ceiling_samples_per_sec"]})
best = min(measured, key=lambda m: m["usd_per_million_samples"])
plans = {}
for src in froms:
    p = json.load(open(f"{work}/plan-from-{src}.json"))
    rec = p["recommended"]["workers"]
    rec_measured = next((m for m in measured if m["workers"] == rec), None)
    rows = {r["workers"]: r for r in p["rows"]}
    errors = {m["workers"]: 100 * (rows[m["workers"]]["samples_per_sec"] / m["samples_per_sec"] - 1)
              for m in measured if rows.get(m["workers"], {}).get("samples_per_sec")}
    plans[src] = {"recommended_workers": rec,
                  "measured_cost_of_recommended": rec_measured["usd_per_million_samples"] if rec_measured else None,
                  "within_pct_of_best": (100 * (rec_measured["usd_per_million_samples"] / best["usd_per_million_samples"] - 1)
                                         if rec_measured else None),
                  "predicted": {n: rows[n]["samples_per_sec"] for n in rows},
                  "error_pct": errors, "largest_error_pct": max((abs(e) for e in errors.values()), default=None),
                  "per_thread_rate": p["measurement"]["images_per_cpu_second"]}
result = {"data": data, "trainer": kind, "slowdown": int(slowdown), "step_ms": step_ms, "steps": int(steps),
          "prices": {"trainer": trainer_usd, "worker": worker_usd},
          "measured": measured, "best_measured_workers": best["workers"], "plans": plans}
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(result, open(out, "w"), indent=2)
print(f"{data}, {kind}, slowdown {slowdown}, step {step_ms:g} ms at least, {steps} steps")
print(f"{'workers':>7} {'measured/s':>11} {'$/M samples':>12}" + "".join(f" {'plan(' + str(f) + ')/s':>10} {'error':>7}" for f in froms))
for m in measured:
    n = m["workers"]
    line = f"{n:>7} {m['samples_per_sec']:>11.1f} {m['usd_per_million_samples']:>12.3f}"
    for f in froms:
        pred, err = plans[f]["predicted"].get(n), plans[f]["error_pct"].get(n)
        line += f" {pred or 0:>10.1f} {err if err is not None else float('nan'):>+6.1f}%"
    print(line)
print(f"best measured: {best['workers']} workers")
for src, p in plans.items():
    print(f"plan from the {src}-worker run: largest error {p['largest_error_pct']:.1f}%; recommends {p['recommended_workers']}"
          + (f", {p['within_pct_of_best']:.1f}% above the best measured cost" if p["within_pct_of_best"] is not None
             else " (not measured)"))
print(f"raw: {out}")
PY
