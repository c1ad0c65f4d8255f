#!/usr/bin/python3
"""Write tests/fixtures/blur_reference.json: torchvision's Gaussian blur on a few small
images, the reference a C++ blur is checked against.

For each (shape, sigma) case: the input (torch.rand from a seeded torch.Generator, float32,
C x H x W, flattened row-major), the output of
torchvision.transforms.functional.gaussian_blur(img, kernel_size=[11, 11], sigma=[s, s])
(float32; reflect padding of kernel_size // 2, then a 2-D convolution with the outer product
of the two 1-D kernels), and the 1-D kernel torchvision builds (_get_gaussian_kernel1d,
float32). Numbers are the float32 values written as Python floats (exact).

    bench/make_blur_reference.py [--out tests/fixtures/blur_reference.json]
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _peers import ensure_modules, reference_args, write_reference  # noqa: E402

ensure_modules("torch", "torchvision")

import torch  # noqa: E402
import torchvision  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402

try:
    from torchvision.transforms import _functional_tensor as F_t  # torchvision >= 0.15
    KERNEL_FN = "torchvision.transforms._functional_tensor._get_gaussian_kernel1d"
except ImportError:
    from torchvision.transforms import functional_tensor as F_t  # torchvision 0.14
    KERNEL_FN = "torchvision.transforms.functional_tensor._get_gaussian_kernel1d"

SHAPES = [(3, 16, 16), (3, 13, 21)]
SIGMAS = [0.1, 0.5, 1.3, 2.0]
KERNEL_SIZE = 11
SEED = 20240611

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_OUT = os.path.join(REPO, "tests", "fixtures", "blur_reference.json")


def flat(t):
    return [float(v) for v in t.reshape(-1).tolist()]


def main():
    args = reference_args(__doc__, DEFAULT_OUT)

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(SEED)
    inputs = {shape: torch.rand(*shape, generator=gen, dtype=torch.float32) for shape in SHAPES}

    cases = []
    for shape in SHAPES:
        img = inputs[shape]
        for sigma in SIGMAS:
            out = F.gaussian_blur(img, kernel_size=[KERNEL_SIZE, KERNEL_SIZE], sigma=[sigma, sigma])
            assert out.dtype == torch.float32 and tuple(out.shape) == shape
            kernel = F_t._get_gaussian_kernel1d(KERNEL_SIZE, sigma)
            cases.append({
                "shape": list(shape),
                "sigma": sigma,
                "kernel_size": KERNEL_SIZE,
                "input": flat(img),
                "output": flat(out),
                "kernel1d": flat(kernel),
            })

    doc_head = {
        "generator": f"torchvision {torchvision.__version__} / torch {torch.__version__}: "
                     f"torchvision.transforms.functional.gaussian_blur; kernel1d from {KERNEL_FN}; "
                     f"written by bench/make_blur_reference.py",
        "dtype": "float32",
        "layout": "CHW, row-major, flattened",
        "padding": "reflect, kernel_size // 2 on each side",
        "seed": SEED,
    }
    write_reference(args.out, doc_head, cases)
    return 0


if __name__ == "__main__":
    sys.exit(main())
