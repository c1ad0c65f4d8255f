#!/usr/bin/python3
"""scripts/gpu-experiment --cpu --tiny against this build (ctest gpu_experiment_cpu): the
whole GPU experiment on a CPU with tiny sizes, so that the run on the GPU machine can only
fail on what needs a GPU. Checks that every step's JSON exists, parses and has the fields
the summary and docs/benchmarks.md read; that every measurement that ran reports positive
images/s; that what needs a GPU says so; and the summary's ratios and table.

    tests/python/gpu_experiment_test.py --build build [--python /usr/bin/python3]

Exits 77 (ctest: skipped) only when no Python with torch is found, or its PyTorch has no
libuv TCPStore (Debian's 2.x), which torchrun needs.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEASUREMENTS = ["step1-ceiling-resnet50", "step1-ceiling-vit", "step2-host-alone", "step3-workers",
                "step4-python-tandem", "step4-python-dataloader"]
# Issue 36's: the reference recipe, a Python dataset, the anchors (anchor-compile skips
# where torch has no torch.compile, as Debian bookworm's 1.13).
RECIPE = ["recipe-ceiling", "recipe-pipeline", "recipe-workers-1", "recipe-workers-2", "recipe-workers-3",
          "recipe-workers-3-nolocal"]
ISSUE36 = RECIPE + ["pydata-tandem", "pydata-dataloader", "anchor-eager", "anchor-decode", "anchor-compile"]
STEPS = ["build", "jpegs"] + MEASUREMENTS + ["step6-nccl"] + ISSUE36 + ["wheel-python-tandem", "summary"]
COMMON = ["step", "title", "status", "mode", "device", "gpu", "versions", "when", "commands", "gpu_utilisation",
          "seconds"]

failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


# Exits non-zero where torch.distributed.TCPStore cannot use libuv (PyTorch >= 2.2 built without it).
LIBUV_PROBE = """
import torch.distributed as dist
try:
    dist.TCPStore("127.0.0.1", 0, 1, True, use_libuv=True)
except TypeError:
    pass  # PyTorch < 2.2: no libuv option, torchrun works
"""


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", required=True)
    p.add_argument("--python", default="/usr/bin/python3")
    args = p.parse_args()
    if subprocess.run([args.python, "-c", "import torch"], capture_output=True).returncode != 0:
        print(f"skipped: {args.python} cannot import torch")
        return 77
    # Step 4 runs torchrun, whose rendezvous asks for a libuv TCPStore: Debian's PyTorch 2.x
    # (trixie's, in scripts/test-cuda's root) is built without one.
    if subprocess.run([args.python, "-c", LIBUV_PROBE], capture_output=True).returncode != 0:
        print(f"skipped: {args.python}'s PyTorch has no libuv TCPStore, which torchrun (step 4) needs")
        return 77
    tmp = tempfile.mkdtemp(prefix="tandem-gpu-experiment-test-")
    out = os.path.join(tmp, "out")
    try:
        cmd = [sys.executable, os.path.join(ROOT, "scripts", "gpu-experiment"), out, "--cpu", "--tiny", "--build",
               os.path.abspath(args.build), "--python", args.python, "--work", os.path.join(tmp, "work")]
        # The wheel step runs from a wheel made now, as the GPU machine's run takes the one carried there.
        wheel = None
        if shutil.which("patchelf"):
            made = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "wheel"), "--build",
                                   os.path.abspath(args.build), "--out", os.path.join(tmp, "dist"), "--no-build"],
                                  capture_output=True, text=True, timeout=240)
            check(made.returncode == 0, f"scripts/wheel failed: {made.stdout[-1000:]} {made.stderr[-1000:]}")
            wheels = [f for f in os.listdir(os.path.join(tmp, "dist"))] if made.returncode == 0 else []
            wheel = os.path.join(tmp, "dist", wheels[0]) if wheels else None
        cmd += ["--wheel", wheel] if wheel else []
        before = set(os.listdir(ROOT))
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=500)
        check(set(os.listdir(ROOT)) <= before, f"the run wrote into the repository: {set(os.listdir(ROOT)) - before}")
        print(run.stdout[-4000:])
        check(run.returncode == 0, f"gpu-experiment exited {run.returncode}: {run.stderr[-2000:]}")
        results = {}
        for name in STEPS:
            path = os.path.join(out, f"{name}.json")
            if not check(os.path.exists(path), f"{name}.json missing"):
                continue
            with open(path) as f:
                r = json.load(f)
            results[name] = r
            for key in COMMON:
                check(key in r, f"{name}.json has no '{key}'")
            check(r.get("step") == name, f"{name}.json names step {r.get('step')}")
            check(r.get("status") in ("ok", "skipped"), f"{name}: status {r.get('status')}: {r.get('error')}")
            check(str(r.get("device", "")).startswith("cpu"), f"{name}: device {r.get('device')}")
            check(r.get("versions", {}).get("tandem", "").startswith("tandem"), f"{name}: no tandem version")
            check("torch" in r.get("versions", {}), f"{name}: no torch version")
            if shutil.which("nvidia-smi") is None:
                check(r.get("gpu_utilisation") is None, f"{name}: GPU utilisation without a GPU")
            if r.get("status") == "skipped":
                check(bool(r.get("skipped")), f"{name}: skipped without saying why")
            for c in r.get("commands", []):
                if r.get("status") == "skipped" and name == "anchor-compile":
                    continue  # exit 3: this torch has no torch.compile
                check(isinstance(c.get("command"), str) and c.get("rc") == 0,
                      f"{name}: command {c.get('name')} rc {c.get('rc')}")
        check_measurements(results)
        check_wheel_step(results.get("wheel-python-tandem"), wheel, os.path.join(tmp, "work"))
        check_nccl(results.get("step6-nccl"))
        check_summary(out, results.get("summary"))
        check(os.path.getsize(os.path.join(out, "experiment.log")) > 0, "experiment.log is empty")
        check_summarize(tmp, out, results.get("summary"))
        check_tar(tmp, cmd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


def check_wheel_step(r, wheel, work):
    """Step 4 from the wheel: ran (when there was a wheel), its module from the venv."""
    if not wheel:
        check(r and r.get("status") == "skipped" and "wheel" in r.get("skipped", ""), f"wheel step without a wheel: {r}")
        return
    if not check(r and r.get("status") == "ok", f"wheel-python-tandem: {r and (r.get('status'), r.get('error'))}"):
        return
    check(r.get("images_per_sec", 0) > 0 and r["result"].get("finite") is True, f"wheel-python-tandem: {r['result']}")
    check(r.get("module", "").startswith(os.path.join(work, "wheel-venv")), f"module not from the wheel: {r.get('module')}")
    workers = [c for c in r.get("commands", []) if c["name"].startswith("worker-")]
    check(workers and all("wheel-venv/bin/tandem worker" in c["command"] for c in workers),
          f"the workers are not the wheel's tandem: {[c['command'][:120] for c in workers]}")


def check_measurements(results):
    check(results.get("build", {}).get("status") == "skipped", "build: not skipped on --cpu")
    for name in MEASUREMENTS:
        r = results.get(name)
        if not r or r.get("status") != "ok":
            continue
        check(isinstance(r.get("images_per_sec"), (int, float)) and r["images_per_sec"] > 0,
              f"{name}: images_per_sec {r.get('images_per_sec')}")
        check(isinstance(r.get("result"), dict), f"{name}: no result")
        if name.startswith(("step2", "step3")):
            steady = r["result"].get("steady", {})
            check(steady.get("images_per_sec", 0) > 0 and "data_wait_pct" in steady and steady.get("step_ms"),
                  f"{name}: steady state {steady}")
            check(r["commands"][-1]["command"].startswith("taskset -c ") or shutil.which("taskset") is None,
                  f"{name}: the trainer is not confined with taskset")
        if name.startswith("step4"):
            check(r["result"].get("steps", 0) > 0 and r["result"].get("finite") is True,
                  f"{name}: result {r['result']}")
    workers = results.get("step3-workers", {}).get("commands", [])
    check(sum(c["name"].startswith("worker-") for c in workers) == 3, "step3: not 3 worker processes")
    check_issue36(results)


def check_issue36(results):
    """Every step of issue 36 ran (anchor-compile may skip, saying why) and measured."""
    for name in ISSUE36:
        r = results.get(name) or {}
        if name == "anchor-compile" and r.get("status") == "skipped":
            check("torch.compile" in r.get("skipped", ""), f"{name}: skipped for another reason: {r.get('skipped')}")
            continue
        if not check(r.get("status") == "ok", f"{name}: {r.get('status')}: {r.get('error') or r.get('skipped')}"):
            continue
        check(isinstance(r.get("images_per_sec"), (int, float)) and r["images_per_sec"] > 0,
              f"{name}: images_per_sec {r.get('images_per_sec')}")
    for n, name in ((1, "recipe-workers-1"), (2, "recipe-workers-2"), (3, "recipe-workers-3"),
                    (3, "recipe-workers-3-nolocal")):
        cmds = results.get(name, {}).get("commands", [])
        check(sum(c["name"].startswith("worker-") for c in cmds) == n, f"{name}: not {n} workers")
        trainer = next((c["command"] for c in cmds if c["name"] == "trainer"), "")
        for flag in ("trivial_augment_wide", "random_erasing(0.1)", "--mixup 0.2", "--cutmix 1.0",
                     "--label-smoothing 0.1"):
            check(flag in trainer, f"{name}: the trainer runs without {flag}: {trainer}")
        steady = (results.get(name, {}).get("result") or {}).get("steady", {})
        check(steady.get("images_per_sec", 0) > 0, f"{name}: steady state {steady}")
    nolocal = next((c["command"] for c in results.get("recipe-workers-3-nolocal", {}).get("commands", [])
                    if c["name"] == "trainer"), "")
    check("--local-workers 0" in nolocal, f"recipe-workers-3-nolocal: {nolocal}")
    pipeline = results.get("recipe-pipeline", {})
    check((pipeline.get("images_per_sec_per_core") or 0) > 0, f"recipe-pipeline: {pipeline.get('error')}")
    for name, loader, feed in (("pydata-tandem", "tandem", "TandemDataset"),
                               ("pydata-dataloader", "torch", "python_dataset.py:ImageNetJpegs")):
        res = results.get(name, {}).get("result") or {}
        check(res.get("loader") == loader and feed in str(res.get("feed")), f"{name}: fed by {res.get('feed')}")
        check(res.get("finite") is True and res.get("steps", 0) > 0, f"{name}: result {res}")
    workers = [c for c in results.get("pydata-tandem", {}).get("commands", []) if c["name"].startswith("worker-")]
    check(len(workers) == 3 and all("--python-procs" in c["command"] and "python:" in c["command"] for c in workers),
          f"pydata-tandem: not 3 Python-dataset workers: {[c['command'] for c in workers]}")
    decode = results.get("anchor-decode", {}).get("result") or {}
    check(decode.get("images", 0) > 0 and decode.get("files", 0) > 0, f"anchor-decode: {decode}")


def check_nccl(r):
    if not check(r is not None and r.get("status") == "ok", f"step6-nccl: {r and r.get('error')}"):
        return
    check("no GPU" in str(r.get("nccl")), "step6-nccl: does not say NCCL was skipped for want of a GPU")
    check(r["result"].get("backend") == "gloo", f"step6-nccl: backend {r['result'].get('backend')}")
    check((r["result"].get("grad_buckets") or 0) >= 1, "step6-nccl: no gradient buckets were allreduced")


def check_summary(out, r):
    if not check(r is not None, "summary.json missing"):
        return
    for key in ("step3_over_step1", "step3_over_step2", "step4_tandem_over_step3", "recipe_workers_1_over_ceiling",
                "recipe_workers_3_over_ceiling", "recipe_worker_cores_for_095", "recipe_worker_cores_for_095_from_fed",
                "pydata_tandem_over_dataloader", "pydata_worker_cores_for_095", "tandem_ceiling_over_eager"):
        v = r.get("ratios", {}).get(key, {}).get("value")
        check(isinstance(v, (int, float)) and v > 0, f"summary: ratio {key} = {v}")
    check("| step |" in r.get("markdown", ""), "summary: no markdown table")
    check(os.path.exists(os.path.join(out, "summary.md")), "summary.md missing")


def check_summarize(tmp, out, summary):
    """--summarize of the run's folder gives the run's own ratios."""
    merged = os.path.join(tmp, "merged")
    run = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "gpu-experiment"), merged, "--summarize",
                          os.path.join(tmp, "nothing-here"), out], capture_output=True, text=True, timeout=60)
    if not check(run.returncode == 0, f"--summarize exited {run.returncode}: {run.stderr[-1000:]}"):
        return
    with open(os.path.join(merged, "summary.json")) as f:
        again = json.load(f)
    for key, r in (summary or {}).get("ratios", {}).items():
        check(again["ratios"][key]["value"] == r["value"], f"--summarize: {key} {again['ratios'][key]} vs {r}")
    check(os.path.exists(os.path.join(merged, "summary.md")), "--summarize wrote no summary.md")


def check_tar(tmp, cmd):
    """--tar leaves one results.tgz in OUTDIR, holding the step files."""
    tarred = os.path.join(tmp, "tarred")
    run = subprocess.run([cmd[0], cmd[1], tarred] + cmd[3:] + ["--tar", "--only", "step6-nccl,summary"],
                         capture_output=True, text=True, timeout=120)
    check(run.returncode == 0, f"--tar exited {run.returncode}: {run.stderr[-1000:]}")
    check(os.listdir(tarred) == ["results.tgz"] if os.path.isdir(tarred) else False,
          f"--tar: OUTDIR holds {os.listdir(tarred) if os.path.isdir(tarred) else 'nothing'}")
    names = subprocess.run(["tar", "tzf", os.path.join(tarred, "results.tgz")], capture_output=True,
                           text=True).stdout.split()
    for name in ("./step6-nccl.json", "./summary.json", "./experiment.log"):
        check(name in names, f"--tar: {name} not in results.tgz ({names})")


if __name__ == "__main__":
    sys.exit(main())
