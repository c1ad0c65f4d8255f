#!/usr/bin/python3
"""Train this folder's segmenter or detector with DDP under torchrun, on the CPU, fed by
`tandem worker` processes serving shapes.py (a Python dataset) through tandem.Feed:

    build/tandem worker --port 6201 --bind 127.0.0.1 --data python:$PWD/shapes.py:Detection &
    build/tandem worker --port 6202 --bind 127.0.0.1 --data python:$PWD/shapes.py:Detection &
    PYTHONPATH=build/python /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
        train_torchrun.py --task detection --workers 127.0.0.1:6201,127.0.0.1:6202 --release-workers

Each rank takes its own slice of every global batch (tandem.Feed's rank and world). A batch
maps field names to numpy arrays; they become torch tensors (no copy) in a dict, the same
dict tandem's C++ trainer hands the model's training_step, so one model trains either way.
Rank 0 prints the loss every --log-every steps, one JSON line at the end, and saves the
trained model as TorchScript (--save). See README.md here."""
import argparse
import json
import math
import os
import time
from typing import Dict

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel as DDP

import tandem

HERE = os.path.dirname(os.path.abspath(__file__))
DATASETS = {"segmentation": "Segmentation", "detection": "Detection"}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=sorted(DATASETS), default="segmentation")
    p.add_argument("--workers", required=True, help="data workers, host:port,...")
    p.add_argument("--data-args", default="{}", help="the dataset's keyword arguments: the workers' --data-args")
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch-size", type=int, default=16, help="samples per rank and step")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--log-every", type=int, default=10)
    p.add_argument("--save", default="", help="rank 0 writes the trained model here (TorchScript)")
    p.add_argument("--release-workers", action="store_true", help="rank 0 stops the workers at the end")
    return p.parse_args()


def make_model(task):
    if task == "segmentation":
        from segmentation_model import Segmenter
        return Segmenter()
    from detection_model import Detector
    return Detector()


class Step(nn.Module):
    """DDP synchronises gradients through forward: here forward is the model's training_step."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return self.model.training_step(batch)


def describe(batch):
    """The first batch's fields; a ragged field's rows per sample through batch.rows()."""
    text = ", ".join(f"{k} {v.dtype} {list(v.shape)}" for k, v in batch.items())
    if "boxes" in batch:
        text += f"; sample 0's boxes: {batch.rows('boxes')[0].tolist()}"
    return text


def main():
    args = parse_args()
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    data = f"python:{os.path.join(HERE, 'shapes.py')}:{DATASETS[args.task]}"
    feed = tandem.Feed(args.workers, rank=rank, world=world, batch_size=args.batch_size, steps=args.steps,
                       data=data, data_args=args.data_args)

    torch.manual_seed(0)  # DDP broadcasts rank 0's parameters anyway
    model = make_model(args.task)
    step_module = DDP(Step(model))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)

    losses, start = [], time.monotonic()
    for step, batch in enumerate(feed):
        if step == 0 and rank == 0:
            print(f"batch: {describe(batch)}", flush=True)
        loss = step_module({name: torch.from_numpy(array) for name, array in batch.items()})
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if rank == 0 and (step % args.log_every == 0 or step == args.steps - 1):
            print(f"step {step} loss {losses[-1]:.4f}", flush=True)
    seconds = time.monotonic() - start

    dist.barrier()  # every rank has its last batch: now the workers may go
    if rank == 0:
        if args.release_workers:
            tandem.shutdown_workers(args.workers)
        if args.save:
            torch.jit.script(model.eval()).save(args.save)
        print(json.dumps({"task": args.task, "steps": len(losses), "world": world, "losses": losses,
                          "finite": all(math.isfinite(v) for v in losses),
                          "samples_per_sec": len(losses) * args.batch_size * world / seconds}), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
