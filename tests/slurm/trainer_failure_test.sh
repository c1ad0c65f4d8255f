#!/bin/bash
# examples/slurm/tandem-het.sbatch with two trainer hosts, submitted to a real Slurm on
# this machine (tests/slurm/lib.sh, one CPU node and two GPU nodes): the job ends as its
# trainer hosts do, each one counted, and not as srun's worst task.
#
#   tests/slurm/trainer_failure_test.sh build/tandem [kill|pause|stop]...   # all, or some
#
# (a) SIGKILL of the trainer rank on tandem-gpu0 mid-run (its host then exits 137; the
#     other host must not go on alone): the job ends FAILED with a code other than 0 and
#     75, not requeued (Restarts=0), the log names each trainer host with its code, and
#     it ends within --dist-timeout + 30 s of the kill.
# (c) SIGSTOP of the trainer rank on tandem-gpu0 mid-run (it hangs, holding its peers in a
#     collective): tandem-gpu1's rank gives up at --dist-timeout and the job ends as in
#     (a), FAILED and not requeued, within --dist-timeout + 30 s of the stop.
# (b) `scancel --signal=TERM` mid-run (the job's steps only, as --signal=TERM@120 before
#     a time limit): every host exits within 15 s, both trainer hosts exit 75, the script
#     requeues the job, and the second run resumes from the checkpoint and completes.
# Each prints how long every host took to exit, and when the job ended.
#
# As in example_job_test.sh only what a user would change is changed: node counts and
# GRES (`--nodes=1 : --nodes=2 --gres=gpu:1`, one rank per GPU node), the training flags
# (tiny, on the CPU), the environment (tandem on PATH, HOME, TANDEM_HOST_MAP: every node
# is 127.0.0.1 here). About 75 s on two cores.
#
# Exits 77 (skipped) where Slurm is not installed or this is not root (slurmd must be).
set -euo pipefail
tandem=$(realpath "${1:?usage: $0 path/to/tandem [kill|pause|stop]...}")
shift
parts=${*:-kill pause stop}
[[ $parts =~ ^(kill|pause|stop)( (kill|pause|stop))*$ ]] || { echo "usage: $0 path/to/tandem [kill|pause|stop]..."; exit 2; }
example=$(realpath "$(dirname "$0")/../../examples/slurm/tandem-het.sbatch")
# shellcheck source=tests/slurm/lib.sh
source "$(dirname "$0")/lib.sh"
slurm_require
gpu_nodes=2 cred_expire=10 slurm_start 1
t0=$(date +%s)
hosts=(tandem-gpu0 tandem-gpu1 tandem-cpu0)
dist_timeout=20

mkdir -p "$dir/bin" "$dir/home"
ln -s "$tandem" "$dir/bin/tandem"
export PATH=$dir/bin:$PATH HOME=$dir/home
# The trainer hosts need no port of their own: rank 0's host alone listens (rendezvous, reports).
TANDEM_HOST_MAP=tandem-cpu0=127.0.0.1:$(free_port),tandem-gpu0=127.0.0.1,tandem-gpu1=127.0.0.1
export TANDEM_HOST_MAP

# Submits the example as job name $1, training flags after.
submit() {
  local name=$1
  shift
  sbatch --parsable --job-name="$name" --output="$dir/$name.out" --nodes=1 : --nodes=2 --gres=gpu:1 \
    "$example" --allow-cpu-training --batch-size 16 --log-every 10 --dist-timeout "$dist_timeout" "$@" ||
    slurm_fail "sbatch refused the example"
}
# The tandem processes of job name $1 on node $2 (their environment says so); with $3,
# only those whose environment has a line starting with $3 (RANK= for a rank).
node_pids() {
  local p
  for p in $(pgrep -x tandem); do
    if grep -qszx "HOME=$HOME" "/proc/$p/environ" && grep -qszx "SLURMD_NODENAME=$2" "/proc/$p/environ" &&
      grep -qszx "SLURM_JOB_NAME=$1" "/proc/$p/environ" && grep -qsz "^${3:-}" "/proc/$p/environ"; then
      echo "$p"
    fi
  done
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
# Waits up to $3 s for the tandem processes of job name $1 on every host to end, and
# prints how long after time $2 each host's last one ended; sets exited[host] (seconds).
declare -A exited
watch_exits() {
  local name=$1 t=$2 limit=$3 host left
  exited=()
  while :; do
    left=0
    for host in "${hosts[@]}"; do
      [[ -z ${exited[$host]:-} ]] || continue
      if [[ -z $(node_pids "$name" "$host") ]]; then exited[$host]=$(since "$t"); else left=1; fi
    done
    (( left )) || break
    awk -v s="$(since "$t")" -v l="$limit" 'BEGIN { exit !(s < l) }' || break
    sleep 0.2
  done
  for host in "${hosts[@]}"; do echo "  $host: ${exited[$host]:-still running after $limit} s"; done
}
# Job $1's components as "JobState=... Restarts=... ExitCode=..." lines.
job_info() { scontrol show job "$1" | grep -oE 'JobState=[A-Z_]+|Restarts=[0-9]+|ExitCode=[0-9:]+' | paste -sd' '; }

# (a) A trainer rank is killed (SIGKILL), or (c) stopped (SIGSTOP, with $1 = pause): the
# job fails with that cause, not requeued.
kill_test() {
  local name=${1:-kill} job pid t_kill ended code codes out host signal=KILL
  [[ $name == kill ]] || signal=STOP
  out=$dir/$name.out
  job=$(submit "$name" --steps 3000 --emulate-step-ms 40)
  echo "job $job: the example with 2 trainer hosts, --dist-timeout $dist_timeout"
  wait_output "$job" "$name" '^[0-9]+: .* step=50 ' 120
  pid=$(node_pids "$name" tandem-gpu0 RANK=)
  [[ -n $pid && $pid != *$'\n'* ]] || slurm_fail "not one trainer rank of job $job on tandem-gpu0: '${pid}'"
  t_kill=$(now)
  kill -$signal "$pid"
  echo "  $(( $(date +%s) - t0 )) s: kill -$signal $pid (the trainer rank on tandem-gpu0); hosts exited after:"
  watch_exits "$name" "$t_kill" $(( dist_timeout + 30 ))
  slurm_wait_end "$job" 15 ||
    { scancel "$job"; slurm_fail "job $job did not end within --dist-timeout $dist_timeout + 30 s of the kill"; }
  ended=$(since "$t_kill")
  echo "  job $job ended $ended s after the kill: $(job_info "$job")"
  grep -E '^the trainer|^the trainers|requeue' "$out" | sed 's/^/  | /'
  [[ $(job_states "$job") == FAILED ]] || slurm_fail "job $job is $(job_states "$job"), not FAILED"
  scontrol show job "$job" | grep -q 'Restarts=0' || slurm_fail "job $job was requeued"
  ! grep -q 'requeueing' "$out" || slurm_fail "the script requeued job $job"
  codes=$(scontrol show job "$job" | grep -oE 'ExitCode=[0-9]+' | cut -d= -f2 | sort -u)
  code=$(grep -oE 'failed first \(exit [0-9]+\)' "$out" | grep -oE '[0-9]+') ||
    slurm_fail "the script named no trainer host that failed"
  [[ $code != 0 && $code != 75 ]] && grep -qx "$code" <<<"$codes" || slurm_fail "job $job exited $codes, the script said $code"
  if [[ $signal == KILL ]]; then
    grep -q '^the trainer on tandem-gpu0 exited with code 137$' "$out" || slurm_fail "tandem-gpu0's code 137 is not named"
  fi
  for host in tandem-gpu0 tandem-gpu1; do
    grep -qE "^the trainer on $host (exited with code [0-9]+|wrote no exit code)" "$out" ||
      slurm_fail "$host's code is not named"
  done
  awk -v s="$ended" -v l=$(( dist_timeout + 30 )) 'BEGIN { exit !(s <= l) }' ||
    slurm_fail "job $job ended $ended s after the kill, not within --dist-timeout $dist_timeout + 30 s"
  echo "OK: job $job lost a trainer rank (SIG$signal) and ended FAILED with exit code $code, not requeued, $ended s after it"
}
pause_test() { kill_test pause; }

# (b) SIGTERM to the job's steps: every host stops within 15 s, the trainer hosts exit 75,
# the job is requeued and the second run resumes and completes.
stop_test() {
  local name=stop steps=400 job t_term host n
  job=$(submit "$name" --steps $steps --emulate-step-ms 40)
  echo "job $job: the example with 2 trainer hosts, $steps steps, stopped by SIGTERM"
  wait_output "$job" "$name" '^[0-9]+: .* step=50 ' 120
  t_term=$(now)
  scancel --signal=TERM "$job" || slurm_fail "scancel --signal=TERM $job"
  echo "  $(( $(date +%s) - t0 )) s: scancel --signal=TERM $job; hosts exited after:"
  watch_exits "$name" "$t_term" 30
  for host in "${hosts[@]}"; do
    [[ -n ${exited[$host]:-} ]] && awk -v s="${exited[$host]}" 'BEGIN { exit !(s <= 15) }' ||
      slurm_fail "$host took ${exited[$host]:-over 30} s to exit after SIGTERM, not at most 15"
  done
  wait_output "$job" "$name" 'exit 75\): requeueing job' 30
  grep -E '^the trainer|^the trainers' "$dir/$name.out" | sed 's/^/  | /'
  for host in tandem-gpu0 tandem-gpu1; do
    grep -q "^the trainer on $host exited with code 75\$" "$dir/$name.out" || slurm_fail "$host did not exit 75"
  done
  run_again "$job" 1
  check_completed "$job" 120
  n=$(grep -oE 'resumed from .* at step [0-9]+' "$dir/$name.out" | head -1 | grep -oE '[0-9]+$') ||
    slurm_fail "run 2 of job $job did not resume"
  (( n >= 50 )) || slurm_fail "run 2 resumed at step $n, before the step-50 line run 1 printed"
  grep -q '^the trainer on tandem-gpu1 exited with code 0$' "$dir/$name.out" || slurm_fail "run 2's tandem-gpu1 code is not named"
  [[ ! -e $HOME/tandem-runs/$name/exit-codes ]] || slurm_fail "the script left its exit codes behind"
  echo "OK: job $job stopped by SIGTERM (every host out within 15 s), requeued, resumed at step $n, completed ($(( $(date +%s) - t0 )) s)"
}

for part in $parts; do "${part}_test"; done
