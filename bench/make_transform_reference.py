#!/usr/bin/python3
"""Write tests/fixtures/transform_reference.json: torchvision's transforms on small uint8
images with fixed parameters, the reference tandem's transforms (src/data/augment/transforms.cc,
resample.cc, color.cc) are checked against.

Every case runs torchvision.transforms.functional on a uint8 CHW tensor (the tensor code
path, as torchvision.io.decode_jpeg + transforms use it):

  resize           F.resize(img, [h, w] or s, BILINEAR, antialias=True)
  resized_crop     F.resized_crop(img, top, left, h, w, [oh, ow], BILINEAR, antialias=True)
  center_crop      F.center_crop(img, [h, w])            (padding when larger)
  hflip            F.hflip(img)
  rotate           F.rotate(img, angle, NEAREST, fill=[0.0] * C)   (what RandomRotation passes)
  brightness, contrast, saturation, hue   F.adjust_*(img, factor)
  gaussian_blur    F.gaussian_blur(img, [k, k], [sigma, sigma])
  rrc_fallback     RandomResizedCrop.get_params(img, scale, ratio) with a scale no attempt can
                   meet, so the deterministic centre-crop fallback decides the box

Images are base64 of the raw bytes (CHW, row-major).

    bench/make_transform_reference.py [--out tests/fixtures/transform_reference.json]
"""
import base64
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import reference_args, write_reference  # noqa: E402

try:
    import torch  # noqa: F401
    import torchvision  # noqa: F401
except ImportError:
    sys.exit("make_transform_reference.py needs Debian's python3-torchvision: run it with /usr/bin/python3 "
             "(apt-get install python3-torchvision)")

import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
from torchvision.transforms import InterpolationMode  # noqa: E402

SEED = 20240612
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "transform_reference.json")


def make_input(gen, c, h, w):
    """A smooth gradient with texture: resampling sees both edges and flat areas."""
    y = torch.linspace(0, 1, h).view(1, h, 1)
    x = torch.linspace(0, 1, w).view(1, 1, w)
    base = torch.cat([x * 200 + y * 30, y * 180 + 40 * x, (1 - x) * 120 + y * 100][:c], 0) if c == 3 else x * 150 + y * 90
    noise = torch.randint(-40, 41, (c, h, w), generator=gen).float()
    return (base + noise).clamp(0, 255).round().to(torch.uint8)


def b64(t):
    return base64.b64encode(t.contiguous().numpy().tobytes()).decode()


def cases_for(name, img):
    c, h, w = img.shape
    out = []

    def add(op, params, result):
        assert result.dtype == torch.uint8
        out.append({"input": name, "op": op, "params": params, "shape": list(result.shape), "output": b64(result)})

    for size in ([h // 2, w // 2], [h * 2 + 1, w * 2 - 3], [h - 3, w + 7], [7, 5]):
        add("resize", {"height": size[0], "width": size[1]},
            F.resize(img, size, InterpolationMode.BILINEAR, antialias=True))
    add("resize_smaller_edge", {"size": 11}, F.resize(img, 11, InterpolationMode.BILINEAR, antialias=True))
    for top, left, bh, bw, oh, ow in ((2, 3, h - 5, w - 7, 9, 12), (1, 0, h // 3, w // 4, 16, 16), (0, 0, h, w, h, w)):
        add("resized_crop", {"top": top, "left": left, "height": bh, "width": bw, "out_height": oh, "out_width": ow},
            F.resized_crop(img, top, left, bh, bw, [oh, ow], InterpolationMode.BILINEAR, antialias=True))
    for ch, cw in ((h - 5, w - 8), (h - 4, w - 3), (h + 6, w + 5), (h + 3, 4)):
        add("center_crop", {"height": ch, "width": cw}, F.center_crop(img, [ch, cw]))
    add("hflip", {}, F.hflip(img))
    for angle in (30.0, -45.0, 90.0, 12.5):
        add("rotate", {"angle": angle}, F.rotate(img, angle, InterpolationMode.NEAREST, fill=[0.0] * c))
    for f in (0.6, 1.4):
        add("brightness", {"factor": f}, F.adjust_brightness(img, f))
        add("contrast", {"factor": f}, F.adjust_contrast(img, f))
        add("saturation", {"factor": f}, F.adjust_saturation(img, f))
    for f in (-0.3, 0.2, 0.5):
        add("hue", {"factor": f}, F.adjust_hue(img, f))
    for k, sigma in ((5, 1.3), (3, 0.7)):
        add("gaussian_blur", {"kernel_size": k, "sigma": sigma}, F.gaussian_blur(img, [k, k], [sigma, sigma]))
    for scale, ratio in (((2.0, 3.0), (3 / 4, 4 / 3)), ((2.0, 3.0), (2.0, 3.0)), ((2.0, 3.0), (0.2, 0.5))):
        i, j, bh, bw = T.RandomResizedCrop.get_params(img, list(scale), list(ratio))
        out.append({"input": name, "op": "rrc_fallback", "params": {"scale": scale, "ratio": ratio},
                    "box": [i, j, bh, bw]})
    return out


def main():
    args = reference_args(__doc__, DEFAULT_OUT)

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    inputs = {"rgb": make_input(gen, 3, 23, 31), "gray": make_input(gen, 1, 17, 14)}
    cases = []
    for name, img in inputs.items():
        cases += cases_for(name, img)

    doc = {
        "generator": f"torchvision {torchvision.__version__} / torch {torch.__version__}: "
                     "torchvision.transforms.functional on uint8 tensors; written by bench/make_transform_reference.py",
        "layout": "uint8, CHW, row-major, base64",
        "seed": SEED,
        "inputs": {name: {"shape": list(t.shape), "data": b64(t)} for name, t in inputs.items()},
    }
    write_reference(args.out, doc, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
