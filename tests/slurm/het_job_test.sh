#!/bin/bash
# A real Slurm heterogeneous job runs tandem end to end on this one machine.
#
# Debian's slurm-wlm (slurmctld, slurmd, munged) is configured in a temporary directory
# with two emulated nodes on 127.0.0.1: tandem-cpu0 (partition cpu) and tandem-gpu0
# (partition gpu, fake GPUs: a GRES whose device files are copies of /dev/null). Slurm
# cannot place two components of a heterogeneous job on one node (its backfill scheduler
# reserves whole nodes), hence two slurmd, each with its own name and port.
#
# The job: `#SBATCH hetjob` with a CPU component and a GPU component, and one
# `srun --het-group=0,1 tandem launch`. tandem must find on its own, from Slurm's
# variables, that the CPU task serves data and the GPU task trains (on the CPU here:
# --allow-cpu-training), train, release the worker, and every step must exit 0. Two such
# jobs run at once on the same two nodes, neither given a port: each takes its ports from
# its job id, and both finish (fixed ports would collide: the second worker could not
# listen, and its trainer would dial the first job's worker).
#
#   tests/slurm/het_job_test.sh build/tandem
#
# Exits 77 (skipped) where Slurm is not installed or this is not root (slurmd must be).
# The Slurm set-up is tests/slurm/lib.sh's (shared with example_job_test.sh).
set -euo pipefail
tandem=$(realpath "${1:?usage: $0 path/to/tandem}")
# shellcheck source=tests/slurm/lib.sh
source "$(dirname "$0")/lib.sh"
slurm_require
slurm_start 1
start=$(date +%s)
fail() { slurm_fail "$@"; }

export TANDEM_TOKEN=slurm-test-$RANDOM$RANDOM
# One job: $1 names its output files. No --worker-port or --master-port: the job's own.
submit() {
  cat > "$dir/$1.sh" <<JOB
#!/bin/bash
#SBATCH --job-name=tandem-het-$1
#SBATCH --output=$dir/$1.out
#SBATCH --partition=cpu --nodes=1 --ntasks-per-node=1 --cpus-per-task=1
#SBATCH hetjob
#SBATCH --partition=gpu --nodes=1 --ntasks-per-node=1 --cpus-per-task=1 --gres=gpu:1
set -euo pipefail
# The node names are Slurm's; --host-map says where they listen (both on 127.0.0.1 here).
# Steps of at least 200 ms: a job of 6 s outlasts the scheduler's start of the other one.
srun --het-group=0,1 $tandem launch \\
  --host-map tandem-cpu0=127.0.0.1,tandem-gpu0=127.0.0.1 --allow-cpu-training \\
  --steps 30 --emulate-step-ms 200 --batch-size 16 --log-every 10 --summary-json $dir/$1-summary.json --sagemaker-root $dir/none
echo "srun exited \$?"
JOB
  sbatch --parsable "$dir/$1.sh" || fail "sbatch refused job $1"
}
# Waits for job $1 to end, then checks it as job $2 (its files' name).
check() {
  local job=$1 name=$2 deadline=$(( $(date +%s) + 240 )) states info out
  while :; do
    states=$(scontrol show job "$job" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | sort -u | tr '\n' ' ')
    [[ $states =~ ^(JobState=COMPLETED |JobState=FAILED |JobState=CANCELLED |JobState=TIMEOUT |JobState=COMPLETED JobState=FAILED )+$ ]] && break
    [[ $states =~ (FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY) ]] && break
    (( $(date +%s) < deadline )) || { scancel "$job"; fail "job $job did not end within 240 s ($states)"; }
    sleep 0.5
  done
  info=$(scontrol show job "$job")
  echo "$info" | grep -E 'JobId=|JobState=|ExitCode=' | sed 's/^ */  /'
  [[ $(grep -c 'JobState=COMPLETED' <<<"$info") == 2 ]] || fail "both components of job $job must complete: $states"
  [[ $(grep -o 'ExitCode=[0-9:]*' <<<"$info" | sort -u) == "ExitCode=0:0" ]] || fail "an exit code of job $job is not 0"
  out=$(cat "$dir/$name.out")
  grep -q "srun exited 0" <<<"$out" || fail "srun did not exit 0"
  grep -q "host tandem-cpu0 of group het-group-0 (cpu): role worker" <<<"$out" || fail "the CPU task did not serve"
  grep -q "host tandem-gpu0 of group het-group-1 (gpu): role trainer" <<<"$out" || fail "the GPU task did not train"
  grep -q "host with 1 GPUs" <<<"$out" || fail "the trainer did not see its GPU"
  grep -q "shutdown requested by the trainer" <<<"$out" || fail "the worker was not released"
  grep -q "Slurm job [0-9]*: data workers on port" <<<"$out" || fail "job $job's ports are not its own"
  python3 - "$dir/$name-summary.json" <<'PY' || fail "summary of job $job"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["steps"] == 30 and not s["interrupted"], s
assert len(s["workers"]) == 1 and s["workers"][0]["batches"] == 30, s["workers"]
print(f"summary: {s['steps']} steps, loss {s['first_loss']:.3f} -> {s['final_loss']:.3f}, "
      f"{s['workers'][0]['batches']} batches from the worker")
PY
}
job_a=$(submit a)
job_b=$(submit b)
echo "submitted heterogeneous jobs $job_a and $job_b, sharing both nodes"
check "$job_a" a
check "$job_b" b
# They ran at once: each started before the other ended.
window() { scontrol show job "$1" | grep -o '\(StartTime\|EndTime\)=[^ ]*' | head -2 | cut -d= -f2 | xargs -n1 date +%s -d; }
read -r a0 a1 <<<"$(window "$job_a" | tr '\n' ' ')"
read -r b0 b1 <<<"$(window "$job_b" | tr '\n' ' ')"
(( a0 < b1 && b0 < a1 )) || fail "the two jobs did not overlap ($a0-$a1, $b0-$b1): the test shows nothing"
echo "OK: two heterogeneous Slurm jobs ($job_a, $job_b) on the same nodes at once trained end to end in $(( $(date +%s) - start )) s, every step exit 0"
