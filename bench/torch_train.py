#!/usr/bin/python3
"""The peer of `tandem bench train`: the same training step written in Python with
PyTorch (Debian's python3-torch, the same LibTorch 1.13 tandem builds against on
bookworm). A torchvision model, SGD with momentum, cross-entropy, one batch already in
memory reused every step (the loop's ceiling), --threads intra-op threads; prints
images/s and ms per step.

    bench/torch_train.py --model resnet18 --batch-size 32 --image-size 64 --steps 20 --json
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import ensure_modules  # noqa: E402

ensure_modules("torch", "torchvision")

import torch  # noqa: E402
import torchvision  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", default="resnet18", choices=["resnet18", "resnet50"])
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--image-size", type=int, default=64)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = getattr(torchvision.models, a.model)(num_classes=a.classes)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x = torch.randint(0, 256, (a.batch_size, 3, a.image_size, a.image_size), dtype=torch.uint8).float() / 255
    y = torch.randint(0, a.classes, (a.batch_size,))

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    loss.item()
    elapsed = time.perf_counter() - start
    result = {"bench": "torch_train", "torch": torch.__version__, "model": a.model, "batch_size": a.batch_size,
              "image_size": a.image_size, "threads": a.threads, "steps": a.steps,
              "images_per_sec": a.batch_size * a.steps / elapsed, "ms_per_step": 1000 * elapsed / a.steps}
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:<16}{v:.2f}" if isinstance(v, float) else f"{k:<16}{v}")


if __name__ == "__main__":
    main()
