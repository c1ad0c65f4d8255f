#!/usr/bin/env python3
"""A sweep on one pool against separate pools (issue 53), real processes on loopback.

    python3 bench/sweep_pool.py [--tandem build/tandem] [--out FILE] [--jobs 4] [--steps 40]

1. Sharing. N jobs of a sweep (the same data, pipeline, seed and batch geometry; learning
   rates 0.01, 0.02, ...) train at once, first on one pool (`tandem worker --pool-jobs`,
   N threads), then each on a pool of its own (1 thread each: the same total threads).
   For each case: the pools' CPU-seconds (/proc, user + system, the whole process), the
   samples each job was served, and each job's audit (--audit-samples). Samples per pool
   CPU-second per job: a job's samples over its share of the CPU that served it (the
   shared pool's CPU divided among the N jobs; a separate pool's own CPU).
2. Fair share. Two jobs with different data settings on one pool (the pool's own,
   blur-benchmark at 224 px, weight 3; and a job's own settings, 112 px: samples a
   quarter the cost, weight 1), on one thread (--emulate-slowdown 20, so that the pool
   and not the trainers on this machine is what both wait for): the CPU-seconds the pool
   spent for each over --share-s seconds of both running (its /metrics), against their
   weights.
Prints the table and writes the raw numbers as JSON."""
import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from _peers import free_port, listens, wait_until  # noqa: E402

DATA = ["--data", "blur-benchmark", "--image-size", "224", "--dataset-size", "2048", "--seed", "1",
        "--wire-dtype", "uint8"]


def cpu_seconds(pid):
    """User + system CPU-seconds of a live process and its threads."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Pool:
    def __init__(self, args, work, name, threads, jobs=None, token=None, metrics=False, slowdown=1):
        self.port = free_port()
        self.metrics_port = free_port() if metrics else None
        argv = [args.tandem, "worker", "--port", str(self.port), "--bind", "127.0.0.1", "--threads", str(threads),
                "--idle-timeout", "600", "--emulate-slowdown", str(slowdown)] + DATA
        env = dict(os.environ)
        if jobs is not None:
            path = os.path.join(work, f"{name}-jobs.json")
            with open(path, "w") as f:
                json.dump({"jobs": jobs}, f)
            argv += ["--pool-jobs", path]
        if token is not None:
            env["TANDEM_TOKEN"] = token
            argv += ["--job-name", name]
        if metrics:
            argv += ["--metrics-port", str(self.metrics_port)]
        self.log = os.path.join(work, f"{name}.log")
        self.proc = subprocess.Popen(argv, stdout=open(self.log, "w"), stderr=subprocess.STDOUT, env=env)
        wait_until(lambda: listens(self.port), 60, f"pool {name} listening")
        self.target = f"127.0.0.1:{self.port}"

    def cpu(self):
        return cpu_seconds(self.proc.pid)

    def job_metric(self, name):
        page = urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5).read().decode()
        out = {}
        for m in re.finditer(r'^%s\{job="([^"]+)"\} ([0-9.e+]+)$' % name, page, re.M):
            out[m.group(1)] = float(m.group(2))
        return out

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def trainer(args, work, pool, name, token, lr, batch=16, steps=None, data=None):
    root = os.path.join(work, name)
    os.makedirs(root, exist_ok=True)
    with open(os.path.join(root, "token"), "w") as f:
        f.write(token)
    argv = [args.tandem, "trainer", "--workers", pool.target, "--local-workers", "0", "--train-threads", "1",
            "--model", "small_cnn", "--batch-size", str(batch), "--steps", str(steps or args.steps), "--lr", str(lr),
            "--audit-samples", "--log-every", "10", "--token-file", os.path.join(root, "token"), "--job-name", name,
            "--sagemaker-root", root, "--summary-json", os.path.join(root, "s.json")] + with_data(data)
    env = {k: v for k, v in os.environ.items() if k != "TANDEM_TOKEN"}
    return subprocess.Popen(argv, stdout=open(os.path.join(root, "log"), "w"), stderr=subprocess.STDOUT, env=env)


def with_data(overrides):
    """DATA with some flags' values replaced ({"--image-size": "112"})."""
    out = list(DATA)
    for flag, value in (overrides or {}).items():
        out[out.index(flag) + 1] = value
    return out


def finish(procs, timeout):
    for p in procs:
        if p.wait(timeout=timeout) != 0:
            raise SystemExit(f"sweep_pool: a trainer exited {p.returncode}: see its log")


def summary(work, name):
    with open(os.path.join(work, name, "s.json")) as f:
        s = json.load(f)
    a = s["sample_audit"]
    return {"samples": s["samples"], "audit_clean": a["missing"] == 0 and a["duplicated"] == 0 and
            a["unplanned"] == 0 and a["planned"] == a["consumed"], "audit": {k: a[k] for k in
            ("planned", "consumed", "missing", "duplicated", "unplanned")}}


def shared_case(args, work):
    names = [f"lr-{i}" for i in range(args.jobs)]
    pool = Pool(args, work, "shared", args.jobs, jobs=[{"name": n, "token": f"token-{n}"} for n in names])
    before = pool.cpu()
    procs = [trainer(args, work, pool, n, f"token-{n}", 0.01 * (i + 1)) for i, n in enumerate(names)]
    finish(procs, 900)
    cpu = pool.cpu() - before
    pool.stop()
    jobs = {n: summary(work, n) for n in names}
    log = open(pool.log).read()
    made = sum(int(m.group(2)) for n in names
               for m in [list(re.finditer(r"job '%s': \d+ batches, (\d+) samples served \((\d+) made" % n, log))[-1]])
    return {"pool_cpu_s": cpu, "jobs": jobs, "samples_made": made,
            "samples_served": sum(j["samples"] for j in jobs.values())}


def separate_case(args, work):
    names = [f"alone-{i}" for i in range(args.jobs)]
    pools = [Pool(args, work, n, 1, token=f"token-{n}") for n in names]
    before = [p.cpu() for p in pools]
    procs = [trainer(args, work, p, n, f"token-{n}", 0.01 * (i + 1)) for i, (p, n) in enumerate(zip(pools, names))]
    finish(procs, 900)
    cpus = [p.cpu() - b for p, b in zip(pools, before)]
    for p in pools:
        p.stop()
    jobs = {n: summary(work, n) for n in names}
    return {"pool_cpu_s": sum(cpus), "per_pool_cpu_s": cpus, "jobs": jobs,
            "samples_served": sum(j["samples"] for j in jobs.values())}


def fair_case(args, work):
    # The pool is the bottleneck (cores 20 times slower, sleeping, not spinning), not the trainers.
    light = {"image-size": 112}  # its own data settings: samples a quarter the cost of the pool's own
    pool = Pool(args, work, "fair", 1, metrics=True, slowdown=20,
                jobs=[{"name": "light", "token": "t-light", "weight": 1, "settings": light},
                      {"name": "heavy", "token": "t-heavy", "weight": 3}])
    procs = [trainer(args, work, pool, "light", "t-light", 0.05, steps=100000, data={"--image-size": "112"}),
             trainer(args, work, pool, "heavy", "t-heavy", 0.05, steps=100000)]
    metric = "tandem_pool_job_compute_seconds"
    try:
        wait_until(lambda: len(pool.job_metric(metric)) == 2, 120, "both jobs served")
        time.sleep(5)  # both streaming
        start = {m: pool.job_metric(m) for m in (metric, "tandem_pool_job_samples_made")}
        time.sleep(args.share_s)
        end = {m: pool.job_metric(m) for m in (metric, "tandem_pool_job_samples_made")}
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(timeout=120)
        pool.stop()
    cpu = {k: end[metric][k] - start[metric][k] for k in end[metric]}
    made = {k: end["tandem_pool_job_samples_made"][k] - start["tandem_pool_job_samples_made"][k] for k in cpu}
    share = cpu["heavy"] / (cpu["heavy"] + cpu["light"])
    return {"compute_seconds": cpu, "samples_made": made, "heavy_share": share, "weight_share": 0.75,
            "seconds": args.share_s, "light_settings": light}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tandem", default=os.path.join(ROOT, "build", "tandem"))
    p.add_argument("--out", default=os.path.join(ROOT, "bench", "results", "sweep_pool.json"))
    p.add_argument("--jobs", type=int, default=4)
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--share-s", type=float, default=20)
    args = p.parse_args()
    work = tempfile.mkdtemp(prefix="tandem-sweep-")
    shared = shared_case(args, work)
    separate = separate_case(args, work)
    fair = fair_case(args, work)
    per_job = {}
    for name, case in (("shared", shared), ("separate", separate)):
        share = case["pool_cpu_s"] / args.jobs
        per_job[name] = sum(j["samples"] for j in case["jobs"].values()) / args.jobs / share
    result = {"jobs": args.jobs, "steps": args.steps, "machine_cores": os.cpu_count(), "shared": shared,
              "separate": separate, "samples_per_pool_cpu_s_per_job": per_job,
              "ratio": per_job["shared"] / per_job["separate"], "fair_share": fair}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    print(f"{args.jobs} jobs x {args.steps} steps of 16 (blur-benchmark 224 px), {os.cpu_count()} cores:")
    print(f"  one pool ({args.jobs} threads): {shared['pool_cpu_s']:.1f} CPU-s, made {shared['samples_made']} "
          f"of {shared['samples_served']} served; {per_job['shared']:.1f} samples per pool CPU-s per job")
    print(f"  {args.jobs} pools (1 thread each): {separate['pool_cpu_s']:.1f} CPU-s; "
          f"{per_job['separate']:.1f} samples per pool CPU-s per job")
    print(f"  ratio {result['ratio']:.2f}x; audits clean: shared "
          f"{all(j['audit_clean'] for j in shared['jobs'].values())}, separate "
          f"{all(j['audit_clean'] for j in separate['jobs'].values())}")
    print(f"  fair share (weights 1:3, one thread, {fair['seconds']:.0f} s): the 224 px job got {fair['heavy_share']:.3f} "
          f"of the pool's CPU time (its weight's 0.750): {fair['compute_seconds']}, samples {fair['samples_made']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
