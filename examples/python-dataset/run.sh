#!/usr/bin/env bash
# This folder's segmenter or detector trained on shapes.py (a Python dataset) on this
# machine, by either path:
#   run.sh simulate segmentation|detection [flags]   tandem's C++ trainer: `tandem simulate`
#       (a data worker host and a trainer host of 2 ranks, Gloo on CPU)
#   run.sh torchrun segmentation|detection [args]    train_torchrun.py: 2 torchrun ranks (DDP,
#       Gloo) fed by 2 `tandem worker` processes through tandem.Feed
# Extra flags go to `tandem simulate` or train_torchrun.py. Needs the build (build/tandem,
# and build/python for torchrun) and Debian's python3-torch (/usr/bin/python3).
# TANDEM=path/to/tandem overrides the binary; OUT=folder keeps the files (else a new one
# under /tmp).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
python=/usr/bin/python3   # Debian's python3-torch loads only here
how=${1:-}
task=${2:-}
case $task in
  segmentation) name=Segmentation ;;
  detection) name=Detection ;;
  *) echo "usage: $0 simulate|torchrun segmentation|detection [flags]" >&2; exit 2 ;;
esac
shift 2
data=python:$here/shapes.py:$name
out=${OUT:-$(mktemp -d /tmp/tandem-python-dataset.XXXXXX)}
mkdir -p "$out"

if [[ $how == simulate ]]; then
  "$python" "$here/${task}_model.py" "$out/$task.pt"
  # These defaults, unless given (tandem refuses a flag given twice).
  defaults=(--worker-hosts 1 --procs-per-host 2 --steps 100 --batch-size 16 --log-every 10)
  args=("$@")
  for ((i = 0; i < ${#defaults[@]}; i += 2)); do
    [[ " $* " == *" ${defaults[i]} "* ]] || args+=("${defaults[i]}" "${defaults[i + 1]}")
  done
  "$tandem" simulate --model "$out/$task.pt" --data "$data" --python "$python" --run-dir "$out/run" "${args[@]}"
  exit
fi
[[ $how == torchrun ]] || { echo "usage: $0 simulate|torchrun segmentation|detection [flags]" >&2; exit 2; }

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
targets=()
for port in 6201 6202; do
  "$tandem" worker --port "$port" --bind 127.0.0.1 --threads 1 --idle-timeout 300 --data "$data" \
    --python "$python" &
  pids+=($!)
  targets+=("127.0.0.1:$port")
done
# torch < 2.0 under Python 3.11 cannot parse torchrun's default --redirects/--tee ("0").
run_flags=()
if "$python" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) >= 2)'; then
  run_flags=(--redirects 1 --tee 1)
fi
workers=$(IFS=,; echo "${targets[*]}")
PYTHONPATH="$root/build/python${PYTHONPATH:+:$PYTHONPATH}" "$python" -m torch.distributed.run \
  --nproc_per_node 2 "${run_flags[@]}" "$here/train_torchrun.py" --task "$task" --workers "$workers" \
  --save "$out/$task-trained.pt" --release-workers "$@"
