#!/usr/bin/python3
"""One DDP training script, two feeds: tandem (`tandem.torch.TandemDataset` over `tandem
worker` processes, as examples/python/train_ddp.py) or a torch DataLoader decoding the
same JPEGs in worker processes (torchvision: decode_jpeg + RandomResizedCrop + flip).
Everything after the batch arrives is the same: uint8 -> normalised float on the device,
a torchvision model under DDP, bf16 autocast and channels-last when asked, SGD.

    # under torchrun (one process per GPU; Gloo on CPU, NCCL with CUDA):
    python -m torch.distributed.run --standalone --nproc_per_node 1 bench/ddp_train.py \\
        --loader tandem --workers 127.0.0.1:6001,127.0.0.1:6002 --data imagefolder:/tmp/jpegs \\
        --pipeline 'decode,random_resized_crop(224),hflip' --image-size 224 --model resnet50 --json-out r.json
    python -m torch.distributed.run --standalone --nproc_per_node 1 bench/ddp_train.py \\
        --loader torch --data-dir /tmp/jpegs --num-workers 4 --image-size 224 --model resnet50 --json-out r.json

Rank 0 writes one JSON object (--json-out, and the last line of stdout): images/s over the
measured steps (after --warmup), data wait, and milliseconds per step by phase. On a GPU
the phases are CUDA-event intervals on the compute stream and data wait is the time the
GPU sat idle between steps (as tandem's trainer measures it); on a CPU they are host times
and data wait is the time spent waiting for the next batch.
"""
import argparse
import json
import math
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F

IMAGENET_MEAN = [0.485, 0.456, 0.406]
IMAGENET_STD = [0.229, 0.224, 0.225]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loader", choices=("tandem", "torch"), required=True)
    p.add_argument("--model", default="resnet50", help="a torchvision.models classifier")
    p.add_argument("--steps", type=int, default=50, help="measured steps")
    p.add_argument("--warmup", type=int, default=5, help="steps before the measured ones")
    p.add_argument("--batch-size", type=int, default=256, help="samples per rank and step")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--amp", choices=("none", "bf16"), default="none")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--json-out", help="where rank 0 writes its result")
    tandem = p.add_argument_group("--loader tandem")
    tandem.add_argument("--workers", help="data workers, host:port,...")
    tandem.add_argument("--data", help="tandem's --data; the workers must serve the same")
    tandem.add_argument("--pipeline", help="tandem's --pipeline; the workers must serve the same")
    p.add_argument("--data-args", help="keyword arguments (a JSON object) of a python:FILE:NAME dataset, for "
                                       "--data (tandem) or --dataset (torch)")
    tandem.add_argument("--local-threads", type=int, default=0, help="this process's own preprocessing threads")
    tandem.add_argument("--release-workers", action="store_true", help="rank 0 stops the workers at the end")
    torch_ = p.add_argument_group("--loader torch")
    torch_.add_argument("--data-dir", help="image folder (one subfolder per class) of JPEGs")
    torch_.add_argument("--dataset", help="python:FILE:NAME, the same dataset tandem's workers serve with "
                                          "--data python:FILE:NAME, run in the DataLoader's worker processes")
    torch_.add_argument("--num-workers", type=int, default=4, help="DataLoader worker processes")
    return p.parse_args()


class JpegFolder(torch.utils.data.Dataset):
    """Every *.jpg under root, label = index of its class folder; decode_jpeg +
    RandomResizedCrop + RandomHorizontalFlip -> uint8 CHW, as tandem's pipeline."""

    def __init__(self, root, size):
        import torchvision.io as io
        import torchvision.transforms as T
        self.io = io
        classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.items = []
        for label, c in enumerate(classes):
            for folder, dirs, files in sorted(os.walk(os.path.join(root, c))):
                dirs.sort()
                self.items += [(os.path.join(folder, f), label) for f in sorted(files)
                               if f.lower().endswith((".jpg", ".jpeg"))]
        if not self.items:
            raise SystemExit(f"ddp_train.py: no JPEGs under {root}")
        self.classes = len(classes)
        self.transform = T.Compose([T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip()])

    def __len__(self):
        return len(self.items)

    def __getitem__(self, i):
        path, label = self.items[i]
        image = self.io.decode_jpeg(self.io.read_file(path), mode=self.io.ImageReadMode.RGB)
        return self.transform(image), label


class EndlessSampler(torch.utils.data.Sampler):
    """A new seeded permutation each epoch, this rank's slice of it, `count` indices in
    all: no epoch boundary stalls the workers (tandem's feed has none either)."""

    def __init__(self, n, count, rank, world, seed=0):
        self.n, self.count, self.rank, self.world, self.seed = n, count, rank, world, seed

    def __len__(self):
        return self.count

    def __iter__(self):
        given, epoch = 0, 0
        while given < self.count:
            g = torch.Generator().manual_seed(self.seed + epoch)
            for i in torch.randperm(self.n, generator=g)[self.rank::self.world].tolist():
                if given == self.count:
                    return
                yield i
                given += 1
            epoch += 1


class PythonDataset(torch.utils.data.Dataset):
    """A python:FILE:NAME dataset as tandem's workers load it (NAME(**data_args)), its
    samples ({"image", "label"} dicts or (image, label) tuples of numpy arrays) as
    (uint8 tensor, label) pairs for the default collate."""

    def __init__(self, spec, data_args):
        import importlib.util
        kind, _, rest = spec.partition(":")
        path, _, name = rest.rpartition(":")
        if kind != "python" or not path or not name:
            raise SystemExit(f"ddp_train.py: --dataset {spec!r}: expected python:FILE:NAME")
        module_spec = importlib.util.spec_from_file_location("ddp_train_dataset", os.path.abspath(path))
        module = importlib.util.module_from_spec(module_spec)
        sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
        module_spec.loader.exec_module(module)
        self.inner = getattr(module, name)(**(json.loads(data_args) if data_args else {}))
        self.classes = getattr(self.inner, "num_classes", None) or len(getattr(self.inner, "classes", [])) or 10
        self.name = spec

    def __len__(self):
        return len(self.inner)

    def __getitem__(self, i):
        sample = self.inner[i]
        image, label = (sample["image"], sample["label"]) if isinstance(sample, dict) else sample
        # numpy (often a read-only, transposed view of a PIL image): one copy, as the collate's stack would make
        return (image if torch.is_tensor(image) else torch.tensor(image)), int(label)


def torch_loader(args, rank, world, total_steps, cuda):
    if args.dataset:
        ds = PythonDataset(args.dataset, args.data_args)
        what = f"{args.dataset} in the worker processes"
    else:
        ds = JpegFolder(args.data_dir, args.image_size)
        what = f"torchvision decode_jpeg + RandomResizedCrop({args.image_size}) + RandomHorizontalFlip"
    sampler = EndlessSampler(len(ds), total_steps * args.batch_size, rank, world)
    loader = torch.utils.data.DataLoader(ds, batch_size=args.batch_size, sampler=sampler, drop_last=True,
                                         num_workers=args.num_workers, pin_memory=cuda,
                                         persistent_workers=args.num_workers > 0)
    return loader, {"num_classes": ds.classes, "mean": IMAGENET_MEAN, "std": IMAGENET_STD,
                    "loader": f"torch DataLoader, {args.num_workers} worker processes, {what}"}


def tandem_loader(args, total_steps, cuda):
    from tandem.torch import TandemDataset
    settings = {"data": args.data}
    if not args.data.startswith("python:"):  # a Python dataset makes its own sizes
        settings["image_size"] = args.image_size
    if args.pipeline:
        settings["pipeline"] = args.pipeline
    if args.data_args:
        settings["data_args"] = args.data_args
    ds = TandemDataset(args.workers, batch_size=args.batch_size, steps=total_steps,
                       local_threads=args.local_threads, **settings)
    info = ds.dataset_info
    loader = torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=cuda)
    return loader, {"num_classes": info["num_classes"], "mean": info["mean"], "std": info["std"], "dataset": ds,
                    "loader": f"tandem.torch.TandemDataset ({args.workers}; {args.local_threads} local threads), "
                              f"DataLoader(batch_size=None, pin_memory={cuda})"}


class Phases:
    """Per-step intervals: CUDA events on the compute stream (GPU) or host clocks (CPU)."""

    names = ("host_to_device", "forward_backward", "optimizer")

    def __init__(self, cuda):
        self.cuda = cuda
        self.marks = []  # per step: [start, after h2d, after backward, after optimizer]
        self.waits = []  # host seconds blocked on the loader, per step

    def mark(self):
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    def between(self, a, b):
        return a.elapsed_time(b) / 1000 if self.cuda else b - a

    def summary(self, wall_s):
        if self.cuda:
            torch.cuda.synchronize()
        n = max(len(self.marks), 1)
        ms = {name: 1000 * sum(self.between(m[i], m[i + 1]) for m in self.marks) / n
              for i, name in enumerate(self.names)}
        if self.cuda:  # the GPU idle between one step's end and the next one's start
            idle = sum(self.between(a[-1], b[0]) for a, b in zip(self.marks, self.marks[1:]))
        else:
            idle = sum(self.waits)
        ms["data_wait"] = 1000 * idle / n
        ms["step"] = 1000 * wall_s / n
        return ms, 100 * idle / wall_s if wall_s > 0 else 0.0


def to_input(images, mean, std, device, channels_last, dtype):
    x = images.to(device, non_blocking=True)
    x = x.float().div_(255) if x.dtype == torch.uint8 else x.float()
    if mean:
        m = torch.tensor(mean, device=device).view(1, -1, 1, 1)
        x = (x - m) / torch.tensor(std, device=device).view(1, -1, 1, 1)
    x = x.to(dtype)
    return x.contiguous(memory_format=torch.channels_last) if channels_last else x


def main():
    args = parse_args()
    if args.loader == "tandem" and not (args.workers and args.data):
        raise SystemExit("ddp_train.py: --loader tandem needs --workers and --data")
    if args.loader == "torch" and not (args.data_dir or args.dataset):
        raise SystemExit("ddp_train.py: --loader torch needs --data-dir or --dataset")
    try:
        import torchvision
    except ImportError:
        raise SystemExit("ddp_train.py: needs torchvision: the model (torchvision.models) and, for --loader torch, "
                         "decode_jpeg and the transforms")
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    backend = "nccl" if cuda else "gloo"
    dist.init_process_group(backend)
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")
    total = args.warmup + args.steps
    if args.loader == "tandem":
        loader, info = tandem_loader(args, total, cuda)
    else:
        loader, info = torch_loader(args, rank, world, total, cuda)

    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=info["num_classes"]).to(device)
    if args.channels_last:
        model = model.to(memory_format=torch.channels_last)
    model = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    bf16 = args.amp == "bf16"
    in_dtype = torch.bfloat16 if bf16 and cuda else torch.float32
    phases = Phases(cuda)
    losses, step, start = [], 0, None
    it = iter(loader)
    while step < total:
        t0 = time.perf_counter()
        try:
            images, labels = next(it)
        except StopIteration:
            break
        waited = time.perf_counter() - t0
        if step == args.warmup:  # the measured window starts with this step
            if cuda:
                torch.cuda.synchronize()
            start = time.perf_counter()
        m = [phases.mark()]
        x = to_input(images, info["mean"], info["std"], device, args.channels_last, in_dtype)
        y = labels.to(device, non_blocking=True)
        m.append(phases.mark())
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        m.append(phases.mark())
        opt.step()
        m.append(phases.mark())
        losses.append(loss.detach())
        if step >= args.warmup:
            phases.marks.append(m)
            phases.waits.append(waited)
        step += 1
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - start if start is not None else 0.0
    measured = max(step - args.warmup, 0)
    step_ms, wait_pct = phases.summary(wall)
    loss_values = [v.item() for v in losses]
    dist.barrier()  # every rank has its last batch: now the workers may go
    if rank == 0:
        if args.release_workers and "dataset" in info:
            info["dataset"].shutdown_workers()
        result = {"loader": args.loader, "feed": info["loader"], "model": args.model, "batch_size": args.batch_size,
                  "image_size": args.image_size, "amp": args.amp, "channels_last": args.channels_last,
                  "world": world, "backend": backend, "device": str(device),
                  "gpu": torch.cuda.get_device_name(device) if cuda else None,
                  "torch": torch.__version__, "torchvision": torchvision.__version__,
                  "warmup_steps": args.warmup, "steps": measured,
                  "images_per_sec": measured * args.batch_size * world / wall if wall > 0 else 0.0,
                  "data_wait_pct": wait_pct, "step_ms": step_ms,
                  "first_loss": loss_values[0] if loss_values else None,
                  "final_loss": loss_values[-1] if loss_values else None,
                  "finite": all(math.isfinite(v) for v in loss_values)}
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(result, f, indent=1)
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()
    return 0 if measured == args.steps else 1


if __name__ == "__main__":
    sys.exit(main())
