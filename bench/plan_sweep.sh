#!/usr/bin/env bash
# bench/plan_sweep.sh: is `tandem plan` right? Measures a sweep of simulated jobs with
# 1..MAX_WORKERS data workers, plans from one short run, and compares the plan's
# recommended worker count with the measured cheapest one (target: the same N, or within
# 10% of its cost per sample).
#
# One machine cannot hold MAX_WORKERS real worker hosts, so each simulated worker runs one
# thread slowed down SLOWDOWN times (--emulate-slowdown: it sleeps (SLOWDOWN-1) x the time
# each batch took, and reports the stretched time as its compute time, as a core that much
# slower would). Prices: bench/plan_sweep_prices.json (a trainer at 10 x a worker).
#
#   bench/plan_sweep.sh [--out FILE]       TANDEM, SLOWDOWN (20), STEPS (300), MAX_WORKERS (6)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
slowdown=${SLOWDOWN:-20}
steps=${STEPS:-300}
max=${MAX_WORKERS:-6}
result=$root/bench/results/plan_sweep.json
if [ "${1:-}" = "--out" ]; then result=$2; fi
work=$(mktemp -d /tmp/tandem-plan-sweep-XXXXXX)
prices=$root/bench/plan_sweep_prices.json
common=(--model resnet18 --image-size 32 --batch-size 16 --train-threads 1 --local-workers 0 --log-every 50
        --data blur-benchmark --threads 1 --emulate-slowdown "$slowdown" --steps "$steps")

for n in $(seq 1 "$max"); do
  echo "plan_sweep: $n worker(s)" >&2
  timeout 900 "$tandem" simulate --worker-hosts "$n" --run-dir "$work/n$n" "${common[@]}" > "$work/n$n.log" 2>&1 ||
    { echo "plan_sweep: the run with $n worker(s) failed; see $work/n$n.log" >&2; exit 1; }
done
for from in 1 3; do
  "$tandem" plan "$work/n$from" --prices "$prices" --trainer-type sim.trainer --worker-type sim.worker \
    --max-workers "$max" --json > "$work/plan-from-$from.json"
done

python3 - "$work" "$max" "$result" "$slowdown" "$steps" <<'PY'
import json, os, sys
work, top, out, slowdown, steps = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
trainer_usd, worker_usd = 10.0, 1.0
measured = []
for n in range(1, top + 1):
    s = json.load(open(f"{work}/n{n}/algo-{n + 1}/output/data/summary.json")) if os.path.exists(
        f"{work}/n{n}/algo-{n + 1}/output/data/summary.json") else None
    if s is None:  # the trainer host is the first of the trainer group: find it
        for d in sorted(os.listdir(f"{work}/n{n}")):
            p = f"{work}/n{n}/{d}/output/data/summary.json"
            if os.path.exists(p):
                s = json.load(open(p))
    rate = s["throughput"]["global_samples_per_sec"]
    usd_per_million = (trainer_usd + n * worker_usd) / 3600 / rate * 1e6
    measured.append({"workers": n, "samples_per_sec": rate, "usd_per_million_samples": usd_per_million,
                     "data_wait_pct": 100 * s["data_wait_fraction"],
                     "ceiling_samples_per_sec": s["throughput"]["ceiling_samples_per_sec"]})
best = min(measured, key=lambda m: m["usd_per_million_samples"])
plans = {}
for src in (1, 3):
    p = json.load(open(f"{work}/plan-from-{src}.json"))
    rec = p["recommended"]["workers"]
    rec_measured = next((m for m in measured if m["workers"] == rec), None)
    rows = {r["workers"]: r for r in p["rows"]}
    plans[src] = {"recommended_workers": rec,
                  "measured_cost_of_recommended": rec_measured["usd_per_million_samples"] if rec_measured else None,
                  "within_pct_of_best": (100 * (rec_measured["usd_per_million_samples"] / best["usd_per_million_samples"] - 1)
                                         if rec_measured else None),
                  "predicted": {n: rows[n]["samples_per_sec"] for n in rows}}
result = {"slowdown": int(slowdown), "steps": int(steps), "prices": {"trainer": trainer_usd, "worker": worker_usd},
          "measured": measured, "best_measured_workers": best["workers"], "plans": plans}
os.makedirs(os.path.dirname(out), exist_ok=True)
json.dump(result, open(out, "w"), indent=2)
print(f"{'workers':>7} {'measured/s':>11} {'$/M samples':>12} {'plan(1)/s':>10} {'plan(3)/s':>10}")
for m in measured:
    n = m["workers"]
    print(f"{n:>7} {m['samples_per_sec']:>11.1f} {m['usd_per_million_samples']:>12.3f} "
          f"{plans[1]['predicted'].get(n, float('nan')) or 0:>10.1f} {plans[3]['predicted'].get(n, float('nan')) or 0:>10.1f}")
print(f"best measured: {best['workers']} workers")
for src, p in plans.items():
    print(f"plan from the {src}-worker run recommends {p['recommended_workers']}: "
          f"{p['within_pct_of_best']:.1f}% above the best measured cost" if p["within_pct_of_best"] is not None
          else f"plan from the {src}-worker run recommends {p['recommended_workers']} (not measured)")
print(f"raw: {out}")
PY
