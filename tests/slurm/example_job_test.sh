#!/bin/bash
# examples/slurm/tandem-het.sbatch itself, submitted to a real Slurm on this machine
# (tests/slurm/lib.sh: slurmctld, munged, a slurmd per emulated node). Only what a user
# would change is changed: the node counts and GRES on sbatch's command line (one group
# of options per component, `--nodes=2 : --nodes=1 --gres=gpu:1`), the training flags
# as the script's arguments (tiny, on the CPU: --allow-cpu-training), and the environment
# (tandem on PATH, HOME, TANDEM_HOST_MAP: every node is 127.0.0.1 here, so each data
# worker gets its own port). The output root is the example's own default,
# $HOME/tandem-runs/<job name>.
#
#   tests/slurm/example_job_test.sh build/tandem requeue
#     `scontrol requeue` mid-run: the trainer checkpoints, the job runs again and resumes
#     from that checkpoint (not step 0); then `scancel --signal=TERM` (the job's steps
#     only, as the example's --signal=TERM@120 before a time limit): the trainer
#     checkpoints and exits 75, the script requeues the job itself, and the third run
#     resumes and completes. The output file keeps every run's lines (--open-mode=append),
#     each tandem line labelled with its task (srun --label), and the job ends COMPLETED.
#   tests/slurm/example_job_test.sh build/tandem worker-loss
#     SIGKILL of one of two data workers mid-run: training finishes on the other, the job
#     is COMPLETED with exit code 0; then SIGKILL of the only data worker of a second
#     job: the trainer carries on with its own preprocessing thread and completes too.
#   tests/slurm/example_job_test.sh build/tandem resubmit
#     SIGKILL of the only data worker of a trainer without threads of its own: it fails
#     after --batch-timeout with a checkpoint, exit code 5 (a peer failed): the job is
#     FAILED and not requeued; a new job under the same name resumes from the checkpoint.
#
# Each mode is its own Slurm: about a minute alone on two cores, 1.5 min beside the others.
#
# Exits 77 (skipped) where Slurm is not installed or this is not root (slurmd must be).
set -euo pipefail
tandem=$(realpath "${1:?usage: $0 path/to/tandem requeue|worker-loss|resubmit}")
mode=${2:?usage: $0 path/to/tandem requeue|worker-loss|resubmit}
example=$(realpath "$(dirname "$0")/../../examples/slurm/tandem-het.sbatch")
# shellcheck source=tests/slurm/lib.sh
source "$(dirname "$0")/lib.sh"
slurm_require
# A requeued job waits for its credentials to expire before it runs again (Slurm's
# cred_expire, 120 s by default): 10 s here.
cred_expire=10 slurm_start 2
t0=$(date +%s)

# What a user's environment gives the job: tandem on PATH, a home for the output root.
mkdir -p "$dir/bin" "$dir/home"
ln -s "$tandem" "$dir/bin/tandem"
export PATH=$dir/bin:$PATH HOME=$dir/home
TANDEM_HOST_MAP=tandem-cpu0=127.0.0.1:$(free_port),tandem-cpu1=127.0.0.1:$(free_port),tandem-gpu0=127.0.0.1
export TANDEM_HOST_MAP

# Submits the example as job $1 with CPU nodes $2, training flags after.
submit() {
  local name=$1 nodes=$2
  shift 2
  sbatch --parsable --job-name="$name" --output="$dir/$name.out" --nodes="$nodes" : --nodes=1 --gres=gpu:1 \
    "$example" --allow-cpu-training --batch-size 16 --log-every 10 --idle-timeout 60 "$@" ||
    slurm_fail "sbatch refused the example"
}
# Summary of job name $1: training reached step $2, and this run resumed at a step > 0
# when $3 is "resumed" (`steps` counts this run's steps, from `start_step`).
check_summary() {
  python3 - "$HOME/tandem-runs/$1/output/data/summary.json" "$2" "$3" <<'PY' || slurm_fail "summary of job $1"
import json, sys
s = json.load(open(sys.argv[1]))
got = {k: s.get(k) for k in ("start_step", "steps", "interrupted")}
assert s["start_step"] + s["steps"] == int(sys.argv[2]) and not s["interrupted"], got
assert (s["start_step"] > 0) == (sys.argv[3] == "resumed"), got
print(f"  summary: steps {s['start_step']} to {s['start_step'] + s['steps']} in this run, "
      f"batches per source {[w['batches'] for w in s['workers']]}")
PY
}
# Every line tandem wrote in output $1 carries srun's task label ("0: 2026-...").
check_labels() {
  local bare
  bare=$(grep -E '[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]+ (info|warning|error)' "$dir/$1.out" | grep -cvE '^[0-9]+: ' || true)
  [[ $bare == 0 ]] || slurm_fail "$bare of tandem's lines in $1.out have no srun --label prefix"
}

requeue_test() {
  local job name=requeue out steps=600 n1 n2
  job=$(submit "$name" 2 --steps $steps --emulate-step-ms 40)
  out=$dir/$name.out
  echo "job $job: the example, $steps steps, requeued twice"
  wait_output "$job" "$name" '^[0-9]+: .* step=60 ' 90
  scontrol requeue "$job" || slurm_fail "scontrol requeue $job"
  echo "  $(( $(date +%s) - t0 )) s: scontrol requeue $job"
  run_again "$job" 1
  wait_output "$job" "$name" 'resumed from .* at step [0-9]+' 60
  n1=$(grep -oE 'resumed from .* at step [0-9]+' "$out" | head -1 | grep -oE '[0-9]+$')
  grep -qE "checkpoint at step $n1 in " "$out" || slurm_fail "run 1 did not log its checkpoint of step $n1"
  (( n1 >= 60 )) || slurm_fail "run 2 resumed at step $n1, before the step-60 line run 1 printed"
  echo "  $(( $(date +%s) - t0 )) s: run 2 resumed at step $n1"
  # As 120 s before a time limit (--signal=TERM@120): the steps get SIGTERM, this script
  # does not; the trainer checkpoints and exits 75, and the script requeues the job.
  wait_output "$job" "$name" "^[0-9]+: .* step=$(( (n1 / 10 + 6) * 10 )) " 90
  scancel --signal=TERM "$job" || slurm_fail "scancel --signal=TERM $job"
  echo "  $(( $(date +%s) - t0 )) s: scancel --signal=TERM $job"
  wait_output "$job" "$name" 'exit 75\): requeueing job' 60
  run_again "$job" 2
  check_completed "$job" 120
  n2=$(grep -oE 'resumed from .* at step [0-9]+' "$out" | sed -n 2p | grep -oE '[0-9]+$')
  [[ -n $n2 ]] && (( n2 > n1 )) || slurm_fail "run 3 did not resume after step $n1 (${n2:-no resume line})"
  echo "  run 3 resumed at step $n2"
  [[ $(grep -c 'Restarts=2' <<<"$(scontrol show job "$job")") == 2 ]] || slurm_fail "job $job did not run 3 times"
  check_summary "$name" $steps resumed
  # Appended, not truncated: every run's first line and run 1's training are still there.
  for run in 1 2 3; do
    grep -q "^job $job ($name), run $run, output in $HOME/tandem-runs/$name" "$out" || slurm_fail "run $run's lines are gone from $out"
  done
  grep -qE '^[0-9]+: .* step=60 ' "$out" || slurm_fail "run 1's training lines are gone from $out"
  grep -qE 'srun: error: tandem-gpu0: task [0-9]+: Exited with exit code 75' "$out" ||
    slurm_fail "the trainer did not exit 75 when stopped by SIGTERM after its checkpoint"
  check_labels "$name"
  echo "OK: the example job $job was requeued twice, resumed at steps $n1 and $n2, and completed $steps steps in $(( $(date +%s) - t0 )) s"
}

# The tandem process of job name $1 on node $2 of this test (its environment says so).
task_pid() {
  local p env
  for p in $(pgrep -x tandem); do
    env=$(tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null) || continue
    grep -qx "HOME=$HOME" <<<"$env" && grep -qx "SLURMD_NODENAME=$2" <<<"$env" &&
      grep -qx "SLURM_JOB_NAME=$1" <<<"$env" && { echo "$p"; return; }
  done
}
# Job $1 (name $2) passes step 50: SIGKILL of its data worker on node $3.
kill_worker_at_step_50() {
  local pid
  wait_output "$1" "$2" '^[0-9]+: .* step=50 ' 90
  pid=$(task_pid "$2" "$3")
  [[ -n $pid ]] || slurm_fail "no tandem process of job $1 on $3"
  kill -KILL "$pid"
  echo "  $(( $(date +%s) - t0 )) s: kill -KILL $pid (the data worker on $3)"
}

# Job $1 with $2 CPU nodes, the trainer's own preprocessing threads $3: the data worker
# on the last CPU node is killed at step 50, and the job completes anyway.
worker_loss_test() {
  local name=$1 nodes=$2 steps=300 job victim=tandem-cpu$(( $2 - 1 ))
  job=$(submit "$name" "$nodes" --steps $steps --emulate-step-ms 40 --local-workers "$3")
  echo "job $job: the example with $nodes data workers and $3 preprocessing threads of the trainer's, $steps steps"
  kill_worker_at_step_50 "$job" "$name" "$victim"
  check_completed "$job" 120
  check_summary "$name" $steps fresh
  grep -q "data worker on $victim exited with code 137; the trainers carry on without it" "$dir/$name.out" ||
    slurm_fail "the example did not report the lost data worker"
  grep -q "its requests go to the other sources" "$dir/$name.out" || slurm_fail "the trainer did not notice the lost worker"
  grep -qE "$victim: task [0-9]+: (Killed|Exited)" "$dir/$name.out" && slurm_fail "srun saw the lost worker's task fail"
  check_labels "$name"
  echo "OK: job $job lost its data worker on $victim at step 50 and completed $steps steps, exit code 0 ($(( $(date +%s) - t0 )) s)"
}

# The only data worker is killed and the trainer has no threads of its own: it fails
# after --batch-timeout with a checkpoint (exit 5, a peer failed); the job is FAILED and
# not requeued. Submitted again under the same name, it resumes from that checkpoint.
resubmit_test() {
  local name=resubmit steps=200 job job2 n flags=(--steps 200 --emulate-step-ms 40 --local-workers 0 --batch-timeout 5)
  job=$(submit "$name" 1 "${flags[@]}")
  echo "job $job: the example with 1 data worker, none of the trainer's own, $steps steps"
  kill_worker_at_step_50 "$job" "$name" tandem-cpu0
  slurm_wait_end "$job" 90 || slurm_fail "job $job did not end"
  echo "  $(scontrol show job "$job" | grep -oE 'JobState=[A-Z_]+|Restarts=[0-9]+|ExitCode=[0-9:]+' | sort -u | paste -sd' ')"
  [[ $(job_states "$job") == FAILED ]] || slurm_fail "job $job is $(job_states "$job"), not FAILED"
  scontrol show job "$job" | grep -q 'ExitCode=5:0' || slurm_fail "job $job did not exit 5 (a peer failed)"
  scontrol show job "$job" | grep -q 'Restarts=0' || slurm_fail "job $job was requeued"
  n=$(grep -oE 'checkpoint at step [0-9]+' "$dir/$name.out" | tail -1 | grep -oE '[0-9]+$')
  [[ -n $n ]] || slurm_fail "the failing trainer wrote no checkpoint"
  mv "$dir/$name.out" "$dir/$name-1.out"
  job2=$(submit "$name" 1 "${flags[@]}")
  echo "  $(( $(date +%s) - t0 )) s: job $job failed after its checkpoint of step $n; job $job2 has the same name"
  check_completed "$job2" 90
  grep -qE "resumed from $HOME/tandem-runs/$name/checkpoints/.* at step $n\$" "$dir/$name.out" ||
    slurm_fail "job $job2 did not resume from job $job's checkpoint of step $n"
  check_summary "$name" $steps resumed
  echo "OK: job $job failed with exit code 5 after losing its only data worker; job $job2 resumed at step $n and completed ($(( $(date +%s) - t0 )) s)"
}

case $mode in
  requeue) requeue_test ;;
  worker-loss) worker_loss_test two-workers 2 0; worker_loss_test one-worker 1 1 ;;
  resubmit) resubmit_test ;;
  *) echo "unknown mode $mode: requeue, worker-loss or resubmit"; exit 2 ;;
esac
