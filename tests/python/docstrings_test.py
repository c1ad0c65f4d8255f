#!/usr/bin/python3
"""help(tandem.Feed) and help(tandem.torch.TandemDataset) say what their arguments,
methods and attributes are (docs/python.md says the same).

    /usr/bin/python3 tests/python/docstrings_test.py --module-dir build/python --tandem build/tandem

Needs neither numpy nor workers; the TandemDataset part is skipped alone without torch."""
import importlib.util
import pydoc
import sys
import unittest

from workers import parse_args

ARGS = parse_args()
import tandem  # noqa: E402

FEED_ARGUMENTS = ["workers", "rank", "world", "local_threads", "start_step", "release_workers", "settings"]
FEED_SETTINGS = ["data", "image_size", "batch_size", "steps", "connect_timeout", "batch_timeout", "token"]
FEED_MEMBERS = ["next_batch", "close", "shutdown", "stats", "__len__", "__iter__", "__next__", "__enter__",
                "__exit__", "closed", "batch_size", "batches_per_epoch", "dataset"]
DATASET_KEYS = ["name", "size", "sample_shape", "num_classes", "dtype", "mean", "std", "normalized", "fingerprint",
                "class_names", "fields"]


class DocstringTest(unittest.TestCase):
    def test_feed_says_its_arguments_and_settings(self):
        doc = tandem.Feed.__doc__ or ""
        for word in FEED_ARGUMENTS + FEED_SETTINGS:
            self.assertIn(word, doc, f"help(tandem.Feed) does not mention {word}")
        self.assertIn("ValueError", doc)
        self.assertIn("RuntimeError", doc)
        init = tandem.Feed.__init__.__doc__ or ""
        for word in FEED_ARGUMENTS:
            self.assertIn(word, init, f"tandem.Feed.__init__'s docstring does not mention {word}")
        self.assertIn("connect_timeout", init)

    def test_every_feed_method_and_property_has_a_docstring(self):
        for name in FEED_MEMBERS:
            with self.subTest(member=name):
                member = getattr(tandem.Feed, name)
                doc = (member.__doc__ or "").strip()
                # pybind11 starts a method's docstring with its signature; a bare signature is no docstring.
                lines = [line for line in doc.splitlines() if line.strip() and not line.startswith(name + "(")]
                self.assertTrue(lines, f"tandem.Feed.{name} has no docstring beyond its signature: {doc!r}")
        for key in DATASET_KEYS:
            self.assertIn(key, tandem.Feed.dataset.__doc__)

    def test_module_functions_say_their_arguments(self):
        self.assertIn("workers", tandem.shutdown_workers.__doc__)
        self.assertIn("reason", tandem.shutdown_workers.__doc__)
        self.assertIn("level", tandem.set_log_level.__doc__)
        self.assertIn("debug", tandem.set_log_level.__doc__)
        self.assertIn("rank", tandem._tandem.plan.__doc__)

    def test_help_renders(self):
        text = pydoc.render_doc(tandem.Feed, renderer=pydoc.plaintext)
        for word in ["release_workers", "next_batch", "batches_per_epoch", "local_threads"]:
            self.assertIn(word, text)

    @unittest.skipUnless(importlib.util.find_spec("torch"), "torch is missing: TandemDataset not checked")
    def test_tandem_dataset_documents_dataset_info(self):
        from tandem.torch import TandemDataset
        doc = TandemDataset.__doc__ or ""
        self.assertIn("dataset_info", doc)
        self.assertIn("batches_per_epoch", doc)
        for key in DATASET_KEYS:
            self.assertIn(key, doc, f"TandemDataset's docstring does not say dataset_info's {key}")
        ds = TandemDataset(None, batch_size=4, steps=2, data="synthetic", image_size=16, dataset_size=32, rank=0,
                           world=1)
        self.assertEqual(sorted(ds.dataset_info), sorted(DATASET_KEYS), "the docstring names every key")


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
