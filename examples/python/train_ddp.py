#!/usr/bin/python3
"""Train a torchvision model with DDP under torchrun or `tandem launch`, fed by `tandem worker` processes.

On a (simulated) heterogeneous cluster, one command: the workers, the data settings and
the job's name come from the environment `tandem launch` gives every rank:

    PYTHONPATH=build/python build/tandem simulate --trainer-hosts 2 --procs-per-host 2 \
        --image-size 32 --batch-size 16 --steps 40 -- /usr/bin/python3 examples/python/train_ddp.py

Under torchrun, name them:

    build/tandem worker --port 6001 --bind 127.0.0.1 --data synthetic --image-size 32 &
    build/tandem worker --port 6002 --bind 127.0.0.1 --data synthetic --image-size 32 &
    PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
        examples/python/train_ddp.py --workers 127.0.0.1:6001,127.0.0.1:6002 --steps 100 \\
        --data synthetic --image-size 32 --release-workers

Every rank pulls its own slice of each global batch from every worker (tandem.torch.
TandemDataset reads RANK and WORLD_SIZE); the script is an ordinary DDP loop. Gloo on
CPU, NCCL with CUDA. Rank 0 prints one JSON line at the end. See README.md here.

Each of --workers, --data, --image-size, --batch-size and --steps not given comes from
`tandem launch`'s environment (TANDEM_WORKERS, TANDEM_SETTINGS), else its default.
"""
import argparse
import json
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP

from tandem.torch import TandemDataset


# What `tandem launch` says when the script does not: (argument, TANDEM_SETTINGS key, default).
LAUNCHER_DEFAULTS = [("data", "data", "synthetic"), ("image_size", "image-size", 32),
                     ("batch_size", "batch-size", 64), ("steps", "steps", 100)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", default=os.environ.get("TANDEM_WORKERS"),
                   help="data workers, host:port,... (default: $TANDEM_WORKERS, set by tandem launch)")
    p.add_argument("--model", default="resnet18", help="a torchvision.models classifier, or 'small' (one linear layer over a 4x4 grid)")
    p.add_argument("--steps", type=int)
    p.add_argument("--batch-size", type=int, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--data", help="tandem's --data; the workers must serve the same")
    p.add_argument("--image-size", type=int)
    p.add_argument("--local-threads", type=int, default=0, help="this process's own preprocessing threads")
    p.add_argument("--release-workers", action="store_true", help="rank 0 stops the workers at the end")
    args = p.parse_args()
    if args.workers is None:
        p.error("no data workers: give --workers, or run under `tandem launch` (which sets TANDEM_WORKERS)")
    given = json.loads(os.environ.get("TANDEM_SETTINGS") or "{}")
    for name, key, default in LAUNCHER_DEFAULTS:
        if getattr(args, name) is None:
            setattr(args, name, type(default)(given.get(key, default)))
    return args


def make_model(name, num_classes):
    if name == "small":
        # Each cell of a 4x4 grid averaged, then one linear layer: enough for --data synthetic
        # (a bright square in the class's cell), quick to import and train in a test.
        return torch.nn.Sequential(torch.nn.AdaptiveAvgPool2d(4), torch.nn.Flatten(), torch.nn.Linear(3 * 16, num_classes))
    import torchvision
    return getattr(torchvision.models, name)(num_classes=num_classes)


def to_float(images, mean, std, device):
    """uint8 (values x 255) or float batches -> normalised float32 on `device`."""
    x = images.to(device, non_blocking=True)
    x = x.float().div_(255) if x.dtype == torch.uint8 else x.float()
    if mean:
        m = torch.tensor(mean, device=device).view(1, -1, 1, 1)
        s = torch.tensor(std, device=device).view(1, -1, 1, 1)
        x = (x - m) / s
    return x


def main():
    args = parse_args()
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")

    job = os.environ.get("TANDEM_JOB_NAME")  # the job name tandem launch's workers check
    ds = TandemDataset(args.workers, batch_size=args.batch_size, steps=args.steps, data=args.data,
                       image_size=args.image_size, local_threads=args.local_threads,
                       **({"job_name": job} if job else {}))
    info = ds.dataset_info
    loader = torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=cuda)

    torch.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway
    model = make_model(args.model, info["num_classes"]).to(device)
    model = DDP(model, device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    losses, start = [], time.monotonic()
    for step, (images, labels) in enumerate(loader):
        x = to_float(images, info["mean"], info["std"], device)
        y = labels.to(device, non_blocking=True)
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        ds.log(loss=losses[-1], lr=opt.param_groups[0]["lr"])  # tandem's metric lines, metrics.jsonl, summary
        if rank == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(f"step {step} loss {losses[-1]:.4f}", flush=True)
    seconds = time.monotonic() - start

    dist.barrier()  # every rank has its last batch: now the workers may go
    if rank == 0:
        if args.release_workers:
            ds.shutdown_workers()
        print(json.dumps({"steps": len(losses), "world": world, "first_loss": losses[0], "final_loss": losses[-1],
                          "finite": all(math.isfinite(v) for v in losses),
                          "samples_per_sec": len(losses) * args.batch_size * world / seconds}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
