#!/usr/bin/python3
"""Reading ahead from slow storage at any sample rate (issue 34): images/s with 0, 20 and
100 ms added to every read (--emulate-read-latency-ms), at 64 px (thumbnail-sized JPEGs,
120x110) and 224 px (500x375), from image folders and from the same files as tar shards,
on 2 preprocessing threads:

  - `tandem bench pipeline`: one process, its own request depth (request_depth.h);
  - `tandem bench feed`: two worker processes and a trainer's feed over loopback gRPC, the
    request depth set by the trainer's scheduler from what the workers' reads want.

Each cell is the median of --rounds, the latencies interleaved within a round; the ratio
is each latency's rate over the 0 ms rate (target >= 0.9). Also recorded: the engine,
the most reads in flight, the deepest request depth, the process's threads and peak memory.

    bench/read_latency.py [--seconds 6] [--rounds 2] [--work /tmp/tandem-read-latency] [--out FILE.json]

Makes its data with make_jpegs.py and make_shards.py (Debian's /usr/bin/python3 with
python3-torch) the first time. env: TANDEM (default build/tandem).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
LATENCIES = (0, 20, 100)
SIZES = {64: ("120x110", "30", 2048, 256), 224: ("500x375", "44", 512, 64)}  # jpeg size, texture, count, per shard


def make_data(work):
    """{(px, kind): --data} for the four sources, made once under `work`."""
    out = {}
    for px, (size, texture, count, per_shard) in SIZES.items():
        folder, shards = os.path.join(work, f"jpegs{px}"), os.path.join(work, f"shards{px}")
        if not os.path.isdir(folder):
            subprocess.run([sys.executable, os.path.join(HERE, "make_jpegs.py"), "--out", folder, "--count", str(count),
                            "--size", size, "--texture", texture], check=True, stdout=subprocess.DEVNULL)
        if not os.path.isdir(shards):
            subprocess.run([sys.executable, os.path.join(HERE, "make_shards.py"), "from-folder", "--folder", folder,
                            "--out", shards, "--per-shard", str(per_shard)], check=True, stdout=subprocess.DEVNULL)
        out[(px, "imagefolder")] = f"imagefolder:{folder}"
        out[(px, "webdataset")] = f"webdataset:{shards}"
    return out


def run(tandem, bench, data, px, latency, seconds):
    args = [tandem, "bench", bench, "--data", data, "--pipeline", f"decode,random_resized_crop({px}),hflip",
            "--emulate-read-latency-ms", str(latency), "--seconds", str(seconds), "--json"]
    if bench == "pipeline":
        args += ["--threads", "2"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"read_latency: {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seconds", type=float, default=6)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--benches", default="pipeline,feed")
    p.add_argument("--work", default="/tmp/tandem-read-latency")
    p.add_argument("--tandem", default=os.environ.get("TANDEM", os.path.join(ROOT, "build", "tandem")))
    p.add_argument("--out", default=os.path.join(HERE, "results", "read_latency.json"))
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    sources = make_data(args.work)
    load_start = os.getloadavg()[0]
    raw = {}
    for r in range(args.rounds):
        for bench in args.benches.split(","):
            for (px, kind), data in sources.items():
                for latency in LATENCIES:
                    print(f"round {r + 1}/{args.rounds}: {bench} {kind} {px} px {latency} ms", file=sys.stderr)
                    raw.setdefault(f"{bench}/{kind}/{px}/{latency}", []).append(
                        run(args.tandem, bench, data, px, latency, args.seconds))
    rows = []
    for bench in args.benches.split(","):
        for (px, kind) in sources:
            base = statistics.median(x["images_per_sec"] for x in raw[f"{bench}/{kind}/{px}/0"])
            for latency in LATENCIES:
                runs = raw[f"{bench}/{kind}/{px}/{latency}"]
                rate = statistics.median(x["images_per_sec"] for x in runs)
                last = runs[-1]
                deepest = last.get("batches_in_flight_most",
                                   max((w.get("requests_deepest", 0) for w in last.get("workers", [])), default=0))
                rows.append({"bench": bench, "data": kind, "px": px, "latency_ms": latency, "images_per_sec": rate,
                             "ratio": rate / base if base else 0, "rounds": [x["images_per_sec"] for x in runs],
                             "requests_deepest": deepest, "reads_in_flight_most": last.get("reads_in_flight_most"),
                             "io_engine": last.get("io_engine"), "process_threads": last.get("process_threads"),
                             "max_rss_mb": last.get("max_rss_mb")})
    print(f"\n2 threads, {args.seconds} s a run, median of {args.rounds}; load average {load_start:.1f} -> "
          f"{os.getloadavg()[0]:.1f}")
    print("| bench | data | px | latency | images/s | ratio to 0 ms | deepest requests | reads in flight | threads | peak MB |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for x in rows:
        print(f"| {x['bench']} | {x['data']} | {x['px']} | {x['latency_ms']} ms | {x['images_per_sec']:.0f} | "
              f"**{x['ratio']:.2f}** | {x['requests_deepest']} | {x['reads_in_flight_most'] or '-'} | "
              f"{x['process_threads'] or '-'} | {x['max_rss_mb'] and round(x['max_rss_mb']) or '-'} |")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump({"load_average_start": load_start, "load_average_end": os.getloadavg()[0], "rows": rows, "raw": raw},
                  f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
