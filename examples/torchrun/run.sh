#!/bin/bash
# tandem under torchrun, on one machine: two `tandem worker` processes stand in for the
# CPU hosts, and torchrun starts two ranks of `tandem launch` (--no_python: tandem is a
# binary). Each rank sees torchrun's RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT,
# trains as that rank (Gloo on CPU, NCCL on GPUs) and pulls batches from the workers
# named by --workers. Rank 0 releases the workers at the end; everything exits 0.
#
#   examples/torchrun/run.sh [path/to/tandem]
#
# On a real cluster, run `tandem worker` on each CPU host and on each GPU host:
#   torchrun --nnodes N --nproc_per_node GPUS --rdzv_backend c10d --rdzv_endpoint HOST0:29500 \
#     --no_python tandem launch --workers cpu-1,cpu-2 --model resnet50 --data imagefolder:/data
# (--worker-service NAME instead of --workers: every address of a DNS name is a worker.)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tandem=${1:-$root/build/tandem}
python=/usr/bin/python3  # Debian's python3-torch provides torchrun
"$python" -c 'import torch' 2>/dev/null || { echo "needs python3-torch (apt-get install python3-torch)"; exit 1; }
export TANDEM_TOKEN=${TANDEM_TOKEN:-$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')}
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
data=(--data blur-benchmark --image-size 64 --dataset-size 2048)
"$tandem" worker --port 6101 --bind 127.0.0.1 --threads 1 "${data[@]}" > "$work/worker-1.log" 2>&1 &
"$tandem" worker --port 6102 --bind 127.0.0.1 --threads 1 "${data[@]}" > "$work/worker-2.log" 2>&1 &
flags=()
# torch < 2 under Python 3.11 cannot parse torchrun's default --redirects.
"$python" -c 'import sys, torch; sys.exit(int(torch.__version__.split(".")[0]) < 2)' || flags=(--redirects 1 --tee 1)
OMP_NUM_THREADS=1 "$python" -m torch.distributed.run --nproc_per_node 2 --master_port 29511 "${flags[@]}" \
  --no_python "$tandem" launch --workers 127.0.0.1:6101,127.0.0.1:6102 "${data[@]}" \
  --model resnet18 --steps 20 --batch-size 16 --log-every 5 --local-workers 0 --summary-json "$work/summary.json"
wait
echo "summary: $(tr -d '\n ' < "$work/summary.json" | head -c 300)..."
