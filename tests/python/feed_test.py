#!/usr/bin/python3
"""tandem.Feed end to end against real `tandem worker` processes on loopback.

    /usr/bin/python3 tests/python/feed_test.py --module-dir build/python --tandem build/tandem

Exits 77 (skipped) only when numpy is missing; the torch adapter's test is skipped
alone when torch is."""
import os
import signal
import sys
import tempfile
import threading
import time
import unittest

from workers import Workers, parse_args, require

ARGS = parse_args()
require("numpy")
import numpy as np  # noqa: E402

import tandem  # noqa: E402

DATA = dict(data="synthetic", image_size=16, dataset_size=512)
SHARED = None  # two workers serving DATA, for the tests that do not kill or stop them


def setUpModule():
    global SHARED
    SHARED = Workers(ARGS.tandem, 2, **DATA)


def tearDownModule():
    SHARED.close()


def take(feed):
    """Every batch of `feed` as (indices, sequence, epoch, images copy, labels copy)."""
    out = []
    while True:
        try:
            b = feed.next_batch()
        except StopIteration:
            return out
        out.append(b)


class FeedTest(unittest.TestCase):
    def test_counts_shapes_dtypes_and_zero_copy(self):
        with tandem.Feed(SHARED.targets, batch_size=16, steps=12, **DATA) as feed:
            self.assertEqual(len(feed), 12)
            self.assertEqual(feed.batches_per_epoch, 512 // 16)
            seen = []
            for images, labels in feed:
                self.assertEqual(images.shape, (16, 3, 16, 16))
                self.assertEqual(images.dtype, np.float32)
                self.assertTrue(images.flags.c_contiguous and images.flags.writeable)
                self.assertEqual(labels.shape, (16,))
                self.assertEqual(labels.dtype, np.int64)
                self.assertTrue(((labels >= 0) & (labels < 10)).all())
                # No copy: both arrays view the C++ batch, which their shared base owns.
                self.assertFalse(images.flags.owndata)
                self.assertIs(images.base, labels.base)
                seen.append(images)
            self.assertEqual(len(seen), 12)
            stats = feed.stats()
        self.assertTrue(feed.closed)
        self.assertEqual(sorted(s["name"] for s in stats["sources"]), sorted(SHARED.targets))
        self.assertEqual(sum(s["batches"] for s in stats["sources"]), 12)
        self.assertEqual(sum(s["samples"] for s in stats["sources"]), 12 * 16)
        # The batches outlive the feed: their memory belongs to the arrays.
        self.assertTrue(np.isfinite(seen[0]).all())

    def test_a_python_dataset_is_learnt_from_its_workers(self):
        # The feed starts no Python processes of its own: --data python:... runs on the workers.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        fixture = os.path.join(root, "tests", "fixtures", "python_datasets", "datasets.py")
        data = dict(data=f"python:{fixture}:Squares", data_args='{"n": 64, "size": 8}')
        with Workers(ARGS.tandem, 1, **data) as w:
            with tandem.Feed(w.targets, batch_size=8, steps=3, connect_timeout=60, **data) as feed:
                batches = take(feed)
        self.assertEqual(len(batches), 3)
        for b in batches:
            self.assertEqual(b.images.shape, (8, 3, 8, 8))
            self.assertEqual(b.images.dtype, np.uint8)
            # Squares writes index % 256 into pixel [0, 0, 2] and labels index % 4
            self.assertEqual(list(b.images[:, 0, 0, 2]), [i % 256 for i in b.indices])
            self.assertEqual(list(b.labels), [i % 4 for i in b.indices])

    def test_without_data_a_feed_learns_the_dataset_its_workers_serve(self):
        # No data=: the feed takes whatever its workers serve, here a Python dataset (it used
        # to assume synthetic and refuse them), and reports its dtype as theirs.
        root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        fixture = os.path.join(root, "tests", "fixtures", "python_datasets", "datasets.py")
        data = dict(data=f"python:{fixture}:Squares", data_args='{"n": 64, "size": 8}')
        with Workers(ARGS.tandem, 1, **data) as w:
            plan = tandem.plan(w.targets, batch_size=8, steps=2, connect_timeout=60)
            with tandem.Feed(w.targets, batch_size=8, steps=2, connect_timeout=60) as feed:
                batches = take(feed)
                self.assertEqual(feed.dataset["name"], "python")
        self.assertEqual(plan["dataset"]["dtype"], "uint8")
        self.assertEqual(len(batches), 2)
        self.assertEqual(batches[0].images.dtype, np.uint8)
        self.assertEqual(list(batches[0].labels), [i % 4 for i in batches[0].indices])

    def test_sequences_in_order_and_uint8_locally(self):
        with tandem.Feed(local_threads=1, batch_size=4, steps=5, wire_dtype="uint8", **DATA) as feed:
            batches = take(feed)
        self.assertEqual([b.sequence for b in batches], list(range(5)))
        self.assertEqual({b.source for b in batches}, {"local"})
        self.assertEqual(batches[0].images.dtype, np.uint8)
        # By name, not by position: the message says what to write.
        with self.assertRaisesRegex(TypeError, r"by field name, not by position \(0\): write batch\['image'\]"):
            batches[0][0]

    def test_two_ranks_take_disjoint_slices_of_the_same_global_batches(self):
        steps = 40  # 32 global batches of 16 per epoch: all of epoch 0, part of epoch 1
        feeds = [tandem.Feed(SHARED.targets, rank=r, world=2, batch_size=8, steps=steps, **DATA) for r in (0, 1)]
        whole = tandem.Feed(SHARED.targets, batch_size=16, steps=steps, **DATA)
        epoch0 = []
        for step in range(steps):
            r0, r1, one = feeds[0].next_batch(), feeds[1].next_batch(), whole.next_batch()
            self.assertEqual((r0.sequence, r1.sequence, one.sequence), (step, step, step))
            self.assertEqual(r0.epoch, step // 32)
            self.assertFalse(set(r0.indices) & set(r1.indices), f"step {step}: ranks share samples")
            # Rank r's slice is the r-th half of the one-rank global batch, made identically.
            np.testing.assert_array_equal(np.concatenate([r0.indices, r1.indices]), one.indices)
            np.testing.assert_array_equal(np.concatenate([r0.labels, r1.labels]), one.labels)
            np.testing.assert_array_equal(np.concatenate([r0.images, r1.images]), one.images)
            if r0.epoch == 0:
                epoch0 += list(r0.indices) + list(r1.indices)
        self.assertEqual(sorted(epoch0), list(range(512)), "epoch 0 uses every sample exactly once")
        for f in feeds + [whole]:
            self.assertRaises(StopIteration, f.next_batch)
            self.assertTrue(f.closed)

    def test_local_threads_make_the_same_batches_as_workers(self):
        with tandem.Feed(SHARED.targets, batch_size=8, steps=3, **DATA) as remote, \
                tandem.Feed(local_threads=2, batch_size=8, steps=3, **DATA) as local:
            for a, b in zip(take(remote), take(local)):
                np.testing.assert_array_equal(a.images, b.images)
                np.testing.assert_array_equal(a.labels, b.labels)

    def test_bad_settings_raise_tandems_message(self):
        cases = [
            (dict(image_size=-1), "--image-size: -1 is out of range"),
            (dict(imag_size=16), "did you mean 'image_size'"),
            (dict(model="resnet18"), "tandem.Feed does not run"),
            (dict(threads=4), "pass --threads to `tandem worker`"),
            (dict(rank=2, world=2), "0 <= rank < world"),
            (dict(wire_dtype="int4"), "--wire-dtype"),
            (dict(data="nope"), "unknown --data 'nope'"),
            (dict(DATA, batch_size=600), "lower --batch-size or raise --dataset-size"),
        ]
        for kwargs, message in cases:
            with self.subTest(kwargs=kwargs):
                with self.assertRaises(ValueError) as e:
                    tandem.Feed(SHARED.targets, steps=3, **kwargs)
                self.assertIn(message, str(e.exception))
        with self.assertRaisesRegex(ValueError, "no data workers for this feed"):
            tandem.Feed(batch_size=4, steps=3, **DATA)
        # A worker serving other data is refused, naming the setting that differs and the fix.
        with self.assertRaisesRegex(ValueError, r"serves image size 16, this feed expects 24 \(--image-size\): "
                                                "give every host the same data settings"):
            tandem.Feed(SHARED.targets, batch_size=4, steps=3, **dict(DATA, image_size=24))

    def test_a_worker_that_never_answers_ends_at_connect_timeout(self):
        start = time.monotonic()
        with self.assertRaisesRegex(RuntimeError, "no data worker answered within connect_timeout 1 s"):
            tandem.Feed(["127.0.0.1:9"], batch_size=4, steps=3, connect_timeout=1, **DATA)
        self.assertLess(time.monotonic() - start, 10)


class WorkerLifecycleTest(unittest.TestCase):
    def test_killing_one_of_two_workers_still_delivers_every_step(self):
        with Workers(ARGS.tandem, 2, **DATA) as w, \
                tandem.Feed(w.targets, batch_size=16, steps=150, prefetch=4, inflight=2, batch_timeout=20,
                            **DATA) as feed:
            sequences = []
            for step in range(150):
                if step == 10:
                    w.kill(0)
                b = feed.next_batch()
                self.assertEqual(b.images.shape, (16, 3, 16, 16))
                sequences.append(b.sequence)
            self.assertRaises(StopIteration, feed.next_batch)
            stats = {s["name"]: s for s in feed.stats()["sources"]}
        self.assertEqual(sequences, list(range(150)))
        dead, alive = stats[w.targets[0]], stats[w.targets[1]]
        self.assertTrue(dead["failed"] or dead["error"], dead)
        self.assertGreater(alive["batches"], 150 - 10 - 8)  # the rest, beyond what was in flight

    def test_a_wrong_or_missing_token_is_a_clear_error(self):
        with Workers(ARGS.tandem, 1, env={"TANDEM_TOKEN": "s3cret"}, **DATA) as w:
            os.environ.pop("TANDEM_TOKEN", None)
            with self.assertRaisesRegex(RuntimeError, "UNAUTHENTICATED: wrong token"):
                tandem.Feed(w.targets, batch_size=4, steps=2, token="wrong", **DATA)
            with self.assertRaisesRegex(RuntimeError, "needs the job's token"):
                tandem.Feed(w.targets, batch_size=4, steps=2, **DATA)
            # An empty token would turn authentication off: the error every command gives.
            with self.assertRaisesRegex(ValueError, "token from --token is empty, and an empty token would"):
                tandem.Feed(w.targets, batch_size=4, steps=2, token="", **DATA)
            os.environ["TANDEM_TOKEN"] = ""
            try:
                with self.assertRaisesRegex(ValueError, "token from TANDEM_TOKEN is empty, and an empty token would"):
                    tandem.Feed(w.targets, batch_size=4, steps=2, **DATA)
            finally:
                del os.environ["TANDEM_TOKEN"]
            with tempfile.NamedTemporaryFile("w") as f:
                f.write("s3cret\n")
                f.flush()
                self.assertEqual(len(list(tandem.Feed(w.targets, batch_size=4, steps=2, token_file=f.name,
                                                      **DATA))), 2)
            os.environ["TANDEM_TOKEN"] = "s3cret"  # honoured like the trainer does
            try:
                self.assertEqual(len(list(tandem.Feed(w.targets, batch_size=4, steps=2, **DATA))), 2)
            finally:
                del os.environ["TANDEM_TOKEN"]

    def test_release_workers_stops_them_only_when_asked(self):
        with Workers(ARGS.tandem, 1, **DATA) as w:
            self.assertEqual(len(list(tandem.Feed(w.targets, batch_size=4, steps=3, **DATA))), 3)
            self.assertIsNone(w.procs[0].poll(), "a feed without release_workers left the worker running")
            self.assertEqual(len(list(tandem.Feed(w.targets, batch_size=4, steps=3, release_workers=True,
                                                  **DATA))), 3)
            self.assertEqual(w.wait_exit(0, 15), 0)


class SlowWorkerTest(unittest.TestCase):
    """A worker making batches of more than a second (one thread): waits that must end early do."""

    SLOW = dict(data="blur-benchmark", image_size=448)

    @classmethod
    def setUpClass(cls):
        cls.w = Workers(ARGS.tandem, 1, **cls.SLOW)

    @classmethod
    def tearDownClass(cls):
        cls.w.close()

    def feed(self, **kw):
        return tandem.Feed(self.w.targets, batch_size=256, steps=1000, prefetch=1, inflight=1, **self.SLOW, **kw)

    def test_ctrl_c_interrupts_a_wait_and_closes_the_feed(self):
        feed = self.feed()
        sent = []
        timer = threading.Timer(0.3, lambda: (sent.append(time.monotonic()), os.kill(os.getpid(), signal.SIGINT)))
        timer.start()
        with self.assertRaises(KeyboardInterrupt):
            for _ in feed:
                pass
        self.assertLess(time.monotonic() - sent[0], 2.0)  # a wait lasts 0.1 s; generous for a loaded machine
        self.assertTrue(feed.closed)

    def test_close_from_another_thread_ends_iteration(self):
        feed = self.feed()
        threading.Timer(0.3, feed.close).start()
        start = time.monotonic()
        n = sum(1 for _ in feed)
        self.assertLess(time.monotonic() - start, 5)
        self.assertLess(n, 3)
        self.assertTrue(feed.closed)

    def test_batch_timeout_bounds_every_wait(self):
        start = time.monotonic()
        with self.assertRaisesRegex(RuntimeError, "no batch 0 within --batch-timeout"):
            next(self.feed(batch_timeout=0.2))
        self.assertLess(time.monotonic() - start, 5)


class TorchAdapterTest(unittest.TestCase):
    def test_dataset_reads_rank_from_the_environment_and_yields_tensors(self):
        try:
            import torch
        except ImportError:
            self.skipTest("python3-torch is missing")
        from tandem.torch import TandemDataset

        env = {"RANK": "1", "WORLD_SIZE": "2"}
        old = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            ds = TandemDataset(SHARED.targets, batch_size=8, steps=4, **DATA)
        finally:
            for k, v in old.items():
                os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)
        self.assertEqual((ds.rank, ds.world, len(ds)), (1, 2, 4))
        loader = torch.utils.data.DataLoader(ds, batch_size=None)
        got = list(loader)
        self.assertEqual(len(got), 4)
        with tandem.Feed(SHARED.targets, rank=1, world=2, batch_size=8, steps=4, **DATA) as feed:
            for (x, y), (images, labels) in zip(got, feed):
                self.assertEqual((x.dtype, y.dtype, tuple(x.shape)), (torch.float32, torch.int64, (8, 3, 16, 16)))
                np.testing.assert_array_equal(x.numpy(), images)
                np.testing.assert_array_equal(y.numpy(), labels)
        with self.assertRaisesRegex(ValueError, "did you mean 'batch_size'"):
            TandemDataset(SHARED.targets, batchsize=8, **DATA)


if __name__ == "__main__":
    sys.argv = sys.argv[:1]
    result = unittest.main(exit=False, verbosity=2).result
    sys.exit(0 if result.wasSuccessful() else 1)
