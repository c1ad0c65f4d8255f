#!/usr/bin/python3
"""`tandem launch -- COMMAND` runs a user's torch.distributed script on the trainer hosts
of a heterogeneous cluster, fed by the worker hosts, all real processes on this machine:

- `tandem simulate --trainer-hosts 2 --procs-per-host 2 -- python3 examples/python/train_ddp.py`:
  4 Gloo ranks on 2 trainer hosts train from 2 worker hosts (no data on the trainer hosts;
  the script takes its workers and data settings from the environment), losses fall,
  every process exits 0, the workers are released (by the first trainer host, once the
  other has reported that its ranks ended);
- a rank that raises ends the job with its exit code, its traceback in output/failure;
- SIGTERM to the launcher reaches every rank (their handler runs) and the job exits as
  the script decides;
- the same training through `tandem launch` on one SageMaker root per host, started as
  SageMaker would (the command from hyperparameters.json: script, script-args).

    /usr/bin/python3 tests/python/launch_script_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when torch is missing."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from workers import free_ports, parse_args, require, wait_until

ARGS = parse_args()
require("numpy", "torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TRAIN = os.path.join(ROOT, "examples", "python", "train_ddp.py")
RANK = os.path.join(os.path.dirname(os.path.abspath(__file__)), "launched_rank.py")
TANDEM = os.path.abspath(ARGS.tandem)
STEPS = 24
DATA = ["--image-size", "32", "--batch-size", "16", "--steps", str(STEPS), "--threads", "1"]
TRAIN_ARGS = ["--model", "small", "--lr", "2", "--log-every", "4"]  # a linear model on a 4x4 grid learns fast
ENV = {**os.environ, "PYTHONPATH": os.path.abspath(ARGS.module_dir), "OMP_NUM_THREADS": "1"}


def start(argv, log):
    return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=ENV, start_new_session=True)


def finish(proc, log, timeout):
    """The exit code; the whole session is killed past the deadline."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise SystemExit(f"{proc.args[:3]} did not finish within {timeout} s:\n{text(log)}")


def text(log):
    log.seek(0)
    return log.read().decode(errors="replace")


def simulate(tmp, flags, command, timeout=240):
    with tempfile.TemporaryFile() as log:
        proc = start([TANDEM, "simulate", "--run-dir", tmp, "--worker-hosts", "2", *flags, "--", *command], log)
        code = finish(proc, log, timeout)
        return code, text(log)


def rank0_summary(out):
    lines = [json.loads(m) for m in re.findall(r"\] (\{.*\})$", out, re.M)]
    assert len(lines) == 1, f"expected one JSON line from rank 0:\n{out}"
    return lines[0]


def check_trained(out, world):
    s = rank0_summary(out)
    assert s["world"] == world and s["steps"] == STEPS and s["finite"], s
    assert s["final_loss"] < s["first_loss"] - 0.2, f"the loss did not fall: {s}"
    return s


def simulated_training(tmp):
    # Each host's two ranks share one stream to each worker through its relay.
    code, out = simulate(tmp, ["--trainer-hosts", "2", "--procs-per-host", "2", "--share-streams", "on", *DATA],
                         [sys.executable, TRAIN, *TRAIN_ARGS])
    assert code == 0, out
    s = check_trained(out, 4)
    assert out.count("ranks share one stream to each data worker") == 2, out
    assert len(re.findall(r"stream relay: [1-9]\d* batches handed to the ranks, at most 2 streams to data workers at once",
                          out)) == 2, out
    # Every host (2 trainers, 2 workers) exited 0; the workers because they were released.
    table = re.findall(r"^(algo-\d)\s+(trainer|worker)\s+(.*)$", out, re.M)
    assert len(table) == 4 and all(status == "exited 0" for _, _, status in table), table
    assert out.count("shutdown requested by the trainer") == 2, out
    assert "released 2 of 2 data workers" in out, out
    # ... by the first trainer host, once the other had said its ranks ended.
    assert "trainer host algo-4 reports its ranks ended (exit 0)" in out, out
    for r in range(4):
        assert f"[rank-{r}]" in out, f"rank {r} did not run:\n{out}"
    print(f"simulate 2x2: {s}")


def failing_rank(tmp):
    code, out = simulate(tmp, ["--trainer-hosts", "2", "--procs-per-host", "1", "--image-size", "16"],
                         [sys.executable, RANK, "--raise-rank", "1"], 180)
    assert code == 1, f"exit {code}:\n{out}"  # Python's exit code for an uncaught exception
    failures = [open(os.path.join(tmp, h, "output/failure")).read()
                for h in sorted(os.listdir(tmp)) if os.path.exists(os.path.join(tmp, h, "output/failure"))]
    # One rank per host: its host's report names it alone; the other host's ranks are
    # stopped through the job channel, and its failure names the rank and host that failed.
    assert any(f.startswith("rank-1 exited 1: ") and "ValueError: boom from rank 1" in f for f in failures), failures
    assert any("were stopped because the job is ending: rank-1 on trainer host algo-4 exited 1" in f
               for f in failures), failures
    print("a raising rank ends the job: ok")


def sigterm(tmp):
    term = os.path.join(tmp, "term")
    os.makedirs(term)
    with tempfile.TemporaryFile() as log:
        proc = start([TANDEM, "simulate", "--run-dir", os.path.join(tmp, "run"), "--worker-hosts", "2",
                      "--trainer-hosts", "2", "--procs-per-host", "2", "--image-size", "16", "--",
                      sys.executable, RANK, "--term-dir", term, "--term-exit", "0"], log)
        try:
            wait_until(lambda: text(log).count("ready rank") == 4 or proc.poll() is not None, 120, "4 ranks ready")
        except TimeoutError:
            os.killpg(proc.pid, signal.SIGKILL)
            raise SystemExit(f"the ranks did not start:\n{text(log)}")
        proc.send_signal(signal.SIGTERM)
        code = finish(proc, log, 120)
        out = text(log)
    assert sorted(os.listdir(term)) == [f"term-{r}" for r in range(4)], f"{os.listdir(term)}\n{out}"
    assert code == 0, f"exit {code}:\n{out}"
    print("SIGTERM reaches every rank: ok")


def sagemaker_hosts(tmp):
    """2 worker and 2 trainer hosts, each `tandem launch --sagemaker-root ROOT` with the
    command in hyperparameters.json, as SageMaker starts a bring-your-own container."""
    hosts = [("algo-1", "data_group", "ml.c5.xlarge"), ("algo-2", "train_group", "ml.p3.2xlarge"),
             ("algo-3", "data_group", "ml.c5.xlarge"), ("algo-4", "train_group", "ml.p3.2xlarge")]
    ports = free_ports(6)
    host_map = ",".join(f"{h}=127.0.0.1:{p}" for (h, _, _), p in zip(hosts, ports))
    hp = {"script": TRAIN, "script-args": json.dumps(TRAIN_ARGS), "image-size": "32", "batch-size": "16",
          "steps": str(STEPS), "threads": "1", "master-port": str(ports[4]), "release-port": str(ports[5]),
          "procs-per-host": "1",
          "allow-cpu-training": "true"}
    procs = []
    for name, group, itype in hosts:
        root = os.path.join(tmp, name)
        os.makedirs(os.path.join(root, "input/config"))
        groups = {}
        for h, g, t in hosts:
            groups.setdefault(g, {"instance_group_name": g, "instance_type": t, "hosts": []})["hosts"].append(h)
        rc = {"current_group_name": group, "current_host": name, "current_instance_type": itype,
              "hosts": [h for h, _, _ in hosts], "instance_groups": list(groups.values()),
              "network_interface_name": "lo"}
        json.dump(rc, open(os.path.join(root, "input/config/resourceconfig.json"), "w"))
        json.dump(hp, open(os.path.join(root, "input/config/hyperparameters.json"), "w"))
        log = tempfile.TemporaryFile()
        env = {**ENV, "TANDEM_HOST_MAP": host_map, "TRAINING_JOB_NAME": "launch-script-test", "TANDEM_TOKEN": "t0k3n"}
        procs.append((name, log, subprocess.Popen([TANDEM, "train", "--sagemaker-root", root], stdout=log,
                                                  stderr=subprocess.STDOUT, env=env, start_new_session=True)))
    try:
        codes = {name: finish(p, log, 240) for name, log, p in procs}
        outs = {name: text(log) for name, log, _ in procs}
    finally:
        for _, log, p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            log.close()
    assert codes == {h: 0 for h, _, _ in hosts}, f"{codes}\n" + "\n".join(f"== {h}\n{o}" for h, o in outs.items())
    s = check_trained(outs["algo-2"], 2)
    assert "released 2 of 2 data workers" in outs["algo-2"], outs["algo-2"]
    assert "trainer host algo-4 reports its ranks ended (exit 0)" in outs["algo-2"], outs["algo-2"]
    print(f"tandem train on 4 SageMaker roots: {s}")


def main():
    tmp = tempfile.mkdtemp(prefix="tandem-launch-script-")
    try:
        for case in (simulated_training, failing_rank, sigterm, sagemaker_hosts):
            d = os.path.join(tmp, case.__name__)
            os.makedirs(d)
            started = time.monotonic()
            case(d)
            print(f"  ({time.monotonic() - started:.0f} s)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("OK")


if __name__ == "__main__":
    main()
