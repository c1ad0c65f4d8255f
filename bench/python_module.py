#!/usr/bin/python3
"""tandem's Python module (tandem.Feed) against the C++ trainer's own feed
(`tandem bench feed`) and the AWS example's Python gRPC loader (python_feeder.py).

    bench/python_module.py --tandem build/tandem --module-dir build/python --seconds 10

For each workload, in turn (--rounds times, interleaved, to even out a busy machine):
  - `tandem bench feed --json`: two workers, one pinned to twice the cores of the other
    (one core each on fewer than three), each alone, then both feeding one C++ Scheduler;
  - the same here: two workers started with the same flags and pinning, each alone, then
    both feeding one tandem.Feed consumed from Python (for images, labels in feed);
  - for blur-benchmark, python_feeder.py with the same cores, batch and image size.
Counts images after a 1 s warm-up, like feed_bench.cc. Prints a table and writes every
raw result to bench/results/python_module.json (--out). A measurement, not a test.
"""
import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
sys.path.insert(0, BENCH_DIR)
from _peers import ensure_modules  # noqa: E402

ensure_modules("numpy")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tandem", default=os.environ.get("TANDEM", os.path.join(ROOT, "build", "tandem")))
    p.add_argument("--module-dir", default=os.path.join(ROOT, "build", "python"))
    p.add_argument("--seconds", type=float, default=float(os.environ.get("BENCH_SECONDS", 10)))
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--workloads", default="blur-benchmark:224,premade:224",
                   help="data:image_size,... (python_feeder.py runs for blur-benchmark only)")
    p.add_argument("--no-peer", action="store_true", help="skip python_feeder.py")
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "results", "python_module.json"))
    return p.parse_args()


def plan_cpus():
    """feed_bench.cc's plan: k and 2k cores, or one core each on fewer than three."""
    cores = sorted(os.sched_getaffinity(0))
    k = max(len(cores) // 3, 1)
    if len(cores) >= 3:
        return [cores[:k], cores[k:3 * k]]
    return [[cores[0]], [cores[1] if len(cores) > 1 else cores[0]]]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_workers(args, data, image_size):
    procs, targets = [], []
    for cpus in plan_cpus():
        port = free_port()
        argv = [args.tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--threads", str(len(cpus)),
                "--data", data, "--image-size", str(image_size), "--idle-timeout", "600"]
        procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                      preexec_fn=lambda c=cpus: os.sched_setaffinity(0, c)))
        targets.append(f"127.0.0.1:{port}")
    return procs, targets


def measure(tandem, targets, args, data, image_size):
    """images/s and per-source batches of one Feed over `targets`, like feed_bench.cc."""
    feed = tandem.Feed(targets, batch_size=args.batch_size, steps=10**9, prefetch=16, inflight=4,
                       batch_timeout=120, connect_timeout=60, data=data, image_size=image_size)
    with feed:
        warm = time.monotonic() + 1
        while time.monotonic() < warm:
            next(feed)
        before = {s["name"]: s["batches"] for s in feed.stats()["sources"]}
        images, start = 0, time.monotonic()
        end = start + args.seconds
        while time.monotonic() < end:
            _, labels = next(feed)
            images += len(labels)
        elapsed = time.monotonic() - start
        after = feed.stats()
    batches = [s["batches"] - before[s["name"]] for s in after["sources"]]
    return {"images_per_sec": images / elapsed, "batches": batches, "hedged": after["hedged_requests"]}


def python_feed(args, data, image_size):
    sys.path.insert(0, os.path.abspath(args.module_dir))
    import tandem

    tandem.set_log_level("warning")
    procs, targets = start_workers(args, data, image_size)
    try:
        a = measure(tandem, targets[:1], args, data, image_size)
        b = measure(tandem, targets[1:], args, data, image_size)
        both = measure(tandem, targets, args, data, image_size)
    finally:
        tandem.shutdown_workers(targets)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    solo = a["images_per_sec"] + b["images_per_sec"]
    return {"images_per_sec": both["images_per_sec"], "solo_images_per_sec": [a["images_per_sec"],
                                                                            b["images_per_sec"]],
            "ratio_to_solo_sum": both["images_per_sec"] / solo if solo else 0, "batches": both["batches"],
            "hedged": both["hedged"]}


def cpp_feed(args, data, image_size):
    argv = [args.tandem, "bench", "feed", "--json", "--data", data, "--image-size", str(image_size),
            "--batch-size", str(args.batch_size), "--seconds", str(args.seconds)]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=4 * (args.seconds + 1) + 180, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def peer(args, image_size):
    cores = len({c for cpus in plan_cpus() for c in cpus})
    argv = [sys.executable, os.path.join(BENCH_DIR, "python_feeder.py"), "--cores", str(cores), "--batch-size",
            str(args.batch_size), "--image-size", str(image_size), "--seconds", str(args.seconds), "--json"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=args.seconds + 300)
    if out.returncode != 0:
        return {"error": out.stderr.strip()[-500:]}
    return json.loads(out.stdout.strip().splitlines()[-1])


def machine():
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": len(os.sched_getaffinity(0)), "kernel": platform.release(),
            "python": platform.python_version(), "load_average": os.getloadavg()}


def main():
    args = parse_args()
    result = {"bench": "python_module", "machine": machine(), "batch_size": args.batch_size,
              "seconds": args.seconds, "rounds": args.rounds, "workloads": []}
    for spec in args.workloads.split(","):
        data, size = spec.split(":")
        size = int(size)
        w = {"data": data, "image_size": size, "cpp": [], "python": [], "peer": []}
        for r in range(args.rounds):
            print(f"{data} {size}: round {r + 1}/{args.rounds}: tandem bench feed ...", file=sys.stderr, flush=True)
            w["cpp"].append(cpp_feed(args, data, size))
            print(f"{data} {size}: round {r + 1}/{args.rounds}: tandem.Feed ...", file=sys.stderr, flush=True)
            w["python"].append(python_feed(args, data, size))
        if data == "blur-benchmark" and not args.no_peer:
            print(f"{data} {size}: python_feeder.py ...", file=sys.stderr, flush=True)
            w["peer"].append(peer(args, size))
        cpp = statistics.median(x["images_per_sec"] for x in w["cpp"])
        py = statistics.median(x["images_per_sec"] for x in w["python"])
        w["cpp_images_per_sec"], w["python_images_per_sec"] = cpp, py
        w["ratio_python_to_cpp"] = py / cpp if cpp else 0
        if w["peer"] and "images_per_sec" in w["peer"][0]:
            w["peer_images_per_sec"] = w["peer"][0]["images_per_sec"]
            w["ratio_python_to_peer"] = py / w["peer_images_per_sec"]
        result["workloads"].append(w)
    result["machine"]["load_average_after"] = os.getloadavg()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"{'workload':<22}{'C++ feed img/s':>16}{'tandem.Feed img/s':>19}{'ratio':>8}{'peer img/s':>12}"
          f"{'vs peer':>9}")
    for w in result["workloads"]:
        peer_text = f"{w['peer_images_per_sec']:>12.1f}{w['ratio_python_to_peer']:>9.2f}" \
            if "peer_images_per_sec" in w else f"{'-':>12}{'-':>9}"
        print(f"{w['data'] + ' ' + str(w['image_size']):<22}{w['cpp_images_per_sec']:>16.1f}"
              f"{w['python_images_per_sec']:>19.1f}{w['ratio_python_to_cpp']:>8.2f}{peer_text}")
    print(f"target: tandem.Feed >= 0.9 x the C++ feed; raw results in {args.out}")


if __name__ == "__main__":
    main()
