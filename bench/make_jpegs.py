#!/usr/bin/python3
"""Write ImageNet-like JPEGs for the JPEG pipeline benchmark: 500x375 (and a few
375x500) photographic-looking RGB images, 4:2:0 chroma, quality 90, about 110 KB each,
in an image-folder layout (one subfolder per class).

Content is deterministic (numpy seeded by --seed) and has the statistics of photographs
where it matters for decoding cost: 1/f ("pink") noise in luminance and, weaker, in colour
(natural images have a 1/f amplitude spectrum), plus random filled ellipses and
rectangles for hard edges. --texture scales the noise and so the entropy-coded size,
which is what a JPEG costs to decode.

    bench/make_jpegs.py --out /tmp/tandem-jpegs [--count 256] [--classes 4] [--seed 0]
"""
import argparse
import os
import sys

import numpy as np
from PIL import Image, ImageDraw


def pink(rng, h, w, alpha):
    """Unit-variance noise with amplitude spectrum 1 / f^alpha."""
    fy = np.fft.fftfreq(h)[:, None]
    fx = np.fft.rfftfreq(w)[None, :]
    f = np.sqrt(fx ** 2 + fy ** 2)
    f[0, 0] = 1
    spectrum = (rng.normal(size=f.shape) + 1j * rng.normal(size=f.shape)) / f ** alpha
    spectrum[0, 0] = 0
    x = np.fft.irfft2(spectrum, s=(h, w))
    return x / x.std()


def make_image(rng, w, h, texture):
    lum = pink(rng, h, w, 1.0) * texture
    u, v = (pink(rng, h, w, 1.3) * texture * 0.5 for _ in range(2))
    base = rng.uniform(60, 190, size=3)
    rgb = np.stack([base[0] + lum + u, base[1] + lum - 0.5 * u - 0.5 * v, base[2] + lum + v], -1)
    pil = Image.fromarray(np.clip(rgb, 0, 255).astype(np.uint8))
    draw = ImageDraw.Draw(pil)
    for _ in range(int(rng.integers(3, 8))):
        x0, y0 = int(rng.integers(0, w)), int(rng.integers(0, h))
        x1, y1 = x0 + int(rng.integers(20, w // 2)), y0 + int(rng.integers(20, h // 2))
        colour = tuple(int(c) for c in rng.integers(0, 256, size=3))
        (draw.ellipse if rng.random() < 0.5 else draw.rectangle)([x0, y0, x1, y1], fill=colour)
    # the shapes get the texture too, as objects in photos have it
    arr = np.asarray(pil, dtype=np.float32) + (pink(rng, h, w, 1.0) * texture * 0.6)[..., None]
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=256)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--texture", type=float, default=44.0, help="noise sigma; sets the file size")
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    total = 0
    for i in range(args.count):
        w, h = (375, 500) if i % 8 == 7 else (500, 375)
        folder = os.path.join(args.out, f"class{i % args.classes:03d}")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"img{i:05d}.jpg")
        make_image(rng, w, h, args.texture).save(path, quality=args.quality, subsampling="4:2:0")
        total += os.path.getsize(path)
    print(f"wrote {args.count} JPEGs to {args.out}: mean {total / args.count / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
