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

The AutoAugment family (on "soft", a low-contrast image, and "gray"; equalize and autocontrast
also on "large_gray", large enough for equalize's histogram step to be above 0):

  aa_op            autoaugment._apply_op(img, name, magnitude, interpolation, fill=None): every
                   operation the policies draw from, at fixed magnitudes
  trivial, rand, auto, augmix
                   TrivialAugmentWide / RandAugment / AutoAugment / AugMix.forward with their
                   random draws forced (torch.randint, torch.rand and AugMix._sample_dirichlet
                   replaced by scripted values, recorded in the case): the whole policy path,
                   magnitude tables and signs included
  erase            F.erase(img, top, left, h, w, value)

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


class Scripted:
    """torch.randint and torch.rand answering from lists, for forcing a policy's draws."""

    def __init__(self, ints, floats=()):
        self.ints, self.floats = list(ints), list(floats)

    def __enter__(self):
        self.randint, self.rand = torch.randint, torch.rand

        def randint(*args, size=None, **kwargs):
            shape = size if size is not None else args[-1]
            n = int(torch.Size(shape).numel())
            values, self.ints = self.ints[:n], self.ints[n:]
            assert len(values) == n, "script ran out of ints"
            return torch.tensor(values, dtype=torch.long).view(shape)

        def rand(shape, **kwargs):
            n = int(torch.Size(shape).numel())
            values, self.floats = self.floats[:n], self.floats[n:]
            return torch.tensor(values, dtype=torch.float32).view(shape)

        torch.randint, torch.rand = randint, rand
        return self

    def __exit__(self, *exc):
        torch.randint, torch.rand = self.randint, self.rand
        assert not self.ints and not self.floats, "script not used up"


AA_OPS = (("Identity", (0.0,)), ("ShearX", (0.3, -0.99)), ("ShearY", (0.3, -0.99)), ("TranslateX", (5.7, -12.0)),
          ("TranslateY", (5.7, -12.0)), ("Rotate", (30.0, -135.0)), ("Brightness", (0.5, -0.7)),
          ("Color", (0.9, -0.99)), ("Contrast", (0.33, -0.9)), ("Sharpness", (0.9, -0.66)),
          ("Posterize", (2.0, 5.0, 8.0)), ("Solarize", (127.5, 0.0, 255.0)), ("AutoContrast", (0.0,)),
          ("Equalize", (0.0,)), ("Invert", (0.0,)))
BILINEAR_OPS = (("ShearX", 0.3), ("ShearY", -0.2), ("TranslateX", -3.0), ("Rotate", 17.5))


def signed_ops(meta):
    return {name for name, (_, signed) in meta.items() if signed}


def autoaugment_cases(name, img):
    """_apply_op at fixed magnitudes, and each policy with its draws forced."""
    from torchvision.transforms import autoaugment as A

    out = []

    def add(op, params, result):
        out.append({"input": name, "op": op, "params": params, "shape": list(result.shape), "output": b64(result)})

    full = name == "soft"  # the gray image gets the first magnitude of each
    for op, magnitudes in AA_OPS:
        for m in magnitudes if full else magnitudes[:1]:
            add("aa_op", {"name": op, "magnitude": m, "interpolation": "nearest"},
                A._apply_op(img, op, m, InterpolationMode.NEAREST, None))
    for op, m in BILINEAR_OPS if full else BILINEAR_OPS[:1]:
        add("aa_op", {"name": op, "magnitude": m, "interpolation": "bilinear"},
            A._apply_op(img, op, m, InterpolationMode.BILINEAR, None))
    if not full:
        return out
    out += policy_cases(name, img, A)
    for top, left, h, w, v in ((2, 3, 5, 7, 0), (0, 9, 14, 4, 200)):
        add("erase", {"top": top, "left": left, "height": h, "width": w, "value": v},
            F.erase(img, top, left, h, w, torch.tensor([v], dtype=torch.uint8)[:, None, None]))
    return out


def equalize_cases(name, img):
    from torchvision.transforms import autoaugment as A

    out = []
    for op in ("Equalize", "AutoContrast"):
        result = A._apply_op(img, op, 0.0, InterpolationMode.NEAREST, None)
        assert op != "Equalize" or not torch.equal(result, img), "equalize left the image as it was"
        out.append({"input": name, "op": "aa_op", "params": {"name": op, "magnitude": 0.0, "interpolation": "nearest"},
                    "shape": list(result.shape), "output": b64(result)})
    return out


def policy_cases(name, img, A):
    out = []

    def add(op, params, result):
        out.append({"input": name, "op": op, "params": params, "shape": list(result.shape), "output": b64(result)})

    trivial = A.TrivialAugmentWide()
    space = list(trivial._augmentation_space(31).items())
    for op_index, bin_, negate in ((1, 30, 1), (3, 17, 0), (4, 31 - 1, 1), (5, 12, 1), (6, 3, 0), (9, 25, 1),
                                   (10, 29, 0), (11, 7, 0), (12, 0, 0), (13, 0, 0)):
        op, (mags, signed) = space[op_index]
        ints = [op_index] + ([bin_] if mags.ndim > 0 else []) + ([negate] if signed else [])
        with Scripted(ints):
            result = trivial(img)
        add("trivial", {"op_index": op_index, "bin": bin_, "negate": negate}, result)

    rand = A.RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31)
    rspace = list(rand._augmentation_space(31, (img.shape[-2], img.shape[-1])).items())
    for ops in (((3, 1), (8, 0)), ((10, 0), (2, 1)), ((0, 0), (4, 0))):
        ints = []
        for op_index, negate in ops:
            ints += [op_index] + ([negate] if rspace[op_index][1][1] else [])
        with Scripted(ints):
            result = rand(img)
        add("rand", {"num_ops": 2, "magnitude": 9, "num_magnitude_bins": 31, "ops": [list(o) for o in ops]}, result)

    for policy, sub, probs, signs in (("imagenet", 0, (0.1, 0.5), (0, 1)), ("imagenet", 18, (0.3, 0.95), (1, 0)),
                                      ("cifar10", 3, (0.4, 0.2), (0, 0)), ("svhn", 21, (0.5, 0.75), (1, 1))):
        auto = A.AutoAugment(A.AutoAugmentPolicy(policy))
        with Scripted([sub] + list(signs), probs):
            result = auto(img)
        add("auto", {"policy": policy, "sub_policy": sub, "probs": list(probs), "signs": list(signs)}, result)

    out += augmix_cases(name, img, A)
    return out


def augmix_cases(name, img, A):
    out = []
    for m, d, chains in (((0.3, 0.7), (0.25, 0.75), (((0, 2, 1), (7, 0, 0)), ((4, 1, 0),))),
                         ((0.55, 0.45), (0.6, 0.4), (((9, 2, 0),), ((3, 0, 1), (5, 1, 0), (12, 2, 1))))):
        mix = A.AugMix(severity=3, mixture_width=2, chain_depth=-1, alpha=1.0)
        meta = list(mix._augmentation_space(10, (img.shape[-2], img.shape[-1])).items())
        draws = iter((torch.tensor([list(m)]), torch.tensor([list(d)])))
        mix._sample_dirichlet = lambda params: next(draws)
        ints = []
        for chain in chains:
            ints.append(len(chain))
            for op_index, bin_, negate in chain:
                mags, signed = meta[op_index][1]
                ints += [op_index] + ([bin_] if mags.ndim > 0 else []) + ([negate] if signed else [])
        with Scripted(ints):
            result = mix(img)
        out.append({"input": name, "op": "augmix", "params": {"m": list(m), "d": list(d),
                    "chains": [[list(o) for o in c] for c in chains]},
                    "shape": list(result.shape), "output": b64(result)})
    return out


def main():
    args = reference_args(__doc__, DEFAULT_OUT)

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    inputs = {"rgb": make_input(gen, 3, 23, 31), "gray": make_input(gen, 1, 17, 14)}
    cases = []
    for name, img in inputs.items():
        cases += cases_for(name, img)
    # Low contrast (values in about [40, 200]) so that autocontrast and equalize have work.
    inputs["soft"] = (make_input(gen, 3, 14, 17).float() * 0.6 + 40).round().to(torch.uint8)
    for name in ("soft", "gray"):
        cases += autoaugment_cases(name, inputs[name])
    # Equalize keeps a channel of fewer than 256 pixels (its histogram step is 0): a larger one.
    inputs["large_gray"] = (make_input(gen, 1, 40, 64).float() * 0.5 + 60).round().to(torch.uint8)
    cases += equalize_cases("large_gray", inputs["large_gray"])

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
