#!/usr/bin/python3
"""Samples of any fields, from a Python dataset on real `tandem worker` processes to
tandem.Feed: a segmentation-style dataset (image + mask), a detection-style one (image +
ragged boxes + label + numbers) and one with neither image nor label.

    /usr/bin/python3 tests/python/fields_test.py --module-dir build/python --tandem build/tandem

The expected values come from the fixture's own functions (tests/fixtures/python_datasets).
Exits 77 (skipped) only when numpy is missing."""
import os
import sys
import unittest

from workers import Workers, parse_args, require

ARGS = parse_args()
require("numpy")
import numpy as np  # noqa: E402

import tandem  # noqa: E402

FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "python_datasets")
sys.path.insert(0, FIXTURES)
import datasets  # noqa: E402

FILE = os.path.join(FIXTURES, "datasets.py")


def data(name):
    return dict(data=f"python:{FILE}:{name}", python="/usr/bin/python3", python_procs=1)


def feed_data(name):
    return dict(data=f"python:{FILE}:{name}")


def take(feed):
    out = []
    while True:
        try:
            out.append(feed.next_batch())
        except StopIteration:
            return out


class SegmentationTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workers = Workers(ARGS.tandem, 2, **data("Segmentation"))

    @classmethod
    def tearDownClass(cls):
        cls.workers.close()

    def test_image_and_mask_arrive_by_name_with_their_values(self):
        with tandem.Feed(self.workers.targets, batch_size=4, steps=3, **feed_data("Segmentation")) as feed:
            fields = feed.dataset["fields"]
            self.assertEqual([(f["name"], f["dtype"], f["shape"], f["ragged"]) for f in fields],
                             [("image", np.uint8, [3, 8, 8], False), ("mask", np.uint8, [8, 8], False)])
            self.assertEqual(feed.dataset["num_classes"], 0)
            batches = list(feed)
        self.assertEqual(len(batches), 3)
        for b in batches:
            self.assertEqual(list(b.keys()), ["image", "mask"])
            self.assertEqual(len(b), 2)
            self.assertIn("mask", b)
            self.assertIsNone(b.labels)
            image, mask = b["image"], b["mask"]
            self.assertEqual((image.shape, image.dtype), ((4, 3, 8, 8), np.uint8))
            self.assertEqual((mask.shape, mask.dtype), ((4, 8, 8), np.uint8))
            self.assertFalse(mask.flags.owndata)  # a view of the C++ batch, as the image is
            self.assertIs(mask.base, image.base)
            for i, index in enumerate(b.indices):
                np.testing.assert_array_equal(image[i], datasets.seg_image(int(index)))
                expected = (np.arange(64).reshape(8, 8) + int(index)) % 3
                np.testing.assert_array_equal(mask[i].ravel()[1:], expected.ravel()[1:])
                self.assertTrue(100 <= mask[i, 0, 0] < 200, "numpy.random ran seeded in the worker")
            with self.assertRaisesRegex(TypeError, "this batch has fields image, mask, not image and label"):
                images, labels = b
            with self.assertRaisesRegex(KeyError, "no field 'label'"):
                b["label"]

    def test_two_workers_give_byte_identical_fields(self):
        got = []
        for target in self.workers.targets:
            with tandem.Feed([target], batch_size=8, steps=2, **feed_data("Segmentation")) as feed:
                got.append(take(feed))
        for a, b in zip(*got):
            np.testing.assert_array_equal(a.indices, b.indices)
            self.assertEqual(a["mask"].tobytes(), b["mask"].tobytes())
            self.assertEqual(a["image"].tobytes(), b["image"].tobytes())


class DetectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.workers = Workers(ARGS.tandem, 1, **data("Detection"))

    @classmethod
    def tearDownClass(cls):
        cls.workers.close()

    def check(self, b):
        self.assertEqual(list(b.keys()), ["image", "label", "area", "boxes", "boxes_lengths", "boxes_offsets", "weight"])
        idx = [int(i) for i in b.indices]
        images, labels = b  # a classification batch still unpacks
        self.assertIs(images, b["image"])
        np.testing.assert_array_equal(labels, [i % 5 for i in idx])
        np.testing.assert_array_equal(b["boxes_lengths"], [i % 4 for i in idx])
        np.testing.assert_array_equal(b["boxes_offsets"], np.concatenate([[0], np.cumsum([i % 4 for i in idx])]))
        self.assertEqual((b["boxes"].dtype, b["boxes"].shape), (np.float32, (sum(i % 4 for i in idx), 4)))
        rows = b.rows("boxes")
        self.assertEqual(len(rows), len(idx))
        for index, r in zip(idx, rows):
            np.testing.assert_array_equal(r, datasets.det_boxes(index))
            if len(r):
                self.assertTrue(np.shares_memory(r, b["boxes"]), "a sample's rows are a view of the batch")
        self.assertEqual(b["weight"].dtype, np.float32)
        np.testing.assert_array_equal(b["weight"], np.array([i / 2 for i in idx], dtype=np.float32))
        self.assertEqual(b["area"].dtype, np.int64)
        np.testing.assert_array_equal(b["area"], [i * 3 for i in idx])

    def test_ragged_boxes_labels_and_numbers_arrive_with_their_values(self):
        with tandem.Feed(self.workers.targets, batch_size=6, steps=4, **feed_data("Detection")) as feed:
            fields = {f["name"]: f for f in feed.dataset["fields"]}
            self.assertEqual((fields["boxes"]["shape"], fields["boxes"]["ragged"]), ([-1, 4], True))
            self.assertEqual(feed.dataset["num_classes"], 5)
            n = 0
            for b in feed:
                self.check(b)
                n += 1
        self.assertEqual(n, 4)

    def test_tandem_torch_gives_tensors_over_the_same_memory(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3-torch is missing")
        from tandem.torch import TandemDataset

        ds = TandemDataset(self.workers.targets, rank=0, world=1, batch_size=4, steps=2, **feed_data("Detection"))
        got = list(torch.utils.data.DataLoader(ds, batch_size=None))
        self.assertEqual(len(got), 2)
        for b in got:
            x, y = b
            self.assertEqual((x.dtype, y.dtype, tuple(x.shape)), (torch.uint8, torch.int64, (4, 3, 8, 8)))
            self.assertEqual(b["boxes"].dtype, torch.float32)
            rows = b.rows("boxes")
            for index, r in zip(b.indices, rows):
                np.testing.assert_array_equal(r.numpy(), datasets.det_boxes(int(index)))
            self.check(b.map(lambda t: t.numpy()))


class NoImageTest(unittest.TestCase):
    def test_a_dataset_without_image_or_label_reaches_the_feed(self):
        with Workers(ARGS.tandem, 1, **data("Tokens")) as w, \
                tandem.Feed(w.targets, batch_size=5, steps=2, **feed_data("Tokens")) as feed:
            self.assertEqual(feed.dataset["sample_shape"], [])
            for b in feed:
                self.assertEqual(list(b.keys()), ["target", "tokens", "tokens_lengths", "tokens_offsets"])
                self.assertIsNone(b.images)
                for index, row in zip(b.indices, b.rows("tokens")):
                    self.assertEqual(row.dtype, np.int32)
                    np.testing.assert_array_equal(row, np.arange(int(index) % 5) + int(index))
                np.testing.assert_array_equal(b["target"], [[int(i), -int(i)] for i in b.indices])


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
