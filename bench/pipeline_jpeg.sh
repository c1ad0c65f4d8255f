#!/usr/bin/env bash
# tandem's JPEG pipeline next to torchvision's, on one core each, in one run:
#
#   decode + RandomResizedCrop(224) + RandomHorizontalFlip -> uint8 CHW
#
# on ImageNet-like JPEGs (500x375, ~110 KB, made by bench/make_jpegs.py when --dir has none).
#   tandem:       tandem bench pipeline --data imagefolder:DIR --threads 1
#   torchvision:  bench/torchvision_jpeg.py (torchvision.io.decode_jpeg + transforms on tensors,
#                 and the classic PIL ImageFolder loader), torch.set_num_threads(1)
# The three alternate for --rounds rounds and each keeps its best round (a busy machine only
# ever makes a run slower). Prints images/s per core and tandem / torchvision.
#
# --recipe trivial: torchvision's ResNet-50 reference recipe instead, at 176 px:
#   RandomResizedCrop(176) + flip + TrivialAugmentWide + RandomErasing(0.1)
#   tandem: decode,random_resized_crop(176),hflip,trivial_augment_wide,random_erasing(0.1)
#
#   bench/pipeline_jpeg.sh [--recipe crop|trivial] [--dir /tmp/tandem-jpegs] [--seconds 10] [--rounds 3]
#                          [--cpu N] [--out FILE.json]
#   env: TANDEM (default build/tandem)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
dir=/tmp/tandem-jpegs
seconds=10
rounds=3
cpu=""
out=""
recipe=crop
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --cpu) cpu=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --recipe) recipe=$2; shift 2 ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "pipeline_jpeg.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tandem" ] || { echo "pipeline_jpeg.sh: no tandem binary at $tandem (build it, or set TANDEM)" >&2; exit 1; }
/usr/bin/python3 -c "import torchvision, PIL" 2>/dev/null || {
  echo "pipeline_jpeg.sh: needs Debian's python3-torchvision and python3-pil (apt-get install ...)" >&2; exit 1; }
if ! find "$dir" -name '*.jpg' -print -quit 2>/dev/null | grep -q .; then
  /usr/bin/python3 "$root/bench/make_jpegs.py" --out "$dir" --count 512 >&2
fi
pin=(); [ -n "$cpu" ] && pin=(taskset -c "$cpu")
case "$recipe" in
  crop) size=224; pipeline='decode,random_resized_crop(224),hflip'
    title='decode + RandomResizedCrop(224) + flip' ;;
  trivial) size=176; pipeline='decode,random_resized_crop(176),hflip,trivial_augment_wide,random_erasing(0.1)'
    title='decode + RandomResizedCrop(176) + flip + TrivialAugmentWide + RandomErasing(0.1)' ;;
  *) echo "pipeline_jpeg.sh: --recipe is crop or trivial, not $recipe" >&2; exit 2 ;;
esac
results=$(mktemp)
trap 'rm -f "$results"' EXIT

for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds" >&2
  "${pin[@]}" "$tandem" bench pipeline --data "imagefolder:$dir" --pipeline "$pipeline" --threads 1 \
    --seconds "$seconds" --json 2>/dev/null | tail -1 | sed 's/^/tandem /' >>"$results"
  for variant in tensor pil; do
    "${pin[@]}" /usr/bin/python3 "$root/bench/torchvision_jpeg.py" --data-dir "$dir" --variant "$variant" \
      --recipe "$recipe" --image-size "$size" --seconds "$seconds" --json | sed "s/^/torchvision-$variant /" >>"$results"
  done
done

/usr/bin/python3 - "$results" "$dir" "$seconds" "$rounds" "$out" "$title" "$pipeline" <<'EOF'
import json, os, sys
path, folder, seconds, rounds, out, title, pipeline = sys.argv[1:]
best, runs = {}, {}
for line in open(path):
    name, _, text = line.partition(" ")
    r = json.loads(text)
    rate = r.get("images_per_sec_per_thread", r.get("images_per_sec_per_core"))
    runs.setdefault(name, []).append(rate)
    best[name] = max(best.get(name, 0), rate)
files = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg")]
mean_kb = sum(os.path.getsize(f) for f in files) / len(files) / 1000
tv = max(best.get("torchvision-tensor", 0), best.get("torchvision-pil", 0))
print(f"JPEG pipeline, one core: {title}, {len(files)} files of {mean_kb:.0f} KB")
print(f"tandem --pipeline '{pipeline}'")
print(f"load average {os.getloadavg()[0]:.2f}; best of {rounds} rounds of {seconds} s")
for name in ("tandem", "torchvision-tensor", "torchvision-pil"):
    print(f"  {name:<20} {best.get(name, 0):8.1f} images/s   (rounds: {', '.join(f'{x:.0f}' for x in runs.get(name, []))})")
ratio = best["tandem"] / tv if tv else float("nan")
print(f"  tandem / torchvision (faster variant): {ratio:.2f}x")
if out:
    json.dump({"bench": "pipeline_jpeg", "pipeline": pipeline, "files": len(files), "mean_kb": mean_kb, "best": best, "runs": runs,
               "ratio": ratio, "load_average": os.getloadavg()[0]}, open(out, "w"), indent=1)
EOF
