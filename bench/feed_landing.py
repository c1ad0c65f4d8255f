#!/usr/bin/python3
"""What a batch costs the training process as it lands (issue 52), by mode:
  heap: tandem.Feed's images as they travel (uint8) in fresh heap memory per batch (before);
  pool: in reused blocks (the module's default now; what pin_memory page-locks: on a GPU
        host each block is registered with CUDA once, here without CUDA the pool is left);
  float32 / float32-heap: normalised to float32 as they land (images="float32");
  copy: the peer's way to pinned memory, a copy of every batch into another buffer, as a
        DataLoader's pin_memory thread makes (here into ordinary memory: the copy is the cost).

    bench/feed_landing.py --tandem build/tandem --module-dir build/python --seconds 8 --rounds 2

One worker serves premade 224x224 uint8 images on core 1; each mode runs in its own
process on core 0 (the pool is process-wide), rounds interleaved. Reports the consumer's
CPU microseconds per batch and batches/s, medians, and writes
bench/results/feed_landing.json (--out). A measurement, not a test.
"""
import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
MODES = ("heap", "pool", "float32", "float32-heap", "copy")
DATA = dict(data="premade", image_size=224, wire_dtype="uint8")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tandem", default=os.path.join(ROOT, "build", "tandem"))
    p.add_argument("--module-dir", default=os.path.join(ROOT, "build", "python"))
    p.add_argument("--seconds", type=float, default=8)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "results", "feed_landing.json"))
    p.add_argument("--mode", help=argparse.SUPPRESS)
    p.add_argument("--target", help=argparse.SUPPRESS)
    return p.parse_args()


def consume(args):
    """One mode, in this process: CPU us per batch and batches/s after a 1 s warm-up."""
    sys.path.insert(0, os.path.abspath(args.module_dir))
    import numpy as np
    import tandem
    from tandem._library import _lib

    tandem.set_log_level("warning")
    _lib.tandem_use_buffer_pool(0 if args.mode in ("heap", "float32-heap", "copy") else 1)
    images = "float32" if args.mode.startswith("float32") else "uint8"
    with tandem.Feed([args.target], batch_size=args.batch_size, steps=10**9, prefetch=8, connect_timeout=60,
                     images=images, **DATA) as feed:
        target = None
        warm = time.monotonic() + 1
        while time.monotonic() < warm:
            next(feed)
        cpu0, start, batches = resource.getrusage(resource.RUSAGE_SELF), time.monotonic(), 0
        while time.monotonic() - start < args.seconds:
            x, _ = next(feed)
            if args.mode == "copy":
                target = np.empty_like(x) if target is None else target
                np.copyto(target, x)
            batches += 1
        elapsed, cpu1 = time.monotonic() - start, resource.getrusage(resource.RUSAGE_SELF)
    cpu = (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime)
    return {"cpu_us_per_batch": 1e6 * cpu / batches, "batches_per_sec": batches / elapsed, "batches": batches}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    args = parse_args()
    if args.mode:
        print(json.dumps(consume(args)))
        return 0
    port = free_port()
    worker = subprocess.Popen([args.tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--threads", "1",
                               "--data", DATA["data"], "--image-size", str(DATA["image_size"]), "--wire-dtype",
                               DATA["wire_dtype"], "--idle-timeout", "600"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=lambda: os.sched_setaffinity(0, {1 % os.cpu_count()}))
    runs = {m: [] for m in MODES}
    try:
        for r in range(args.rounds):
            for mode in MODES:
                print(f"round {r + 1}/{args.rounds}: {mode} ...", file=sys.stderr, flush=True)
                out = subprocess.run([sys.executable, os.path.abspath(__file__), "--mode", mode, "--target",
                                      f"127.0.0.1:{port}"] + sys.argv[1:], capture_output=True, text=True,
                                     timeout=args.seconds + 120, preexec_fn=lambda: os.sched_setaffinity(0, {0}))
                if out.returncode != 0:
                    raise RuntimeError(f"{mode} failed: {out.stderr[-2000:]}")
                runs[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
    finally:
        worker.kill()
        worker.wait()
    summary = {m: {k: statistics.median(r[k] for r in rs) for k in ("cpu_us_per_batch", "batches_per_sec")}
               for m, rs in runs.items()}
    base = summary["heap"]["cpu_us_per_batch"]
    for m in MODES:
        summary[m]["cpu_ratio_to_heap"] = summary[m]["cpu_us_per_batch"] / base
    result = {"bench": "feed_landing", "batch_size": args.batch_size, "image": [3, 224, 224], "seconds": args.seconds,
              "rounds": args.rounds, "load_average": os.getloadavg(), "runs": runs, "summary": summary}
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print(f"{'mode':<10}{'CPU us/batch':>14}{'batches/s':>12}{'CPU vs heap':>13}")
    for m in MODES:
        s = summary[m]
        print(f"{m:<10}{s['cpu_us_per_batch']:>14.0f}{s['batches_per_sec']:>12.1f}{s['cpu_ratio_to_heap']:>13.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
