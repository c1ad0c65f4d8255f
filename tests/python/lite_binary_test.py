#!/usr/bin/python3
"""The binary without LibTorch (build/lite/tandem; TANDEM_WITH_TORCH=OFF builds only it),
as the pip wheel will carry it: it loads no LibTorch; a data worker from it feeds the full
build's trainer on loopback to the end of a run; bench pipeline, inspect, --version and
`launch -- COMMAND` work; and each thing that needs tandem's own trainer (trainer,
bench train, a trainer host with no command, simulate with no command) stops at once
with one error line that says where to get it.

    tests/python/lite_binary_test.py --lite build/lite/tandem --full build/tandem
"""
import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile

failures = []
NO_TRAINER = "needs tandem's own LibTorch trainer"


def check(ok, what):
    if not ok:
        failures.append(what)
    return ok


def run(argv, timeout=120, **kw):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, **kw)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        return subprocess.CompletedProcess(argv, -9, text(e.stdout), text(e.stderr) + f"\n(timed out after {timeout} s)")


def loaded_libraries(binary):
    out = run(["ldd", binary]).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def check_libraries(lite, full):
    torch_libs = [lib for lib in loaded_libraries(full) if lib.startswith(("libtorch", "libc10"))]
    check(torch_libs, f"the full build loads no LibTorch ({full}): this check could not tell the two apart")
    lite_torch = [lib for lib in loaded_libraries(lite) if lib.startswith(("libtorch", "libc10", "libgloo"))]
    check(not lite_torch, f"{lite} loads {lite_torch}")


def check_no_trainer(lite, tmp):
    """Every way of asking for the built-in trainer: exit non-zero, one error line, the way out."""
    asks = {
        "trainer": [lite, "trainer", "--data", "synthetic", "--model", "small_cnn", "--steps", "1",
                    "--connect-timeout", "5"],
        "bench train": [lite, "bench", "train", "--model", "small_cnn", "--steps", "1", "--warmup", "0"],
        "launch, trainer host without a command": [lite, "launch", "--data", "synthetic", "--model", "small_cnn",
                                                   "--steps", "1"],
        "simulate without a command": [lite, "simulate", "--data", "synthetic", "--model", "small_cnn",
                                       "--steps", "1"],
    }
    for name, argv in asks.items():
        r = run(argv, timeout=60, cwd=tmp)
        text = r.stdout + r.stderr
        errors = [line for line in text.splitlines() if " error " in line or line.startswith("tandem: ")]
        check(r.returncode != 0, f"{name}: exit 0 without a trainer: {text[-500:]}")
        check(any(NO_TRAINER in line and "docs/gpu.md" in line and "tandem launch -- python3" in line
                  for line in errors), f"{name}: no error line naming the way out: {text[-800:]}")
        check(len([line for line in errors if NO_TRAINER in line]) == 1,
              f"{name}: the error is not one line: {errors}")


def check_commands(lite, tmp):
    r = run([lite, "--version"])
    check(r.returncode == 0 and "no LibTorch" in r.stdout, f"--version: {r.returncode} {r.stdout} {r.stderr}")
    r = run([lite, "inspect"], cwd=tmp)
    if check(r.returncode == 0, f"inspect exited {r.returncode}: {r.stderr[-500:]}"):
        info = json.loads(r.stdout[r.stdout.index("{"):])
        check(info.get("torch", {}).get("torch") is None, f"inspect's torch: {info.get('torch')}")
    r = run([lite, "bench", "pipeline", "--data", "synthetic", "--threads", "1", "--batch-size", "8", "--seconds",
             "0.3", "--json"])
    if check(r.returncode == 0, f"bench pipeline exited {r.returncode}: {r.stderr[-500:]}"):
        check(json.loads(r.stdout.strip().splitlines()[-1])["images_per_sec"] > 0, f"bench pipeline: {r.stdout}")
    marker = os.path.join(tmp, "ran")
    r = run([lite, "launch", "--", "/bin/sh", "-c", f'echo "rank $RANK of $WORLD_SIZE" > {marker}'], cwd=tmp)
    check(r.returncode == 0, f"launch -- COMMAND exited {r.returncode}: {(r.stdout + r.stderr)[-800:]}")
    if check(os.path.exists(marker), "launch -- COMMAND did not run the command"):
        with open(marker) as f:
            check(f.read().strip() == "rank 0 of 1", "launch -- COMMAND: the rank's environment")


def check_worker_feeds_full_trainer(lite, full, tmp):
    """A worker from the lite binary serves the full build's trainer to the end; the
    trainer releases it and it exits 0."""
    port = free_port()
    log = open(os.path.join(tmp, "worker.log"), "w")
    worker = subprocess.Popen([lite, "worker", "--port", str(port), "--bind", "127.0.0.1", "--data", "synthetic",
                               "--threads", "1", "--idle-timeout", "60"], stdout=log, stderr=subprocess.STDOUT)
    try:
        summary = os.path.join(tmp, "summary.json")
        r = run([full, "trainer", "--workers", f"127.0.0.1:{port}", "--data", "synthetic", "--model", "small_cnn",
                 "--batch-size", "8", "--steps", "4", "--local-workers", "0", "--connect-timeout", "60",
                 "--summary-json", summary], timeout=180, cwd=tmp)
        check(r.returncode == 0, f"the full trainer fed by the lite worker exited {r.returncode}: "
                                 f"{(r.stdout + r.stderr)[-1500:]}")
        if os.path.exists(summary):
            with open(summary) as f:
                s = json.load(f)
            served = [w for w in s.get("workers", []) if w.get("address") != "local"]
            check(s.get("steps") == 4 and served and served[0].get("batches", 0) == 4,
                  f"the lite worker did not serve every batch: {s.get('workers')}")
        check(worker.wait(60) == 0, f"the lite worker exited {worker.returncode} after the release")
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
        log.close()
    if failures:
        with open(os.path.join(tmp, "worker.log")) as f:
            print("worker log:\n" + f.read()[-2000:])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--lite", required=True)
    p.add_argument("--full", required=True)
    args = p.parse_args()
    args.lite, args.full = os.path.abspath(args.lite), os.path.abspath(args.full)
    with tempfile.TemporaryDirectory(prefix="tandem-lite-test-") as tmp:
        check_libraries(args.lite, args.full)
        check_no_trainer(args.lite, tmp)
        check_commands(args.lite, tmp)
        check_worker_feeds_full_trainer(args.lite, args.full, tmp)
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
