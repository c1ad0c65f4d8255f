#!/usr/bin/env bash
# Reading from slow storage, and WebDataset shards against image folders (issue 25):
#
# 1. Slow storage: decode + RandomResizedCrop(224) + flip on 2 preprocessing threads, from
#    an image folder and from the same files as WebDataset shards, with 0 and 20 ms added to
#    every read (--emulate-read-latency-ms, read ahead by --io-threads): images/s, and the
#    ratio 20 ms / 0 ms (target >= 0.9). With --io-threads 0 as well, to show what reading
#    ahead buys.
# 2. Per core: the same pipeline on 1 thread, no added latency: webdataset / imagefolder.
# 3. Indexing: 1,000 generated shards (--index-shards x --per-shard samples of 110 KB each,
#    sparse files), walking the tar headers (0 and 20 ms per read), then from the file
#    `tandem index` writes.
#
#   bench/slow_storage.sh [--dir /tmp/tandem-jpegs] [--seconds 10] [--rounds 3] [--index-shards 1000]
#                         [--per-shard 128] [--work /tmp/tandem-slow-storage] [--out FILE.json]
#   env: TANDEM (default build/tandem)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tandem=${TANDEM:-$root/build/tandem}
dir=/tmp/tandem-jpegs
seconds=10
rounds=3
index_shards=1000
per_shard=128
work=/tmp/tandem-slow-storage
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --dir) dir=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --index-shards) index_shards=$2; shift 2 ;;
    --per-shard) per_shard=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "slow_storage.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
[ -x "$tandem" ] || { echo "slow_storage.sh: no tandem binary at $tandem (build it, or set TANDEM)" >&2; exit 1; }
if ! find "$dir" -name '*.jpg' -print -quit 2>/dev/null | grep -q .; then
  /usr/bin/python3 "$root/bench/make_jpegs.py" --out "$dir" --count 512 >&2
fi
mkdir -p "$work"
shards=$work/shards
[ -d "$shards" ] || /usr/bin/python3 "$root/bench/make_shards.py" from-folder --folder "$dir" --out "$shards" --per-shard 64 >&2
pipeline='decode,random_resized_crop(224),hflip'
results=$work/results.txt
: >"$results"

bench() {  # NAME THREADS LATENCY IO_THREADS DATA [SECONDS]
  "$tandem" bench pipeline --data "$5" --pipeline "$pipeline" --threads "$2" --emulate-read-latency-ms "$3" \
    --io-threads "$4" --seconds "${6:-$seconds}" --json 2>/dev/null | tail -1 | sed "s/^/$1 /" >>"$results"
}

for ((r = 1; r <= rounds; r++)); do
  echo "round $r/$rounds" >&2
  for src in imagefolder webdataset; do
    data="imagefolder:$dir"; [ "$src" = webdataset ] && data="webdataset:$shards"
    bench "$src-2t-0ms" 2 0 auto "$data"
    bench "$src-2t-20ms" 2 20 auto "$data"
    bench "$src-2t-20ms-noahead" 2 20 0 "$data"
    bench "$src-1t-0ms" 1 0 auto "$data"
  done
done

many=$work/many-$index_shards
if [ ! -d "$many" ]; then
  /usr/bin/python3 "$root/bench/make_shards.py" many --out "$many" --shards "$index_shards" --per-shard "$per_shard" \
    --jpeg "$(find "$dir" -name '*.jpg' -print -quit)" >&2
fi
rm -f "$many/tandem-index.txt"
echo "indexing $index_shards shards by walking their headers" >&2
bench index-walk-0ms 1 0 32 "webdataset:$many" 0.2
bench index-walk-20ms 1 20 32 "webdataset:$many" 0.2
"$tandem" index "$many" --io-threads 32 | tail -2 | sed 's/^/tandem index: /' >&2
bench index-file-0ms 1 0 32 "webdataset:$many" 0.2

/usr/bin/python3 - "$results" "$dir" "$seconds" "$rounds" "$index_shards" "$per_shard" "$out" <<'EOF'
import json, os, sys
path, folder, seconds, rounds, index_shards, per_shard, out = sys.argv[1:]
best, runs = {}, {}
for line in open(path):
    name, _, text = line.partition(" ")
    r = json.loads(text)
    runs.setdefault(name, []).append(r)
    if name not in best or r["images_per_sec"] > best[name]["images_per_sec"]:
        best[name] = r
rate = lambda n: best[n]["images_per_sec"] if n in best else float("nan")
files = [os.path.join(d, f) for d, _, fs in os.walk(folder) for f in fs if f.endswith(".jpg")]
print(f"decode + RandomResizedCrop(224) + flip, {len(files)} files of "
      f"{sum(os.path.getsize(f) for f in files) / len(files) / 1000:.0f} KB; best of {rounds} rounds of {seconds} s; "
      f"load average {os.getloadavg()[0]:.2f}; reading ahead with --io-threads auto = "
      f"{best.get('imagefolder-2t-20ms', {}).get('io_threads', 'nan')} reads in flight")
print(f"{'':<12}{'2 threads, 0 ms':>18}{'20 ms':>10}{'ratio':>8}{'20 ms, no read-ahead':>24}{'1 thread, 0 ms':>17}")
summary = {}
for src in ("imagefolder", "webdataset"):
    r0, r20, plain, one = (rate(f"{src}-2t-0ms"), rate(f"{src}-2t-20ms"), rate(f"{src}-2t-20ms-noahead"),
                           rate(f"{src}-1t-0ms"))
    summary[src] = {"images_per_sec_0ms": r0, "images_per_sec_20ms": r20, "ratio": r20 / r0,
                    "images_per_sec_20ms_no_read_ahead": plain, "images_per_sec_per_core": one}
    print(f"{src:<12}{r0:>18.1f}{r20:>10.1f}{r20 / r0:>8.2f}{plain:>24.1f}{one:>17.1f}")
print(f"webdataset / imagefolder per core: {summary['webdataset']['images_per_sec_per_core'] / summary['imagefolder']['images_per_sec_per_core']:.2f}")
idx = {n: best[n]["index_seconds"] for n in ("index-walk-0ms", "index-walk-20ms", "index-file-0ms") if n in best}
print(f"indexing {index_shards} shards x {per_shard} samples: walking headers {idx.get('index-walk-0ms', float('nan')):.2f} s "
      f"(20 ms per read: {idx.get('index-walk-20ms', float('nan')):.2f} s), from tandem index's file "
      f"{idx.get('index-file-0ms', float('nan')):.2f} s")
if out:
    json.dump({"bench": "slow_storage", "summary": summary, "index_seconds": idx, "best": best,
               "load_average": os.getloadavg()[0]}, open(out, "w"), indent=1)
EOF
