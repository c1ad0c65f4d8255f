# shellcheck shell=bash
# Shared by the tests in tests/slurm/ (source it): a real Slurm on this one machine.
#
# slurm_start N configures Debian's slurm-wlm (slurmctld, munged, one slurmd per node) in
# a temporary directory with N emulated CPU nodes tandem-cpu0..N-1 (partition cpu) and
# one GPU node tandem-gpu0 (partition gpu, eight fake GPUs: a GRES whose device files are
# copies of /dev/null; gpu_nodes=G makes G of them, tandem-gpu0..G-1), every node on
# 127.0.0.1 with its own slurmd port. Slurm cannot place two components of a
# heterogeneous job on one node (its backfill scheduler reserves whole nodes), hence a
# slurmd per node. Nodes claim 128 CPUs whatever this machine has
# (SlurmdParameters=config_overrides), so that a job script written for a real cluster
# (examples/slurm/tandem-het.sbatch) is accepted as it is.
#
# Job ids start at a random FirstJobId whose ports (tandem's, from the job id:
# docs/platforms.md) are free, so that two tests running at once do not collide.
#
#   source tests/slurm/lib.sh
#   slurm_require            # exits 77 (skipped) without Slurm or root
#   slurm_start 2 'RequeueExit=75'   # extra slurm.conf lines after the node count
#   cred_expire=10 slurm_start 2     # a requeued job may start again after 11 s, not 121
#   gpu_nodes=2 slurm_start 1        # 1 CPU node, 2 GPU nodes
#   job=$(sbatch --parsable ...); slurm_wait_end "$job" 120
#   wait_output "$job" NAME 'step=50 ' 90    # NAME: a job whose output is $dir/NAME.out
#   run_again "$job" 1; check_completed "$job" 120
#
# Sets $dir (removed at exit unless TANDEM_SLURM_KEEP=1), SLURM_CONF; slurm_fail prints
# the jobs' outputs and the daemons' logs and exits 1.

slurm_require() {
  local tool
  for tool in slurmctld slurmd munged sbatch scontrol sinfo srun; do
    command -v "$tool" >/dev/null || { echo "SKIPPED: $tool is missing (apt-get install slurm-wlm munge)"; exit 77; }
  done
  [[ $(id -u) == 0 ]] || { echo "SKIPPED: slurmd must run as root"; exit 77; }
  dir=$(mktemp -d /tmp/tandem-slurm.XXXXXX)
  export SLURM_CONF=$dir/slurm.conf
  # TANDEM_SLURM_KEEP=1 keeps the directory (outputs, logs) for a look afterwards.
  trap 'slurm_stop; [[ ${TANDEM_SLURM_KEEP:-} == 1 ]] && echo "kept $dir" || rm -rf "$dir"' EXIT
}

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# True when every port in $@ can be bound on this machine now.
ports_free() {
  python3 - "$@" <<'PY'
import socket, sys
for p in sys.argv[1:]:
    s = socket.socket()
    try:
        s.bind(("0.0.0.0", int(p)))
    except OSError:
        sys.exit(1)
    finally:
        s.close()
PY
}

# A FirstJobId whose next 8 jobs' tandem ports are free: below 4256 a job's ports are
# 20000 + 3 x id, +1, +2 (cluster.h's kJobPortsLowSlots; above, they wrap to 61000 on).
first_job_id() {
  local id ports i
  for _ in $(seq 50); do
    id=$(( 1000 + RANDOM % 3200 ))
    ports=()
    for i in $(seq 0 7); do ports+=($(( 20000 + 3 * (id + i) )) $(( 20001 + 3 * (id + i) )) $(( 20002 + 3 * (id + i) ))); done
    ports_free "${ports[@]}" && { echo "$id"; return; }
  done
  echo 1000
}

slurm_stop() {
  local f p
  for f in "$dir"/run/slurmd-*.pid "$dir/run/slurmctld.pid" "$dir/run/munged.pid"; do
    [[ -s $f ]] && kill -TERM "$(cat "$f")" 2>/dev/null || true
  done
  # Job steps of this instance (their environment names its directory), and the batch
  # scripts and sruns of jobs that did not end.
  for p in $(pgrep -x slurmstepd 2>/dev/null) $(pgrep -x srun 2>/dev/null) $(pgrep -f "^/bin/bash $dir/spool/" 2>/dev/null); do
    grep -qsa "$dir" "/proc/$p/environ" && kill -KILL "$p" 2>/dev/null || true
  done
  sleep 0.5
  for f in "$dir"/run/*.pid; do [[ -s $f ]] && kill -KILL "$(cat "$f")" 2>/dev/null || true; done
  # tandem processes the steps left behind (same test: the environment names $dir).
  for p in $(pgrep -x tandem 2>/dev/null); do
    grep -qsa "$dir" "/proc/$p/environ" && kill -KILL "$p" 2>/dev/null || true
  done
}

slurm_fail() {
  local f
  echo "FAILED: $*"
  for f in "$dir"/*.out "$dir"/log/*.log; do [[ -f $f ]] && { echo "---- $f"; tail -60 "$f"; }; done
  exit 1
}

# slurm_start N [slurm.conf lines...]: N CPU nodes and ${gpu_nodes:-1} GPU nodes, up and idle.
slurm_start() {
  local ncpu=$1 ngpu=${gpu_nodes:-1} i mem ctld_port start deadline
  shift
  mkdir -p "$dir"/{munge,state,log,run,spool,dev}
  ctld_port=$(free_port)
  for i in $(seq 0 7); do mknod -m 666 "$dir/dev/nvidia$i" c 1 3; done
  for i in $(seq 0 $((ngpu - 1))); do echo "NodeName=tandem-gpu$i Name=gpu File=$dir/dev/nvidia[0-7]"; done > "$dir/gres.conf"
  mem=$(awk '/MemTotal/ {print int($2 / 1024 / 4)}' /proc/meminfo)
  cat > "$SLURM_CONF" <<CONF
ClusterName=tandem-test
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$dir/munge/munge.socket${cred_expire:+,cred_expire=$cred_expire}
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/run/slurmctld.pid
SlurmdPidFile=$dir/run/slurmd-%n.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
FirstJobId=$(first_job_id)
# Heterogeneous jobs are started by the backfill scheduler only: let it look every second.
# A requeued job waits for the main scheduler to see its begin time has passed: every 2 s.
SchedulerParameters=bf_interval=1,sched_interval=2
MpiDefault=none
ReturnToService=2
MailProg=/bin/true
MinJobAge=600
GresTypes=gpu
$(printf '%s\n' "$@")
CONF
  {
    for i in $(seq 0 $((ncpu - 1))); do
      echo "NodeName=tandem-cpu$i NodeHostname=tandem-cpu$i NodeAddr=127.0.0.1 Port=$(free_port) CPUs=128 RealMemory=$mem State=UNKNOWN"
    done
    for i in $(seq 0 $((ngpu - 1))); do
      echo "NodeName=tandem-gpu$i NodeHostname=tandem-gpu$i NodeAddr=127.0.0.1 Port=$(free_port) CPUs=128 RealMemory=$mem Gres=gpu:8 State=UNKNOWN"
    done
    echo "PartitionName=cpu Nodes=tandem-cpu[0-$((ncpu - 1))] Default=YES MaxTime=UNLIMITED State=UP"
    echo "PartitionName=gpu Nodes=tandem-gpu[0-$((ngpu - 1))] MaxTime=UNLIMITED State=UP"
  } >> "$SLURM_CONF"
  start=$(date +%s)
  dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/run/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/seed"
  slurmctld -f "$SLURM_CONF"
  for i in $(seq 0 $((ncpu - 1))); do slurmd -f "$SLURM_CONF" -N "tandem-cpu$i"; done
  for i in $(seq 0 $((ngpu - 1))); do slurmd -f "$SLURM_CONF" -N "tandem-gpu$i"; done
  deadline=$((start + 60))
  until [[ $(sinfo -h -N -o '%T' 2>/dev/null | grep -c idle) == $((ncpu + ngpu)) ]]; do
    (( $(date +%s) < deadline )) || slurm_fail "the $((ncpu + ngpu)) nodes were not idle within 60 s: $(sinfo -N 2>&1)"
    sleep 0.2
  done
  echo "slurm up in $(( $(date +%s) - start )) s: $(sinfo -h -N -o '%N/%P/%T' | tr '\n' ' ')"
}

# The distinct states of job $1's components ("COMPLETED", "RUNNING PENDING", ...).
job_states() {
  scontrol show job "$1" 2>/dev/null | grep -o 'JobState=[A-Z_]*' | cut -d= -f2 | sort -u | tr '\n' ' ' | sed 's/ $//'
}

# Waits up to $2 seconds for every component of job $1 to reach state $3 (a regex).
slurm_wait_state() {
  local job=$1 deadline=$(( $(date +%s) + $2 )) want=$3 s
  while :; do
    s=$(job_states "$job")
    [[ -n $s && $s =~ ^($want)( ($want))*$ ]] && return 0
    (( $(date +%s) < deadline )) || { echo "job $job: states '$s' after $2 s, not '$want'"; return 1; }
    sleep 0.3
  done
}

# Waits up to $2 seconds for job $1 to end (every component in a final state).
slurm_wait_end() {
  slurm_wait_state "$1" "$2" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|PREEMPTED|BOOT_FAIL|DEADLINE'
}

# For jobs whose output file is $dir/<job name>.out:
#
# Waits until job $1's output $2 matches $3 (grep -E), at most $4 seconds.
wait_output() {
  local deadline=$(( $(date +%s) + $4 ))
  until grep -qE "$3" "$dir/$2.out" 2>/dev/null; do
    (( $(date +%s) < deadline )) || slurm_fail "job $1: no '$3' in its output within $4 s ($(job_states "$1"))"
    sleep 0.3
  done
}
# Job $1, requeued, runs again (restart count $2). It may once its credentials have
# expired (EligibleTime); then an update of the job makes the backfill scheduler, which
# alone starts heterogeneous jobs, look at it again (on a busy cluster anything does).
run_again() {
  local deadline=$(( $(date +%s) + 60 )) eligible
  until scontrol show job "$1" | grep -q "Restarts=$2"; do
    (( $(date +%s) < deadline )) || slurm_fail "job $1 was not requeued (Restarts=$2) within 60 s: $(job_states "$1")"
    sleep 0.3
  done
  slurm_wait_state "$1" 60 PENDING || slurm_fail "job $1 is not pending after its requeue"
  eligible=$(date +%s -d "$(scontrol show job "$1" | grep -o 'EligibleTime=[^ ]*' | head -1 | cut -d= -f2)")
  while (( $(date +%s) <= eligible )); do sleep 0.3; done
  scontrol update JobId="$1" StartTime=now || slurm_fail "job $1 could not be updated"
  slurm_wait_state "$1" 60 RUNNING || slurm_fail "job $1 did not run again"
}

# Job $1 ended COMPLETED with exit code 0 in every component.
check_completed() {
  local info
  slurm_wait_end "$1" "$2" || { scancel "$1"; slurm_fail "job $1 did not end within $2 s"; }
  info=$(scontrol show job "$1")
  echo "$info" | grep -oE 'JobId=[0-9]+ |JobState=[A-Z_]+|Restarts=[0-9]+|ExitCode=[0-9:]+' | paste -sd' ' | sed 's/^/  /'
  [[ $(job_states "$1") == COMPLETED ]] || slurm_fail "job $1 is $(job_states "$1"), not COMPLETED"
  [[ $(grep -o 'ExitCode=[0-9:]*' <<<"$info" | sort -u) == "ExitCode=0:0" ]] || slurm_fail "an exit code of job $1 is not 0"
}
