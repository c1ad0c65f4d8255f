#!/usr/bin/env bash
# Trains mnist_cnn on Fashion-MNIST through a simulated heterogeneous cluster: one
# trainer host and two data-worker hosts on this machine, CPU only.
# Extra arguments go to `tandem simulate` (e.g. --steps 1000).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
data=/usr/share/datasets/fashion-mnist   # Debian's dataset-fashion-mnist (scripts/setup installs it)
exec "$root/scripts/run" simulate \
  --data "mnist:$data" --eval-data "mnist:$data" \
  --model mnist_cnn --optimizer adam --lr 0.001 --batch-size 64 --steps 600 \
  --log-every 100 "$@"
