#!/usr/bin/env python3
"""The data pool changing under a running trainer (issue 37), measured with real processes
on loopback: two `tandem worker`s (A, B) and one `tandem trainer` that takes its workers
from a watch file (--workers-watch).

    python3 bench/elastic_pool.py [--tandem build/tandem] [--out FILE] [--phase-s 20] [--slowdown 40]

Phases, each --phase-s seconds of steady windows (metrics.jsonl, every 10 steps):
  1. A alone: the rate one worker gives.
  2. B started and added to the file: the time from B's start to its first batch served
     (its first metrics window with batches), then A and B together, against the sum of
     A alone and B alone (B's own rate from its share of phase 2, and from phase 4).
  3. B drained (SIGTERM, --drain): the windows while it leaves, against A alone.
  4. A removed, B' (B restarted) alone: B's rate alone.
Workers run one thread slowed --slowdown times (--emulate-slowdown), so that the loop
(--emulate-step-ms 5) waits for data and the rate is the workers'. Prints a table and
writes the raw windows as JSON."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from _peers import free_port, listens, wait_until  # noqa: E402


class Run:
    def __init__(self, args, work):
        self.args, self.work = args, work
        self.list = os.path.join(work, "workers")
        self.metrics = os.path.join(work, "metrics.jsonl")
        self.workers = {}

    def worker(self, name, drain=False):
        port = free_port()
        argv = [self.args.tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--threads", "1",
                "--data", "blur-benchmark", "--image-size", "32", "--emulate-slowdown", str(self.args.slowdown),
                "--idle-timeout", "300", "--term-grace", "30"] + (["--drain"] if drain else [])
        log = open(os.path.join(self.work, f"{name}.log"), "w")
        started = time.monotonic()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        wait_until(lambda: listens(port), 30, f"worker {name} listening")
        self.workers[name] = {"proc": proc, "target": f"127.0.0.1:{port}", "started": started}
        return self.workers[name]

    def listing(self, names):
        with open(self.list + ".new", "w") as f:
            f.write("".join(self.workers[n]["target"] + "\n" for n in names))
        os.rename(self.list + ".new", self.list)

    def windows(self):
        if not os.path.exists(self.metrics):
            return []
        with open(self.metrics) as f:
            return [json.loads(line) for line in f if line.strip()]


def rate(windows):
    total = sum(w["window_s"] for w in windows)
    return sum(w["samples_per_sec"] * w["window_s"] for w in windows) / total if total else 0.0


def source_batches(window, target):
    for s in window.get("sources", []):
        if s.get("name") == target or s.get("address") == target:
            return s.get("batches", 0)
    return 0


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", default=os.path.join(ROOT, "build", "tandem"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "elastic_pool.json"))
    p.add_argument("--phase-s", type=float, default=20)
    p.add_argument("--slowdown", type=float, default=40)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="tandem-elastic-")
    run = Run(args, work)
    a = run.worker("a")
    b = None
    run.listing(["a"])
    trainer_log = open(os.path.join(work, "trainer.log"), "w")
    trainer = subprocess.Popen([args.tandem, "trainer", "--workers-watch", run.list, "--local-workers", "0",
                                "--train-threads", "1", "--data", "blur-benchmark", "--image-size", "32",
                                "--batch-size", "16", "--steps", "1000000", "--log-every", "10",
                                "--emulate-step-ms", "5", "--summary-json", os.path.join(work, "summary.json")],
                               stdout=trainer_log, stderr=subprocess.STDOUT)
    marks = {}
    try:
        wait_until(lambda: len(run.windows()) >= 2, 120, "first windows")
        marks["a_alone"] = len(run.windows())
        time.sleep(args.phase_s)
        marks["b_added"] = len(run.windows())
        b = run.worker("b", drain=True)
        run.listing(["a", "b"])
        wait_until(lambda: any(source_batches(w, b["target"]) for w in run.windows()[marks["b_added"]:]), 60,
                   "batch from B")
        first_b = time.monotonic() - b["started"]
        marks["both"] = len(run.windows())
        time.sleep(args.phase_s)
        marks["b_drained"] = len(run.windows())
        drain_at = time.monotonic()
        b["proc"].send_signal(signal.SIGTERM)
        b_exit = b["proc"].wait(timeout=60)
        drain_s = time.monotonic() - drain_at
        time.sleep(args.phase_s / 2)
        marks["after_drain"] = len(run.windows())
        b2 = run.worker("b2")
        run.listing(["b2"])
        wait_until(lambda: any(source_batches(w, b2["target"]) for w in run.windows()[marks["after_drain"]:]), 60,
                   "batch from B'")
        time.sleep(3)  # A's last requests answered
        marks["b_alone"] = len(run.windows())
        time.sleep(args.phase_s)
        marks["end"] = len(run.windows())
    finally:
        trainer.send_signal(signal.SIGTERM)
        try:
            trainer.wait(timeout=60)
        except subprocess.TimeoutExpired:
            trainer.kill()
        for w in run.workers.values():
            if w["proc"].poll() is None:
                w["proc"].send_signal(signal.SIGTERM)
                w["proc"].wait(timeout=60)
    ws = run.windows()
    phase = lambda lo, hi: ws[marks[lo]:marks[hi]]
    a_alone, both = rate(phase("a_alone", "b_added")), rate(phase("both", "b_drained"))
    b_alone = rate(phase("b_alone", "end"))
    draining = phase("b_drained", "after_drain")
    dip = min((w["samples_per_sec"] for w in draining), default=0.0)
    result = {"a_alone_samples_per_sec": a_alone, "b_alone_samples_per_sec": b_alone,
              "both_samples_per_sec": both, "both_vs_sum": both / (a_alone + b_alone) if a_alone + b_alone else 0,
              "b_start_to_first_batch_s": first_b, "drain_seconds_to_exit": drain_s, "drained_exit_code": b_exit,
              "lowest_window_while_draining_samples_per_sec": dip,
              "lowest_window_vs_a_alone": dip / a_alone if a_alone else 0,
              "slowdown": args.slowdown, "phase_s": args.phase_s, "windows": ws, "marks": marks}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(f"A alone {a_alone:.1f} samples/s, B alone {b_alone:.1f}, both {both:.1f} "
          f"({result['both_vs_sum']:.2f} of the sum)")
    print(f"B: first batch {first_b:.1f} s after its process started")
    print(f"B drained: exited {b_exit} after {drain_s:.1f} s; the lowest window while it left "
          f"{dip:.1f} samples/s ({result['lowest_window_vs_a_alone']:.2f} of A alone)")
    print(f"raw: {args.out}; logs in {work}")


if __name__ == "__main__":
    sys.exit(main())
