#!/bin/bash
# The training loop, side by side: `tandem bench train` (LibTorch C++, device-resident
# ceiling and the fed run) against bench/torch_train.py (the same step in Python, Debian's
# PyTorch), same model, batch, image size and threads. Prints the ratios and writes the
# raw JSON of both to bench/results/train_loop.json (or --out FILE).
#
#   bench/train_loop.sh [--out FILE]
#   MODEL=resnet18 BATCH=32 SIZE=64 STEPS=20 THREADS=1 TANDEM=build/tandem bench/train_loop.sh
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(dirname "$HERE")
OUT="$ROOT/bench/results/train_loop.json"
[[ "${1:-}" == "--out" ]] && OUT=$2
MODEL=${MODEL:-resnet18} BATCH=${BATCH:-32} SIZE=${SIZE:-64} STEPS=${STEPS:-20} THREADS=${THREADS:-1}
TANDEM=${TANDEM:-$ROOT/build/tandem}
"$HERE/setup-peers"
mkdir -p "$(dirname "$OUT")"
common=(--model "$MODEL" --batch-size "$BATCH" --steps "$STEPS")
tandem_json=$(timeout 1800 "$TANDEM" bench train "${common[@]}" --image-size "$SIZE" --train-threads "$THREADS" \
  --threads 1 --optimizer sgd --json 2>/dev/null | tail -1)
peer_json=$(timeout 1800 /usr/bin/python3 "$HERE/torch_train.py" "${common[@]}" --image-size "$SIZE" \
  --threads "$THREADS" --json)
/usr/bin/python3 - "$OUT" "$tandem_json" "$peer_json" <<'PY'
import json, sys, time, os
out, t, p = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
ratio = t["ceiling_images_per_sec"] / p["images_per_sec"]
print(f"model {t['model']}, batch {t['batch_size']}, {t['image_size']} px, {p['threads']} thread(s), {t['device']}")
print(f"  tandem ceiling (C++ loop, batch on the device): {t['ceiling_images_per_sec']:8.1f} img/s")
print(f"  tandem fed (uint8 host batches, full path):     {t['fed_images_per_sec']:8.1f} img/s  ({t['fed_to_ceiling']:.2f} of the ceiling)")
print(f"  PyTorch {p['torch']} (Python loop, same step):   {p['images_per_sec']:8.1f} img/s")
print(f"  tandem ceiling / PyTorch: {ratio:.2f}")
json.dump({"when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "load_average": os.getloadavg()[0],
           "tandem": t, "pytorch": p, "ceiling_to_pytorch": ratio}, open(out, "w"), indent=2)
print(f"raw results in {out}")
PY
