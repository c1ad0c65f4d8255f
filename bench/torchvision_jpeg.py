#!/usr/bin/python3
"""torchvision's equivalent of tandem's JPEG pipeline on one core: every *.jpg/*.jpeg under
--data-dir (an image folder, read in sorted order and cycled), decoded and augmented back
to back for --seconds in one process with torch.set_num_threads(1); prints images/s.

--variant tensor (default): torchvision.io.decode_jpeg(read_file(path)) ->
    RandomResizedCrop(S, antialias=True) -> RandomHorizontalFlip(): uint8 CHW, as tandem.
--variant pil: the classic ImageFolder loader, PIL.Image.open(path).convert("RGB") ->
    RandomResizedCrop(S) -> RandomHorizontalFlip() -> PILToTensor(): uint8 CHW.
--recipe trivial: torchvision's classification reference recipe (presets.py,
    ClassificationPresetTrain with auto_augment_policy="ta_wide", random_erase_prob=0.1):
    TrivialAugmentWide() after the flip (on the tensor, or on the PIL image before
    PILToTensor), then RandomErasing(p=0.1) on the uint8 tensor. Default --recipe crop: none.

    bench/torchvision_jpeg.py --data-dir /tmp/tandem-jpegs [--variant pil] [--seconds 10] [--json]
"""
import argparse
import json
import os
import sys
import time

try:
    import torch
    import torchvision
    import torchvision.io as io
    import torchvision.transforms as T
except ImportError:
    sys.exit("torchvision_jpeg.py needs Debian's python3-torchvision: run it with /usr/bin/python3")


def jpeg_files(root):
    out = []
    for folder, dirs, files in sorted(os.walk(root, followlinks=True)):
        dirs.sort()
        out += [os.path.join(folder, f) for f in sorted(files) if f.lower().endswith((".jpg", ".jpeg"))]
    return out


def recipe_steps(recipe):
    """What the recipe adds after the flip (on the image) and after PILToTensor (on the tensor)."""
    if recipe == "trivial":
        return [T.TrivialAugmentWide()], [T.RandomErasing(p=0.1)]
    return [], []


def make_tensor_pipeline(size, recipe):
    augment, erase = recipe_steps(recipe)
    transform = T.Compose([T.RandomResizedCrop(size, antialias=True), T.RandomHorizontalFlip()] + augment + erase)

    def make(path):
        return transform(io.decode_jpeg(io.read_file(path), mode=io.ImageReadMode.RGB))

    return make


def make_pil_pipeline(size, recipe):
    from PIL import Image

    augment, erase = recipe_steps(recipe)
    transform = T.Compose([T.RandomResizedCrop(size), T.RandomHorizontalFlip()] + augment + [T.PILToTensor()] + erase)

    def make(path):
        with open(path, "rb") as f:
            return transform(Image.open(f).convert("RGB"))

    return make


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", required=True)
    p.add_argument("--variant", choices=("tensor", "pil"), default="tensor")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--warmup", type=float, default=1.0)
    p.add_argument("--image-size", type=int, default=224)
    p.add_argument("--recipe", choices=("crop", "trivial"), default="crop")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    files = jpeg_files(args.data_dir)
    if not files:
        sys.exit(f"torchvision_jpeg.py: no .jpg/.jpeg files under {args.data_dir}")
    torch.set_num_threads(1)
    torch.manual_seed(0)
    make_pipeline = make_tensor_pipeline if args.variant == "tensor" else make_pil_pipeline
    make = make_pipeline(args.image_size, args.recipe)

    i = 0
    start = time.monotonic()
    while time.monotonic() - start < args.warmup:
        make(files[i % len(files)])
        i += 1
    n = 0
    cpu0, t0 = time.thread_time(), time.monotonic()
    while True:
        out = make(files[i % len(files)])
        i += 1
        n += 1
        if time.monotonic() - t0 >= args.seconds:
            break
    wall, cpu = time.monotonic() - t0, time.thread_time() - cpu0
    assert out.dtype == torch.uint8 and tuple(out.shape) == (3, args.image_size, args.image_size)
    result = {"peer": f"torchvision-{args.variant}", "recipe": args.recipe, "images_per_sec_per_core": n / wall,
              "images_per_cpu_second": n / cpu, "images": n, "seconds": wall,
              "torch": torch.__version__, "torchvision": torchvision.__version__}
    if args.json:
        print(json.dumps(result))
    else:
        print(f"torchvision ({args.variant}): {n / wall:.1f} images/s on one core ({n / cpu:.1f} per CPU-second)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
