#!/usr/bin/python3
"""Python datasets (issue 23, docs/datasets.md): the same Python Dataset run by
  (a) a torch DataLoader with P worker processes, consumed in one process: the ceiling
      for Python code (batch 32, nothing pinned);
  (b) a `tandem worker --data python:FILE:NAME --python-procs P` on loopback, consumed
      through tandem.Feed;
  (c) the AWS heterogeneous-cluster example's gRPC loader (python_feeder.py --dataset
      python:FILE:NAME): a DataLoader with P workers behind a grpcio stream.
Three datasets, all defined in this file:
  - jpeg: PIL decode of the ImageNet-like JPEGs of make_jpegs.py, torchvision
    RandomResizedCrop(224), RandomHorizontalFlip, ColorJitter(0.4, 0.4, 0.4), to a uint8
    [3, 224, 224] numpy array and the class folder's index as label;
  - constant: one constant uint8 [3, 224, 224] array and a label: what is left is the
    per-sample overhead of each loader (no peer (c) for it);
  - torchvision: the same JPEGs as a torchvision ImageFolder with that Compose ending in
    ToTensor and Normalize (float32): the DataLoader runs it as Python, tandem makes it
    natively (issue 52); torchvision_split: with a lambda of the user's own before
    ToTensor, which tandem runs in Python after its own steps.

    bench/python_dataset.py --jpegs /tmp/tandem-jpegs [--procs 2] [--seconds 15] [--rounds 3]

Every phase runs in its own process (this script with --phase), pinned to the same
cores (all of this process's, or --cores), with the same P and batch size; the phases
are interleaved (a, b, c, a, b, ...) --rounds times and the medians reported. Each
counts whole batches after a warm-up (--warmup-batches, which drains what the loader
prepared while starting), over at least --seconds and
--min-batches. Prints a table and writes every raw result, the load average and the
ratios (b)/(a) (target >= 0.9) and (b)/(c) to bench/results/python_dataset.json (--out).
--tiny: a few batches of each, seconds in all (ctest bench_python_dataset). A
measurement, not a test: numbers from a busy machine are noisy.

Needs Debian's /usr/bin/python3 with torch, torchvision, numpy, PIL and grpcio
(bench/setup-peers), and a build with the Python module (build/python).
"""
import os
import sys

try:
    import numpy as np
except ImportError:  # main() re-runs this script under /usr/bin/python3 (_peers.ensure_modules)
    np = None

BENCH_DIR = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH_DIR)
THIS_FILE = os.path.abspath(__file__)
IMAGE_SHAPE = (3, 224, 224)


# ----------------------------------------------------------------------------- datasets
# Imported by tandem's Python processes too (--data python:THIS_FILE:NAME): only numpy at
# the top; each dataset imports what it needs in __init__.


class ImageNetJpegs:
    """An image folder of JPEGs (make_jpegs.py): PIL decode, RandomResizedCrop(size),
    RandomHorizontalFlip, ColorJitter(0.4, 0.4, 0.4) -> {"image": uint8 [3, size, size],
    "label": class}. `length` (default: the number of files) cycles through the files."""

    def __init__(self, root, size=224, length=0):
        import torchvision.transforms as T

        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.files = [(os.path.join(root, c, f), i) for i, c in enumerate(classes)
                      for f in sorted(os.listdir(os.path.join(root, c))) if f.lower().endswith((".jpg", ".jpeg"))]
        if not self.files:
            raise ValueError(f"no JPEGs in the class folders of {root}: run bench/make_jpegs.py --out {root}")
        self.classes = classes
        self.length = length or len(self.files)
        self.transform = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip(),
                                    T.ColorJitter(brightness=0.4, contrast=0.4, saturation=0.4)])

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        from PIL import Image

        path, label = self.files[index % len(self.files)]
        with Image.open(path) as im:
            image = self.transform(im.convert("RGB"))
        return {"image": np.asarray(image).transpose(2, 0, 1), "label": label}


def TorchvisionFolder(root, size=224, split=False):
    """The same JPEGs as a torchvision ImageFolder with the usual training Compose, to
    float32 normalised [3, size, size], as users write it: tandem makes it natively (issue
    52, docs/datasets.md), a DataLoader runs it as Python. split: a lambda of the user's
    own (a vertical flip drawn from random) after ColorJitter, which tandem runs in the
    dataset's Python after its own steps."""
    import random

    import torchvision.transforms as T
    from PIL import Image
    from torchvision.datasets import ImageFolder

    own = [T.Lambda(lambda im: im.transpose(Image.FLIP_TOP_BOTTOM) if random.random() < 0.5 else im)] if split else []
    return ImageFolder(root, transform=T.Compose([
        T.RandomResizedCrop(size), T.RandomHorizontalFlip(), T.ColorJitter(0.4, 0.4, 0.4)] + own + [T.ToTensor(),
        T.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])]))


class Constant:
    """The same uint8 array for every sample: only the loader's per-sample cost is left."""

    def __init__(self, length=1 << 20, classes=4):
        self.length, self.num_classes = length, classes
        self.image = np.full(IMAGE_SHAPE, 7, dtype=np.uint8)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return {"image": self.image, "label": index % self.num_classes}


# ----------------------------------------------------------------------------- phases


def data_args(dataset, args):
    if dataset == "jpeg":
        return "ImageNetJpegs", {"root": os.path.abspath(args.jpegs), "length": 1 << 20}
    if dataset in ("torchvision", "torchvision_split"):
        return "TorchvisionFolder", {"root": os.path.abspath(args.jpegs), "split": dataset == "torchvision_split"}
    return "Constant", {}


def process_cpu(pid):
    """CPU seconds (user + system, all threads) `pid` has used; 0 once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def children(pid):
    pids = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                pids += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return pids


def cpu_of(parts):
    """{part: CPU seconds} for parts given as {part: function returning its pids}."""
    return {part: sum(process_cpu(p) for p in pids()) for part, pids in parts.items()}


def timed(batches, args, parts):
    """images/s over whole batches from `batches` (an iterator of label arrays' lengths),
    after the warm-up; the window closes on a multiple of --procs batches (loaders that
    hand out whole batches per process deliver in rounds). Also the CPU time each of
    `parts` ({name: function returning its pids}) spent in the window, per image: where
    the time goes (the profile of docs/benchmarks.md)."""
    import time

    for _ in range(args.warmup_batches):
        next(batches)
    start, cpu_start = time.monotonic(), cpu_of(parts)
    images = count = 0
    while True:
        images += next(batches)
        count += 1
        elapsed = time.monotonic() - start
        if elapsed >= args.seconds and count >= args.min_batches and count % args.procs == 0:
            break
    cpu = cpu_of(parts)
    cpu_us = {part: 1e6 * (cpu[part] - cpu_start[part]) / images for part in parts}
    return {"images_per_sec": images / elapsed, "images": images, "batches": count, "seconds": elapsed,
            "cpu_us_per_image": cpu_us}


def phase_dataloader(dataset, args):
    import torch

    name, kwargs = data_args(dataset, args)
    import itertools

    loader = torch.utils.data.DataLoader(globals()[name](**kwargs), batch_size=args.batch_size, shuffle=True,
                                         num_workers=args.procs, pin_memory=False, persistent_workers=True)
    parts = {"python": lambda: children(os.getpid()), "consumer": lambda: [os.getpid()]}
    epochs = itertools.chain.from_iterable(loader for _ in itertools.count())  # an ImageFolder ends each epoch
    return timed((len(batch["label"] if isinstance(batch, dict) else batch[1]) for batch in epochs), args, parts)


def phase_tandem(dataset, args):
    import json
    import socket
    import subprocess
    import tempfile

    sys.path.insert(0, os.path.abspath(args.module_dir))
    import tandem

    tandem.set_log_level("warning")
    name, kwargs = data_args(dataset, args)
    data, kwargs = f"python:{THIS_FILE}:{name}", json.dumps(kwargs)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = tempfile.NamedTemporaryFile(prefix="tandem-python-dataset-worker-", suffix=".log", delete=False)
    argv = [args.tandem, "worker", "--port", str(port), "--bind", "127.0.0.1", "--threads", str(args.procs),
            "--python-procs", str(args.procs), "--data", data, "--data-args", kwargs, "--idle-timeout", "600"]
    env = dict(os.environ)
    if args.phase == "tandem_baseline":  # the same worker with another _dataset_worker.py
        env["TANDEM_DATASET_WORKER"] = os.path.abspath(args.baseline_worker)
    worker = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env)
    target = f"127.0.0.1:{port}"
    try:
        feed = tandem.Feed([target], batch_size=args.batch_size, steps=10**9, connect_timeout=180,
                           batch_timeout=120, data=data, data_args=kwargs)
        with feed:
            parts = {"python": lambda: children(worker.pid), "worker": lambda: [worker.pid],
                     "consumer": lambda: [os.getpid()]}
            result = timed((len(labels) for _, labels in feed), args, parts)
        tandem.shutdown_workers([target])
        worker.wait(30)
    except BaseException:
        worker.kill()
        worker.wait()
        with open(log.name) as f:
            sys.stderr.write(f"the tandem worker's log ({log.name}):\n{f.read()[-3000:]}\n")
        raise
    os.unlink(log.name)
    return result


def phase_grpc(dataset, args):
    import json
    import subprocess

    name, kwargs = data_args(dataset, args)
    argv = [sys.executable, os.path.join(BENCH_DIR, "python_feeder.py"), "--dataset", f"python:{THIS_FILE}:{name}",
            "--data-args", json.dumps(kwargs), "--cores", str(args.procs), "--batch-size", str(args.batch_size),
            "--seconds", str(max(args.seconds, 0.01)), "--warmup-batches", str(args.warmup_batches), "--json"]
    if args.tiny:
        argv += ["--warmup", "0"]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=args.seconds + 300)
    if out.returncode != 0:
        raise RuntimeError(f"python_feeder.py failed ({out.returncode}): {out.stderr.strip()[-2000:]}")
    r = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images_per_sec": r["images_per_sec"], "images": r["images"], "seconds": r["seconds"]}


PHASES = {"dataloader": phase_dataloader, "tandem": phase_tandem, "grpc": phase_grpc, "tandem_baseline": phase_tandem}
LABELS = {"dataloader": "(a) DataLoader", "tandem": "(b) tandem.Feed", "grpc": "(c) gRPC feeder",
          "tandem_baseline": "(b0) --baseline"}


# ----------------------------------------------------------------------------- driver


def parse_args():
    import argparse

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jpegs", default=os.environ.get("TANDEM_BENCH_JPEGS", "/tmp/tandem-jpegs"),
                   help="make_jpegs.py's folder (made there with --count 256 when missing)")
    p.add_argument("--tandem", default=os.environ.get("TANDEM", os.path.join(ROOT, "build", "tandem")))
    p.add_argument("--module-dir", default=os.path.join(ROOT, "build", "python"))
    p.add_argument("--procs", type=int, default=len(os.sched_getaffinity(0)), help="P: processes of every loader")
    p.add_argument("--cores", default="", help="cores every phase is pinned to, e.g. 0-1 (default: all of ours)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--seconds", type=float, default=15.0, help="shortest measured window per phase")
    p.add_argument("--min-batches", type=int, default=20)
    p.add_argument("--warmup-batches", type=int, default=24,
                   help="batches taken before the window: more than any loader keeps ready (tandem.Feed's "
                        "prefetch is 16, a DataLoader's 2 x P), so the window starts in the steady state")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--datasets", default="jpeg,constant")
    p.add_argument("--phases", default="dataloader,tandem,grpc", help="grpc runs for jpeg only")
    p.add_argument("--baseline-worker", default="",
                   help="another _dataset_worker.py (e.g. main's): adds phase (b0), (b) with it, to measure a change")
    p.add_argument("--tiny", action="store_true", help="a few batches of each phase, one round (for ctest)")
    p.add_argument("--out", default=os.path.join(BENCH_DIR, "results", "python_dataset.json"))
    p.add_argument("--phase", help=argparse.SUPPRESS)
    p.add_argument("--dataset", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.tiny:
        args.seconds, args.min_batches, args.rounds = 0.0, 2 * args.procs, 1
        args.warmup_batches = args.procs
    if args.procs < 1 or args.batch_size < 1 or args.rounds < 1:
        p.error("--procs, --batch-size and --rounds must be >= 1")
    return args


def parse_cores(text):
    cores = set()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        cores.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cores)


def machine():
    import platform

    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "python": platform.python_version()}


def ensure_jpegs(args):
    import subprocess

    if os.path.isdir(args.jpegs) and any(os.scandir(args.jpegs)):
        return
    count = "16" if args.tiny else "256"
    print(f"making {count} JPEGs in {args.jpegs} (make_jpegs.py) ...", file=sys.stderr, flush=True)
    subprocess.run([sys.executable, os.path.join(BENCH_DIR, "make_jpegs.py"), "--out", args.jpegs, "--count", count],
                   check=True, stdout=subprocess.DEVNULL)


def run_phase(phase, dataset, args, cores):
    """One phase in a fresh process pinned to `cores`: its result, with the load average."""
    import json
    import subprocess

    argv = [sys.executable, THIS_FILE, "--phase", phase, "--dataset", dataset] + sys.argv[1:]
    before = os.getloadavg()
    out = subprocess.run(argv, capture_output=True, text=True, timeout=args.seconds * 4 + 600,
                         preexec_fn=lambda: os.sched_setaffinity(0, cores))
    if out.returncode != 0:
        raise RuntimeError(f"{LABELS[phase]} on {dataset} failed ({out.returncode}):\n{out.stderr.strip()[-4000:]}")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    result["load_average"] = before
    return result


def summarize(runs):
    import statistics

    out = {}
    for dataset, phases in runs.items():
        med = {phase: statistics.median(r["images_per_sec"] for r in results) for phase, results in phases.items()}
        s = {"images_per_sec": med}
        # CPU time per image (all the phase's processes, in its window): the work each loader
        # does, which a busy machine disturbs far less than the rate
        cpu = {phase: {part: statistics.median(r["cpu_us_per_image"][part] for r in results)
                       for part in results[0]["cpu_us_per_image"]}
               for phase, results in phases.items() if results and "cpu_us_per_image" in results[0]}
        if cpu:
            s["cpu_us_per_image"] = {phase: dict(parts, total=sum(parts.values())) for phase, parts in cpu.items()}
        if "dataloader" in cpu and "tandem" in cpu and s["cpu_us_per_image"]["tandem"]["total"] > 0:
            # (a)'s CPU per image over (b)'s; none when a window was shorter than the clock's
            # tick (--tiny)
            s["cpu_ratio_dataloader_to_tandem"] = (s["cpu_us_per_image"]["dataloader"]["total"] /
                                                   s["cpu_us_per_image"]["tandem"]["total"])
        if med.get("dataloader") and "tandem" in med:
            s["ratio_tandem_to_dataloader"] = med["tandem"] / med["dataloader"]
            # each round's (b) over the same round's (a): the pair ran a minute apart
            s["ratio_tandem_to_dataloader_per_round"] = [
                b["images_per_sec"] / a["images_per_sec"] for a, b in zip(phases["dataloader"], phases["tandem"])]
        if med.get("grpc") and "tandem" in med:
            s["ratio_tandem_to_grpc"] = med["tandem"] / med["grpc"]
        if med.get("tandem_baseline") and "tandem" in med:
            s["ratio_tandem_to_baseline"] = med["tandem"] / med["tandem_baseline"]
        if dataset == "constant" and "tandem" in med:
            # what one sample costs the P processes together: P / rate
            s["us_per_sample_per_process"] = {p: 1e6 * ARGS.procs / r for p, r in med.items() if r}
        out[dataset] = s
    return out


def print_table(result):
    print(f"Python datasets: P = {result['procs']} processes, batch {result['batch_size']}, cores {result['cores']}, "
          f"{result['rounds']} round(s), load average {result['load_average_start'][0]:.2f} -> "
          f"{result['load_average_end'][0]:.2f}")
    print(f"{'dataset':<10}{'phase':<18}{'img/s (median)':>16}{'CPU us/img':>12}  {'all rounds (img/s)'}")
    for dataset, phases in result["runs"].items():
        s = result["summary"][dataset]
        for phase, runs in phases.items():
            rates = ", ".join(f"{r['images_per_sec']:.0f}" for r in runs)
            cpu = s.get("cpu_us_per_image", {}).get(phase)
            cpu = f"{cpu['total']:>12.0f}" if cpu else f"{'-':>12}"
            print(f"{dataset:<10}{LABELS[phase]:<18}{s['images_per_sec'][phase]:>16.1f}{cpu}  {rates}")
        for key, text in (("ratio_tandem_to_dataloader", "(b)/(a)"), ("ratio_tandem_to_grpc", "(b)/(c)"),
                          ("ratio_tandem_to_baseline", "(b)/(b0)"),
                          ("cpu_ratio_dataloader_to_tandem", "CPU (a)/(b)")):
            if s.get(key) is not None:
                rounds = ", ".join(f"{r:.2f}" for r in s.get(key + "_per_round", []))
                print(f"{'':<10}{text:<18}{s[key]:>16.2f}  {rounds}")
    print(f"target: (b)/(a) >= 0.9 on jpeg; raw results in {result['out']}")


ARGS = None


def main():
    global ARGS
    args = ARGS = parse_args()
    if args.phase:  # one measurement, in this (pinned) process
        import json

        print(json.dumps(PHASES[args.phase](args.dataset, args)))
        return 0

    sys.path.insert(0, BENCH_DIR)
    from _peers import ensure_modules

    ensure_modules("torch", "torchvision", "PIL", "grpc")
    import json

    cores = parse_cores(args.cores) if args.cores else sorted(os.sched_getaffinity(0))
    datasets = [d for d in args.datasets.split(",") if d]
    phases = [p for p in args.phases.split(",") if p]
    if args.baseline_worker and "tandem_baseline" not in phases:
        phases.insert(phases.index("tandem") if "tandem" in phases else len(phases), "tandem_baseline")
    if {"jpeg", "torchvision", "torchvision_split"} & set(datasets):
        ensure_jpegs(args)
    result = {"bench": "python_dataset", "machine": machine(), "procs": args.procs, "cores": cores,
              "batch_size": args.batch_size, "seconds": args.seconds, "rounds": args.rounds,
              "warmup_batches": args.warmup_batches, "tiny": args.tiny, "jpegs": os.path.abspath(args.jpegs),
              "load_average_start": os.getloadavg(), "out": args.out,
              "runs": {d: {p: [] for p in phases if not (p == "grpc" and d == "constant")} for d in datasets}}
    for r in range(args.rounds):
        for dataset in datasets:
            for phase in result["runs"][dataset]:
                print(f"round {r + 1}/{args.rounds}: {dataset}: {LABELS[phase]} ...", file=sys.stderr, flush=True)
                result["runs"][dataset][phase].append(run_phase(phase, dataset, args, cores))
    result["load_average_end"] = os.getloadavg()
    result["summary"] = summarize(result["runs"])
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
