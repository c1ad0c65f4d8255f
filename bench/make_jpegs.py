#!/usr/bin/python3
"""Write ImageNet-like JPEGs for the JPEG pipeline benchmarks: 500x375 (and a few
375x500) photographic-looking RGB images, 4:2:0 chroma, quality 90, about 110 KB each,
in an image-folder layout (one subfolder per class).

Content is deterministic (each image seeded by --seed and its index, so --jobs does not
change it) and has the statistics of photographs where it matters for decoding cost:
1/f ("pink") noise in luminance and, weaker, in colour (natural images have a 1/f
amplitude spectrum), plus random filled ellipses and rectangles for hard edges. --texture
scales the noise and so the entropy-coded size, which is what a JPEG costs to decode.

Needs torch (for the arrays) and libjpeg-turbo's libturbojpeg (to encode; the library
tandem decodes with): Debian's /usr/bin/python3 with python3-torch and libturbojpeg0, or
on the GPU machine the pip torch and the library scripts/gpu/build-on-device.sh unpacks
(source build-gpu/device-env.sh first). No numpy or PIL.

    bench/make_jpegs.py --out /tmp/tandem-jpegs [--count 256] [--classes 4] [--seed 0] [--jobs N] [--size 500x375]
"""
import argparse
import ctypes
import ctypes.util
import multiprocessing
import os
import sys

try:
    import torch
except ImportError:
    sys.exit("make_jpegs.py needs torch: run it with the Python that has it (Debian: /usr/bin/python3)")

TJPF_RGB = 0
TJSAMP_420 = 2


def load_turbojpeg():
    names = [os.environ.get("TANDEM_TURBOJPEG"), "libturbojpeg.so.0", ctypes.util.find_library("turbojpeg")]
    for name in names:
        if not name:
            continue
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        lib.tjInitCompress.restype = ctypes.c_void_p
        lib.tjCompress2.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                    ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_ulong),
                                    ctypes.c_int, ctypes.c_int, ctypes.c_int]
        lib.tjFree.argtypes = [ctypes.c_void_p]
        lib.tjDestroy.argtypes = [ctypes.c_void_p]
        lib.tjGetErrorStr.restype = ctypes.c_char_p
        return lib
    sys.exit("make_jpegs.py: libturbojpeg not found: install libturbojpeg0 (Debian), set TANDEM_TURBOJPEG to its "
             "path, or on the GPU machine source build-gpu/device-env.sh (the packed libraries)")


def encode_jpeg(lib, rgb, quality):
    """rgb: uint8 tensor [H, W, 3] -> JPEG bytes (4:2:0)."""
    rgb = rgb.contiguous()
    h, w, _ = rgb.shape
    handle = lib.tjInitCompress()
    out, size = ctypes.c_void_p(), ctypes.c_ulong(0)
    try:
        if lib.tjCompress2(handle, ctypes.c_void_p(rgb.data_ptr()), w, w * 3, h, TJPF_RGB, ctypes.byref(out),
                           ctypes.byref(size), TJSAMP_420, quality, 0) != 0:
            raise RuntimeError("tjCompress2 failed: " + lib.tjGetErrorStr().decode())
        return ctypes.string_at(out, size.value)
    finally:
        if out:
            lib.tjFree(out)
        lib.tjDestroy(handle)


def pink(gen, h, w, alpha):
    """Unit-variance noise with amplitude spectrum 1 / f^alpha."""
    fy = torch.fft.fftfreq(h, dtype=torch.float64).view(-1, 1)
    fx = torch.fft.rfftfreq(w, dtype=torch.float64).view(1, -1)
    f = (fx ** 2 + fy ** 2).sqrt()
    f[0, 0] = 1
    shape = tuple(f.shape)
    spectrum = torch.complex(torch.randn(shape, generator=gen, dtype=torch.float64),
                             torch.randn(shape, generator=gen, dtype=torch.float64)) / f ** alpha
    spectrum[0, 0] = 0
    x = torch.fft.irfft2(spectrum, s=(h, w))
    return x / x.std()


def uniform(gen, lo, hi):
    return lo + (hi - lo) * torch.rand(1, generator=gen, dtype=torch.float64).item()


def integer(gen, lo, hi):
    return int(torch.randint(lo, hi, (1,), generator=gen).item())


def draw_shapes(gen, rgb, w, h):
    """Filled ellipses and rectangles of random colours, in place on rgb [H, W, 3]."""
    yy = torch.arange(h, dtype=torch.float64).view(-1, 1)
    xx = torch.arange(w, dtype=torch.float64).view(1, -1)
    for _ in range(integer(gen, 3, 8)):
        x0, y0 = integer(gen, 0, w), integer(gen, 0, h)
        x1, y1 = x0 + integer(gen, 20, w // 2), y0 + integer(gen, 20, h // 2)
        colour = torch.randint(0, 256, (3,), generator=gen).to(torch.float64)
        if uniform(gen, 0, 1) < 0.5:
            cx, cy, rx, ry = (x0 + x1) / 2, (y0 + y1) / 2, (x1 - x0) / 2, (y1 - y0) / 2
            mask = ((xx - cx) / rx) ** 2 + ((yy - cy) / ry) ** 2 <= 1
        else:
            mask = (xx >= x0) & (xx <= x1) & (yy >= y0) & (yy <= y1)
        rgb[mask] = colour


def make_image(gen, w, h, texture):
    lum = pink(gen, h, w, 1.0) * texture
    u, v = (pink(gen, h, w, 1.3) * texture * 0.5 for _ in range(2))
    base = [uniform(gen, 60, 190) for _ in range(3)]
    rgb = torch.stack([base[0] + lum + u, base[1] + lum - 0.5 * u - 0.5 * v, base[2] + lum + v], -1)
    rgb = rgb.clamp(0, 255).round()
    draw_shapes(gen, rgb, w, h)
    # the shapes get the texture too, as objects in photos have it
    rgb = rgb + (pink(gen, h, w, 1.0) * texture * 0.6).unsqueeze(-1)
    return rgb.clamp(0, 255).round().to(torch.uint8)


def write_one(job):
    i, args = job
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(args.seed * 1_000_003 + i)
    w, h = args.size
    if i % 8 == 7:
        w, h = h, w
    folder = os.path.join(args.out, f"class{i % args.classes:03d}")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"img{i:05d}.jpg")
    data = encode_jpeg(load_turbojpeg(), make_image(gen, w, h, args.texture), args.quality)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--count", type=int, default=256)
    p.add_argument("--classes", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--quality", type=int, default=90)
    p.add_argument("--texture", type=float, default=44.0, help="noise sigma; sets the file size")
    p.add_argument("--jobs", type=int, default=min(8, os.cpu_count() or 1), help="processes writing images")
    p.add_argument("--size", default="500x375", help="WxH of most images (one in eight is HxW); "
                   "120x110 for thumbnail-sized data (the 64 px benchmarks)")
    args = p.parse_args()
    try:
        args.size = tuple(int(v) for v in args.size.lower().split("x"))
        assert len(args.size) == 2 and min(args.size) >= 8
    except (ValueError, AssertionError):
        p.error(f"--size {args.size}: give WIDTHxHEIGHT, each at least 8, like 500x375")
    load_turbojpeg()  # fail before forking, with the message
    jobs = [(i, args) for i in range(args.count)]
    if args.jobs > 1:
        # fork before torch computes anything here: the children start clean
        with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
            sizes = pool.map(write_one, jobs, chunksize=8)
    else:
        sizes = [write_one(j) for j in jobs]
    print(f"wrote {args.count} JPEGs to {args.out}: mean {sum(sizes) / max(args.count, 1) / 1024:.1f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
