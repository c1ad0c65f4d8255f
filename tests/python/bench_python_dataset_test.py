#!/usr/bin/python3
"""bench/python_dataset.py --tiny against this build (ctest bench_python_dataset), so the
benchmark cannot rot: every phase runs for real on a few batches (the JPEGs made by
make_jpegs.py into a temporary folder), and the JSON it writes has the shape
docs/benchmarks.md reads, with positive rates and ratios. Never checks timings.

    tests/python/bench_python_dataset_test.py --build build

Exits 77 (ctest: skipped) only when this Python lacks what the peers need (torch,
torchvision, PIL, grpc: bench/setup-peers installs them) or the build has no Python module.
"""
import argparse
import importlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SKIP = 77


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    args = p.parse_args()
    build = os.path.abspath(args.build)
    for module in ("numpy", "torch", "torchvision", "PIL", "grpc"):
        try:
            importlib.import_module(module)
        except ImportError as e:
            print(f"skipped: {sys.executable} cannot import {module} ({e}): run bench/setup-peers")
            return SKIP
    if not os.path.exists(os.path.join(build, "python", "tandem", "libtandem_feed.so")):
        print(f"skipped: {build}/python/tandem has no libtandem_feed.so (configured with -DTANDEM_PYTHON=OFF)")
        return SKIP
    tmp = tempfile.mkdtemp(prefix="tandem-bench-python-dataset-")
    try:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, os.path.join(ROOT, "bench", "python_dataset.py"), "--tiny", "--procs", "2",
               "--batch-size", "8", "--jpegs", os.path.join(tmp, "jpegs"), "--tandem", os.path.join(build, "tandem"),
               "--module-dir", os.path.join(build, "python"), "--out", out]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
        print(run.stdout[-3000:])
        if run.returncode != 0:
            print(run.stderr[-6000:])
            print(f"FAILED: bench/python_dataset.py --tiny exited {run.returncode}")
            return 1
        with open(out) as f:
            result = json.load(f)
        failures = check(result, run.stdout)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print(f"FAILED: {f}")
    if not failures:
        print("OK: bench/python_dataset.py --tiny: every phase ran and its JSON has the expected shape")
    return 1 if failures else 0


def check(result, table):
    failures = []

    def want(ok, what):
        if not ok:
            failures.append(what)

    for key in ("machine", "procs", "cores", "batch_size", "rounds", "load_average_start", "load_average_end",
                "runs", "summary"):
        want(key in result, f"the JSON has no '{key}'")
    want(result.get("procs") == 2 and result.get("batch_size") == 8, "procs and batch size are the ones asked for")
    want(len(result.get("load_average_start", [])) == 3, "load_average_start is the three load averages")
    expected = {"jpeg": ["dataloader", "tandem", "grpc"], "constant": ["dataloader", "tandem"]}
    runs, summary = result.get("runs", {}), result.get("summary", {})
    for dataset, phases in expected.items():
        want(sorted(runs.get(dataset, {})) == sorted(phases), f"{dataset} ran the phases {phases}")
        for phase in phases:
            for r in runs.get(dataset, {}).get(phase, []):
                want(r.get("images_per_sec", 0) > 0 and r.get("images", 0) > 0,
                     f"{dataset} {phase}: a positive rate and image count ({r})")
                want(len(r.get("load_average", [])) == 3, f"{dataset} {phase}: its load average")
            want(len(runs.get(dataset, {}).get(phase, [])) == 1, f"{dataset} {phase}: one round in --tiny")
            want(summary.get(dataset, {}).get("images_per_sec", {}).get(phase, 0) > 0, f"{dataset} {phase}: a median")
        want(summary.get(dataset, {}).get("ratio_tandem_to_dataloader", 0) > 0, f"{dataset}: the ratio (b)/(a)")
    want(summary.get("jpeg", {}).get("ratio_tandem_to_grpc", 0) > 0, "jpeg: the ratio (b)/(c)")
    cpu = summary.get("jpeg", {}).get("cpu_us_per_image", {})
    want(sorted(cpu.get("tandem", {})) == ["consumer", "python", "total", "worker"] and
         sorted(cpu.get("dataloader", {})) == ["consumer", "python", "total"], f"jpeg: CPU per image by part ({cpu})")
    want(summary.get("constant", {}).get("us_per_sample_per_process", {}).get("tandem", 0) > 0,
         "constant: microseconds per sample")
    for text in ("(a) DataLoader", "(b) tandem.Feed", "(c) gRPC feeder", "(b)/(a)", "(b)/(c)", "load average"):
        want(text in table, f"the printed table has '{text}'")
    return failures


if __name__ == "__main__":
    sys.exit(main())
