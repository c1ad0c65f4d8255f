#!/usr/bin/env bash
# torchvision's resnet18, trained with DDP by 2 torchrun ranks (Gloo on CPU, NCCL with
# CUDA), fed by 2 `tandem worker` processes on this machine. Needs the build
# (scripts/setup: build/tandem and build/python). Extra arguments go to train_ddp.py,
# e.g. --steps 300 --batch-size 64. TANDEM=path/to/tandem overrides the binary.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
python=/usr/bin/python3   # Debian's python3-torch and python3-torchvision load only here
data=(--data synthetic --image-size 32)

pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done' EXIT
targets=()
for port in 6101 6102; do
  "$tandem" worker --port "$port" --bind 127.0.0.1 --threads 1 --idle-timeout 300 "${data[@]}" &
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
  --nproc_per_node 2 "${run_flags[@]}" "$root/examples/python/train_ddp.py" \
  --workers "$workers" "${data[@]}" --release-workers "$@"
