"""One script on every host of a heterogeneous SageMaker job, with AWS's PyTorch image and
tandem's wheel (docs/sagemaker.md, "With AWS's PyTorch image").

The PyTorch estimator starts this script on every host of both instance groups:
- on the data group (ml.c5.*, no distribution) tandem.serve() becomes a tandem data
  worker: it decodes and augments the "train" channel (FastFile) and serves batches
  over gRPC until the trainers release it, then exits 0;
- on the GPU group torchrun (the estimator's torch_distributed) starts one rank per GPU;
  serve() returns there and each rank trains with DDP on NCCL, fed by every data host.
Rank 0 releases the data hosts at the end, so every host exits and the job completes.
SIGTERM (a spot interruption) reaches the ranks: the step's checkpoint goes to
/opt/ml/checkpoints (checkpoint_s3_uri) and the next run resumes from it.

Try it on one machine with the wheel installed (tests/python/one_script.py is the
numpy twin that CI runs):
    tandem simulate --every-host --worker-hosts 2 --image-size 32 -- \
        python3 launcher.py --epochs 1 --data synthetic --image-size 32 --model resnet18 --batch-size 128
"""
import argparse
import os
import signal

import torch
import torch.distributed as dist
import torch.nn.functional as F
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

import tandem

CHECKPOINT = os.path.join(os.environ.get("SM_CHECKPOINT_DIR", "/opt/ml/checkpoints"), "launcher.pt")


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=90)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--batch-size", type=int, default=256, help="samples per GPU and step")
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--data", default="imagefolder", help="tandem's --data: imagefolder reads the train channel")
    p.add_argument("--model", default="resnet50")
    # The toolkit passes every hyperparameter as --key value: tandem's (tandem-*) are read
    # by tandem from hyperparameters.json, so they are accepted and left alone here.
    args, _ = p.parse_known_args()
    return args


def main():
    args = parse_args()
    # The data both sides agree on: the workers make it, the feed checks it.
    settings = dict(data=args.data, image_size=args.image_size, pipeline="randomresizedcrop,flip")
    tandem.serve(**settings)  # a data host serves here until released, then exits 0

    if "RANK" not in os.environ:  # not under torchrun (tandem simulate --every-host): one rank
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT="29531")
    cuda = torch.cuda.is_available()
    local_rank = int(os.environ.get("LOCAL_RANK", 0))
    if cuda:
        torch.cuda.set_device(local_rank)
    dist.init_process_group("nccl" if cuda else "gloo")
    rank = dist.get_rank()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")

    ds = tandem.TandemDataset(batch_size=args.batch_size, wire_dtype="uint8", **settings)  # workers: the data group
    info = ds.dataset_info
    model = getattr(torchvision.models, args.model)(num_classes=info["num_classes"]).to(device)
    model = DDP(model.to(memory_format=torch.channels_last), device_ids=[local_rank] if cuda else None)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9, weight_decay=5e-5)
    first_epoch = 0
    if os.path.exists(CHECKPOINT):  # a spot restart: resume where the last run stopped
        state = torch.load(CHECKPOINT, map_location=device)
        model.module.load_state_dict(state["model"])
        opt.load_state_dict(state["opt"])
        first_epoch = state["epoch"] + 1
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    mean = torch.tensor(info["mean"] or [0.0] * 3, device=device).view(1, -1, 1, 1)
    std = torch.tensor(info["std"] or [1.0] * 3, device=device).view(1, -1, 1, 1)

    for epoch in range(first_epoch, args.epochs):
        ds.set_epoch(epoch)
        for step, (images, labels) in enumerate(torch.utils.data.DataLoader(ds, batch_size=None, pin_memory=cuda)):
            x = images.to(device, non_blocking=True).float().div_(255).sub_(mean).div_(std)
            x = x.contiguous(memory_format=torch.channels_last)
            y = labels.to(device, non_blocking=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
                loss = F.cross_entropy(model(x), y, label_smoothing=0.1)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if rank == 0 and step % 50 == 0:
                print(f"epoch={epoch} step={step} loss={loss.item():.4f}", flush=True)  # metric_definitions
            if stop:
                break
        if rank == 0:
            os.makedirs(os.path.dirname(CHECKPOINT), exist_ok=True)
            torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch}, CHECKPOINT)
        if stop:
            break
    dist.barrier()
    if rank == 0:
        if not stop:
            ds.shutdown_workers()  # every host of the data group exits 0: the job completes
            torch.save(model.module.state_dict(), os.path.join(os.environ.get("SM_MODEL_DIR", "."), "model.pt"))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
