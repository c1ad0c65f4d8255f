"""One script on every host of a heterogeneous SageMaker job, with AWS's PyTorch image and
tandem's wheel (docs/sagemaker.md, "With AWS's PyTorch image"). launch_job.py starts it.

The PyTorch estimator starts this script on every host of both instance groups:
- on the data group (ml.c5.*, no torchrun) tandem.serve() becomes a tandem data worker:
  it decodes and augments the "train" channel (FastFile), with tandem's C++ pipeline or a
  Python dataset (class_folders.py), and serves batches over gRPC until the trainers
  release it, then exits 0;
- on the GPU group torchrun (the estimator's torch_distributed) starts one rank per GPU;
  serve() returns there and each rank trains with DDP on NCCL, fed by every data host.
tandem's data settings are written once, as tandem- hyperparameters: serve() and the feed
both read them from hyperparameters.json. Rank 0 releases the data hosts at the end, so
every host exits and the job completes. SIGTERM (a spot interruption) ends the epoch's
loop; the last complete epoch's checkpoint is in /opt/ml/checkpoints (checkpoint_s3_uri)
and the next run resumes from it. A checkpoint of another job (another model or dataset)
is refused unless --resume-any is given.

Try it on one machine with the wheel installed, every host run as the toolkit runs it:
    python launch_job.py --simulate TRAIN_DIR CHECKPOINT_DIR TOKEN_DIR > job.json
    tandem simulate --job job.json
"""
import argparse
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

import tandem

# /opt/ml/checkpoints: SageMaker's local path for checkpoint_s3_uri (there is no variable
# for it; beside SM_MODEL_DIR, which `tandem simulate` points at each simulated host's root).
CHECKPOINT = os.path.join(os.path.dirname(os.environ.get("SM_MODEL_DIR", "/opt/ml/model")), "checkpoints",
                          "launcher.pt")
# The hyperparameters as the toolkit decoded them (SM_HPS): the data settings are tandem's.
HPS = json.loads(os.environ.get("SM_HPS", "{}"))


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--batch-size", type=int, default=256, help="samples per GPU and step")
    p.add_argument("--model", default="resnet50", help="a torchvision.models classifier")
    p.add_argument("--resume-any", default="False", help="True: resume a checkpoint of another model or dataset")
    # The toolkit passes every hyperparameter as --key value, tandem's (tandem-*) too: those
    # are read by tandem from hyperparameters.json, so they are accepted and left alone here.
    args, _ = p.parse_known_args()
    return args


def settings():
    """What only the script can say: image folders get tandem's C++ augmentation (its pipeline
    holds ( ), which the toolkit's shell line cannot carry as a hyperparameter); a Python
    dataset augments itself."""
    if HPS.get("tandem-data", "imagefolder") != "imagefolder":
        return {}
    size = int(HPS.get("tandem-image-size", 224))
    return {"pipeline": f"decode,random_resized_crop({size}),hflip"}


def start_ranks():
    if "RANK" not in os.environ:  # not under torchrun: one rank
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    return (torch.device("cuda", local_rank) if cuda else torch.device("cpu")), local_rank


def together(stop, ended, device):
    """(any rank was stopped, any rank's epoch ended), agreed by every rank before each step."""
    flags = torch.tensor([float(stop), float(ended)], device=device)
    dist.all_reduce(flags, op=dist.ReduceOp.MAX)
    return bool(flags[0].item()), bool(flags[1].item())


def resume(args, model, opt, fingerprint, device):
    """The first epoch to train: after the checkpoint's, when it is this job's."""
    if not os.path.exists(CHECKPOINT):
        return 0
    state = torch.load(CHECKPOINT, map_location=device)
    if state.get("fingerprint") != fingerprint and args.resume_any != "True":
        raise SystemExit(f"launcher: {CHECKPOINT} is a checkpoint of another job ({state.get('fingerprint')}), not "
                         f"of this one ({fingerprint}): give the job another checkpoint_s3_uri, delete it, or pass "
                         "the hyperparameter resume-any=True to train on from it")
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    return state["epoch"] + 1


def main():
    args = parse_args()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))  # a spot interruption, a stopped job
    tandem.serve(**settings())  # a data host serves here until released, then exits 0

    device, local_rank = start_ranks()
    rank = dist.get_rank()
    torch.manual_seed(0)  # the same initial weights every run (DDP also broadcasts rank 0's)
    ds = tandem.TandemDataset(batch_size=args.batch_size, wire_dtype="uint8", **settings())  # the data group's hosts
    info = ds.dataset_info
    model = getattr(torchvision.models, args.model)(num_classes=info["num_classes"]).to(device)
    model = DDP(model.to(memory_format=torch.channels_last), device_ids=[local_rank] if device.type == "cuda" else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    fingerprint = f"{args.model} on {info['name']} {info['fingerprint']}, {info['num_classes']} classes"
    first_epoch = resume(args, model, opt, fingerprint, device)
    if first_epoch >= args.epochs and rank == 0:
        print(f"launcher: {CHECKPOINT} is at epoch {first_epoch} of {args.epochs}: training is complete, nothing to "
              "train; writing the model (raise --epochs to train on)", flush=True)
    mean = torch.tensor(info["mean"] or [0.0] * 3, device=device).view(1, -1, 1, 1)
    std = torch.tensor(info["std"] or [1.0] * 3, device=device).view(1, -1, 1, 1)

    stopped = False
    for epoch in range(first_epoch, args.epochs):
        ds.set_epoch(epoch)
        losses = []
        batches = iter(torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=device.type == "cuda"))
        while True:
            batch = next(batches, None)  # None: the epoch's last step was taken, or the feed saw SIGTERM
            stopped, ended = together(bool(stop), batch is None, device)
            if stopped or ended:  # every rank leaves at the same step: none waits in an allreduce alone
                break
            images, labels = batch
            x = images.to(device, non_blocking=True).float().div_(255).sub_(mean).div_(std)
            x = x.contiguous(memory_format=torch.channels_last)
            y = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            ds.log(loss=losses[-1])  # tandem's metric lines (loss=..., metric_definitions), summary and report
        if stopped:  # mid-epoch: the last complete epoch's checkpoint stands
            break
        if rank == 0:
            print(f"epoch={epoch} loss={sum(losses) / max(len(losses), 1):.4f} steps={len(losses)}", flush=True)
            os.makedirs(os.path.dirname(CHECKPOINT), exist_ok=True)
            state = {"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch,
                     "fingerprint": fingerprint}
            torch.save(state, CHECKPOINT + ".tmp")
            os.replace(CHECKPOINT + ".tmp", CHECKPOINT)
    if stopped:
        print(f"launcher: rank {rank} stopped (SIGTERM); the next run resumes from {CHECKPOINT}", flush=True)
        sys.exit(75)  # interrupted, resumable
    dist.barrier()
    if rank == 0:
        ds.shutdown_workers()  # every host of the data group exits 0: the job completes
        torch.save(model.module.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "."), "model.pt"))
        print(f"launcher: model written to {os.environ.get('SM_MODEL_DIR', '.')}/model.pt", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
