#!/usr/bin/python3
"""A torchvision ImageFolder, as users write it, served natively by real `tandem worker`
processes to a tandem.Feed (issue 52): its labels and classes are ImageFolder's own, every
image comes once per epoch, for a v1 Compose and (where torchvision has it) a v2 one.

    /usr/bin/python3 tests/python/torchvision_feed_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) when numpy, torch, torchvision or PIL is missing."""
import collections
import json
import os
import unittest

from workers import Workers, parse_args, require

ARGS = parse_args()
require("numpy", "torch", "torchvision", "PIL")
import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402
from torchvision.datasets import ImageFolder  # noqa: E402

import tandem  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "python_datasets", "torchvision_folders.py")
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


def make_folder(root):
    """22 images in 3 classes: sizes vary, one class has a nested folder, extensions in
    either case, JPEG and PNG."""
    rng = np.random.default_rng(5)
    for i in range(22):
        cls = ["ant", "bee", "cicada"][i % 3]
        folder = os.path.join(root, cls, "deep" if cls == "cicada" and i % 2 else "")
        os.makedirs(folder, exist_ok=True)
        pixels = rng.integers(0, 256, (30 + i, 40 + 2 * i, 3), dtype=np.uint8)
        name = f"{i:02d}." + ("PNG" if i % 5 == 0 else "jpg" if i % 2 else "JPEG")
        Image.fromarray(pixels).save(os.path.join(folder, name), "PNG" if i % 5 == 0 else "JPEG")
    return root


def has_v2():
    try:
        import torchvision.transforms.v2  # noqa: F401
        return True
    except ImportError:
        return False


class TorchvisionFeedTest(unittest.TestCase):
    def serve(self, name, args):
        root = make_folder(os.path.abspath(f"folder-{name}"))
        truth = ImageFolder(root)
        data = dict(data=f"python:{FIXTURE}:{name}", data_args='{"root": "%s"%s}' % (root, args))
        with Workers(ARGS.tandem, 2, threads=1, **data) as w:
            epochs = collections.defaultdict(list)
            with tandem.Feed(w.targets, batch_size=2, steps=22, connect_timeout=60) as feed:
                info = feed.dataset
                for b in feed:
                    images, labels = b
                    self.assertEqual(images.shape, (2, 3, 24, 24))
                    self.assertEqual(images.dtype, np.float32)  # as ToTensor + Normalize end them
                    for i, label in zip(b.indices, labels):
                        self.assertEqual(label, truth.targets[int(i)], f"sample {i}")
                        epochs[b.epoch].append(int(i))
            log = w.log(w.ports[0])
        self.assertIn("is a torchvision image folder of 22 images in 3 classes, made natively", log)
        self.assertEqual(info["class_names"], truth.classes)
        self.assertEqual(info["num_classes"], 3)
        np.testing.assert_allclose(info["mean"], MEAN, rtol=1e-6)
        np.testing.assert_allclose(info["std"], STD, rtol=1e-6)
        self.assertEqual(sorted(epochs), [0, 1])
        for epoch, indices in epochs.items():  # every image once per epoch
            self.assertEqual(sorted(indices), list(range(22)), f"epoch {epoch}")

    def test_images_land_as_the_compose_ends_them(self):
        # ToTensor + Normalize: float32, normalised as the batch lands, equal to torchvision's own
        # arithmetic on the uint8 images the same feed gives with images="uint8".
        import torch

        root = make_folder(os.path.abspath("folder-floats"))
        data = dict(data=f"python:{FIXTURE}:Folder", data_args='{"root": "%s", "recipe": "train"}' % root)
        with Workers(ARGS.tandem, 1, threads=1, **data) as w:
            got = {}
            for images in ("auto", "uint8", "float32"):
                with tandem.Feed(w.targets, batch_size=4, steps=3, connect_timeout=60, images=images) as feed:
                    got[images] = ([b["image"].copy() for b in feed], feed.dataset)
            with self.assertRaisesRegex(ValueError, "images=png: give"):
                tandem.Feed(w.targets, batch_size=4, steps=3, connect_timeout=60, images="png")
        floats, info = got["auto"]
        self.assertTrue(info["normalized"])
        self.assertEqual(info["dtype"], np.float32)
        self.assertFalse(got["uint8"][1]["normalized"])
        mean, std = torch.tensor(MEAN)[:, None, None], torch.tensor(STD)[:, None, None]
        for f, u, f32 in zip(floats, got["uint8"][0], got["float32"][0]):
            self.assertEqual((f.dtype, u.dtype), (np.float32, np.uint8))
            want = torch.from_numpy(u).float().div(255).sub(mean).div(std).numpy()
            np.testing.assert_array_equal(f, want)
            np.testing.assert_array_equal(f32, want)

    def test_batches_for_the_gpu_take_the_same_path_on_the_cpu(self):
        # device="cpu": the one-batch-ahead path, uint8 images normalised "on the device", equal
        # to the Feed's own float32; without CUDA, pin_memory is off, and asking for it (or for
        # device="cuda") is one clear error.
        import torch
        from tandem.torch import TandemDataset

        root = make_folder(os.path.abspath("folder-device"))
        data = dict(data=f"python:{FIXTURE}:Folder", data_args='{"root": "%s", "recipe": "train"}' % root)
        with Workers(ARGS.tandem, 1, threads=1, **data) as w:
            ds = TandemDataset(w.targets, batch_size=4, steps=5, connect_timeout=60, device="cpu")
            self.assertFalse(ds.pin_memory)
            self.assertEqual(ds.settings["images"], "uint8")  # normalised after the copy
            got = list(torch.utils.data.DataLoader(ds, batch_size=None))
            with tandem.Feed(w.targets, batch_size=4, steps=5, connect_timeout=60) as feed:
                want = [(b.sequence, b["image"].copy()) for b in feed]
            with self.assertRaisesRegex(RuntimeError, r"pin_memory=True: this torch has no CUDA device"):
                TandemDataset(w.targets, batch_size=4, steps=5, connect_timeout=60, pin_memory=True)
            with self.assertRaisesRegex(RuntimeError, r"device=cuda: this torch has no CUDA device"):
                TandemDataset(w.targets, batch_size=4, steps=5, connect_timeout=60, device="cuda")
        self.assertEqual([b.sequence for b in got], [s for s, _ in want])
        for b, (_, image) in zip(got, want):
            self.assertEqual(b["image"].dtype, torch.float32)
            np.testing.assert_array_equal(b["image"].numpy(), image)

    def test_the_buffer_pool_gives_the_same_blocks_again(self):
        # What pin_memory page-locks: batch memory reused block by block (the same addresses
        # recur), so each block is registered with CUDA once, not once per batch.
        from tandem._library import _lib

        root = make_folder(os.path.abspath("folder-pool"))
        data = dict(data=f"python:{FIXTURE}:Folder", data_args='{"root": "%s", "recipe": "train"}' % root)
        _lib.tandem_use_buffer_pool(1)  # the module's default
        with Workers(ARGS.tandem, 1, threads=1, **data) as w:
            with tandem.Feed(w.targets, batch_size=2, steps=40, connect_timeout=60) as feed:
                addresses = [b["image"].__array_interface__["data"][0] for b in feed]
        pool = json.loads(_lib.tandem_buffer_pool_stats())
        self.assertEqual(len(addresses), 40)
        self.assertLess(len(set(addresses)), 12, "batch buffers are not reused")
        self.assertLess(pool["blocks"], 60)
        self.assertTrue(all(a % 4096 == 0 for a in addresses))

    def test_a_v1_compose(self):
        self.serve("Folder", ', "recipe": "train"')

    @unittest.skipUnless(has_v2(), "this torchvision has no transforms.v2")
    def test_a_v2_compose(self):
        self.serve("V2Folder", "")


if __name__ == "__main__":
    unittest.main(argv=[__file__], verbosity=2)
