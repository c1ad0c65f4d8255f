#!/usr/bin/python3
"""Anchors beside tandem's ceiling on one GPU (issue 36, docs/benchmarks.md): what PyTorch
itself reaches on the same GPU, model and batch, with no input pipeline at all.

--mode eager: torchvision's MODEL in Python on device-resident random data (one batch,
    made once), channels-last and bf16 autocast when asked, SGD with momentum, as
    `tandem bench train` measures its ceiling: images/s over --steps after --warmup.
--mode compile: the same model through torch.compile (default mode, inductor); the
    compile time (the first steps) is reported apart from the measured steps.
--mode decode: torchvision.io.decode_jpeg on --device (cuda: the GPU's JPEG decoders
    through nvJPEG), batches of --batch-size encoded files at once (a list; one call per
    file where this torchvision takes no list): decoded images/s, every *.jpg under
    --data-dir read into memory first, so only the decode is timed.

    bench/gpu_anchors.py --mode eager --model resnet50 --batch-size 256 --image-size 224 \\
        --amp bf16 --channels-last [--json-out r.json]
    bench/gpu_anchors.py --mode decode --data-dir /tmp/jpegs --batch-size 256

Prints one JSON object (the last line of stdout; also --json-out). Without a GPU the model
modes run on the CPU (a check of the script, not an anchor), and --mode compile on a
PyTorch without torch.compile (1.x) exits 3 saying so.
"""
import argparse
import json
import sys
import time

import torch
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("eager", "compile", "decode"), required=True)
    p.add_argument("--model", default="resnet50", help="a torchvision.models classifier")
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--num-classes", type=int, default=1000)
    p.add_argument("--amp", choices=("none", "bf16"), default="none")
    p.add_argument("--channels-last", action="store_true")
    p.add_argument("--steps", type=int, default=30, help="measured steps (decode: measured batches)")
    p.add_argument("--warmup", type=int, default=10, help="steps before the measured ones (compile: its first)")
    p.add_argument("--data-dir", help="--mode decode: JPEGs (any folder of *.jpg)")
    p.add_argument("--device", default=None, help="--mode decode: cuda or cpu (default cuda when present)")
    p.add_argument("--json-out", help="also write the JSON object here")
    return p.parse_args()


def device_info(device):
    info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "device": str(device)}
    try:
        import torchvision
        info["torchvision"] = torchvision.__version__
    except ImportError:
        pass
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
    return info


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_anchor(args, device):
    import torchvision

    compiled = args.mode == "compile"
    if compiled and not hasattr(torch, "compile"):
        print(f"gpu_anchors.py: torch {torch.__version__} has no torch.compile (PyTorch 2.0 or later)",
              file=sys.stderr)
        sys.exit(3)
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(num_classes=args.num_classes).to(device)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format
    model = model.to(memory_format=fmt)
    x = torch.rand(args.batch_size, 3, args.image_size, args.image_size, device=device).contiguous(memory_format=fmt)
    y = torch.randint(0, args.num_classes, (args.batch_size,), device=device)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    bf16 = args.amp == "bf16"
    run = torch.compile(model) if compiled else model

    def step():
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(run(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    t0 = time.perf_counter()
    for _ in range(args.warmup):
        loss = step()
    sync(device)
    warmup_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    sync(device)
    wall = time.perf_counter() - t0
    return {"anchor": f"torchvision {args.model}, {'torch.compile' if compiled else 'eager'}",
            "model": args.model, "batch_size": args.batch_size, "image_size": args.image_size,
            "amp": args.amp, "channels_last": args.channels_last, "steps": args.steps, "warmup_steps": args.warmup,
            "warmup_s": warmup_s, "ms_per_step": 1000 * wall / args.steps,
            "images_per_sec": args.steps * args.batch_size / wall, "final_loss": loss.item()}


def decode_anchor(args, device):
    import torchvision.io as io
    from torchvision_jpeg import jpeg_files  # beside this file: every *.jpg, sorted

    if not args.data_dir:
        sys.exit("gpu_anchors.py: --mode decode needs --data-dir")
    files = jpeg_files(args.data_dir)
    if not files:
        sys.exit(f"gpu_anchors.py: no *.jpg under {args.data_dir}")
    data = [io.read_file(f) for f in files]
    n = min(args.batch_size, len(data))
    batches = [data[i:i + n] for i in range(0, len(data) - n + 1, n)]
    try:  # torchvision >= 0.19 decodes a list in one call (batched nvJPEG on CUDA)
        io.decode_jpeg(batches[0][:2], mode=io.ImageReadMode.RGB, device=device)
        batched = True
    except (TypeError, RuntimeError, ValueError):
        batched = False

    def decode(batch):
        if batched:
            return io.decode_jpeg(batch, mode=io.ImageReadMode.RGB, device=device)
        return [io.decode_jpeg(b, mode=io.ImageReadMode.RGB, device=device) for b in batch]

    for i in range(args.warmup):
        decode(batches[i % len(batches)])
    sync(device)
    t0 = time.perf_counter()
    images = 0
    for i in range(args.steps):
        out = decode(batches[i % len(batches)])
        images += len(out)
    sync(device)
    wall = time.perf_counter() - t0
    pixels = sum(t.shape[-1] * t.shape[-2] for t in out) / len(out)
    mean_kb = sum(d.numel() for d in data) / len(data) / 1024
    return {"anchor": f"torchvision.io.decode_jpeg on {device.type}" + (", batched" if batched else ", one call per file"),
            "batched": batched, "batch_size": n, "files": len(files), "mean_file_kb": mean_kb,
            "mean_megapixels": pixels / 1e6, "batches": args.steps, "images": images,
            "images_per_sec": images / wall, "ms_per_batch": 1000 * wall / args.steps,
            "cpu_threads": torch.get_num_threads()}


def main():
    args = parse_args()
    cuda = torch.cuda.is_available()
    if args.mode == "decode":
        device = torch.device(args.device or ("cuda" if cuda else "cpu"))
        result = decode_anchor(args, device)
    else:
        device = torch.device("cuda" if cuda else "cpu")
        if cuda:
            torch.backends.cudnn.benchmark = True
        result = train_anchor(args, device)
    result.update(mode=args.mode, **device_info(device))
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(result, f, indent=1)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
