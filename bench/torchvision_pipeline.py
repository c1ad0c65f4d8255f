#!/usr/bin/python3
"""torchvision on one core: one process, torch.set_num_threads(1), making samples
back to back for --seconds; prints images/s per core.

--pipeline blur (default), "blur-benchmark" sample i: torch.rand(3, S, S) from a
    generator seeded with i, then 10 x torchvision.transforms.GaussianBlur(
    kernel_size=11, sigma=(0.1, 2.0)), each application drawing its own sigma.
--pipeline crop --data-dir DIR: read a JPEG file from DIR (cycling through its
    *.jpg / *.jpeg), decode it (torchvision.io.decode_jpeg), RandomResizedCrop(S),
    RandomHorizontalFlip, convert to float32 in [0, 1].

    bench/torchvision_pipeline.py --seconds 20 --json
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
import torchvision.transforms as T  # noqa: E402


def blur_pipeline(image_size):
    blurs = T.Compose([T.GaussianBlur(kernel_size=11, sigma=(0.1, 2.0)) for _ in range(10)])

    def make(i):
        g = torch.Generator().manual_seed(i)
        return blurs(torch.rand(3, image_size, image_size, generator=g)), i % 10

    return make


def crop_pipeline(image_size, data_dir):
    import torchvision.io as io

    files = sorted(
        os.path.join(data_dir, f) for f in os.listdir(data_dir) if f.lower().endswith((".jpg", ".jpeg"))
    )
    if not files:
        sys.exit(f"torchvision_pipeline: no *.jpg / *.jpeg files in {data_dir}")
    crop = T.RandomResizedCrop(image_size, antialias=True)
    flip = T.RandomHorizontalFlip()

    def make(i):
        data = io.read_file(files[i % len(files)])
        img = io.decode_jpeg(data, mode=io.ImageReadMode.RGB)
        img = flip(crop(img))
        return img.to(torch.float32).div_(255.0), i % 10

    return make


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pipeline", choices=("blur", "crop"), default="blur")
    p.add_argument("--data-dir", help="JPEG files for --pipeline crop")
    p.add_argument("--seconds", type=float, default=20.0, help="measured window")
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    args = p.parse_args()
    if args.pipeline == "crop" and not args.data_dir:
        p.error("--pipeline crop needs --data-dir")
    if args.image_size < 11 and args.pipeline == "blur":
        p.error("--image-size must be >= 11 for the 11x11 blur")

    torch.set_num_threads(1)
    make = blur_pipeline(args.image_size) if args.pipeline == "blur" else crop_pipeline(args.image_size, args.data_dir)

    i = 0
    start = time.monotonic()
    while time.monotonic() - start < args.warmup:
        make(i)
        i += 1
    n = 0
    t0 = time.monotonic()
    while True:
        make(i)
        i += 1
        n += 1
        elapsed = time.monotonic() - t0
        if elapsed >= args.seconds:
            break

    rate = n / elapsed
    result = {
        "peer": "torchvision",
        "pipeline": args.pipeline,
        "images_per_sec_per_core": rate,
        "image_size": args.image_size,
        "dtype": "float32",
        "threads": 1,
        "seconds": elapsed,
        "images": n,
        "torch": torch.__version__,
        "torchvision": __import__("torchvision").__version__,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"torchvision ({args.pipeline}): {rate:.2f} images/s per core "
              f"({n} images in {elapsed:.1f} s, {args.image_size}x{args.image_size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
