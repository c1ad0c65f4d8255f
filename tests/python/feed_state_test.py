#!/usr/bin/python3
"""tandem.Feed's and TandemDataset's state_dict()/load_state_dict() (torchdata's StatefulDataLoader
convention) against a real `tandem worker` on loopback: a state saved by 2 ranks resumes exactly
at 3 ranks and at 1 rank, every sample of the epoch once.

    /usr/bin/python3 tests/python/feed_state_test.py --module-dir build/python --tandem build/tandem"""
import sys
import unittest

from workers import Workers, parse_args, require

ARGS = parse_args()
require("numpy")

import tandem  # noqa: E402

SIZE = 480
DATA = dict(data="synthetic", image_size=8, dataset_size=SIZE, seed=5)
WORKERS = None


def setUpModule():
    global WORKERS
    WORKERS = Workers(ARGS.tandem, 1, **DATA)


def tearDownModule():
    WORKERS.close()


def feeds(world, batch_size, **kw):
    return [tandem.Feed(WORKERS.targets, rank=r, world=world, batch_size=batch_size, **DATA, **kw)
            for r in range(world)]


def take(feed, n=None):
    """Up to n batches' (epoch, indices) of `feed` (every one when n is None)."""
    out = []
    for batch in feed:
        out.append((batch.epoch, [int(i) for i in batch.indices]))
        if n is not None and len(out) == n:
            break
    return out


class FeedStateTest(unittest.TestCase):
    def first_part(self, steps=13):
        """2 ranks x 8 by epoch 0: 13 steps each (208 samples), and their states."""
        two = feeds(2, 8, epoch=0)
        seen = [take(f, steps) for f in two]
        states = [f.state_dict() for f in two]
        for f in two:
            f.close()
        return seen, states

    def test_a_state_of_two_ranks_resumes_exactly_on_three_and_on_one(self):
        seen, states = self.first_part()
        self.assertEqual(states[0], states[1], "every rank's state is the same after the same steps")
        self.assertEqual(states[0]["step"], 13)
        self.assertEqual(states[0]["data"]["epoch"], 0)
        self.assertEqual(states[0]["data"]["sample"], 13 * 16)
        before = [i for part in seen for _, ids in part for i in ids]
        self.assertEqual(len(set(before)), 13 * 16)
        for world, batch in ((3, 8), (1, 16)):
            with self.subTest(world=world):
                resumed = feeds(world, batch, epoch=0, state=states[0])
                after = [i for f in resumed for e, ids in take(f) for i in ids if e == 0]
                for f in resumed:
                    f.close()
                tail = (SIZE - 13 * 16) % (world * batch)
                self.assertEqual(len(after), SIZE - 13 * 16 - tail)
                self.assertFalse(set(after) & set(before), "a sample trained again")
                self.assertEqual(len(set(after)), len(after), "a sample twice in the resumed part")
                self.assertEqual(len(set(before) | set(after)), SIZE - tail)

    def test_steps_continue_and_the_next_epoch_is_whole(self):
        _, states = self.first_part()
        with tandem.Feed(WORKERS.targets, rank=0, world=1, batch_size=16, steps=40, state=states[0], **DATA) as f:
            got = [(b.sequence, b.epoch) for b in f]
        self.assertEqual(got[0], (13, 0), "the first step is the state's")
        self.assertEqual(got[-1][0], 39)
        self.assertEqual(sum(1 for _, e in got if e == 0), (SIZE - 208) // 16)

    def test_load_state_dict_before_the_first_batch_only(self):
        _, states = self.first_part()
        f = feeds(1, 16, epoch=0)[0]
        f.load_state_dict(states[0])
        first = next(iter(f))
        self.assertEqual(first.sequence, 13)
        with self.assertRaisesRegex(RuntimeError, "before the first batch"):
            f.load_state_dict(states[0])
        self.assertEqual(f.state_dict()["step"], 14)
        f.close()

    def test_load_state_dict_does_not_release_the_workers(self):
        _, states = self.first_part()
        own = Workers(ARGS.tandem, 1, **DATA)
        try:
            f = tandem.Feed(own.targets, rank=0, world=1, batch_size=16, epoch=0, release_workers=True, **DATA)
            f.load_state_dict(states[0])  # the first feed ends without releasing them
            self.assertEqual(next(iter(f)).sequence, 13)
            f.close()  # this one does
            self.assertEqual(own.procs[0].wait(timeout=30), 0, "released at the end, not before")
        finally:
            own.close()

    def test_a_state_of_other_data_is_refused_by_name(self):
        _, states = self.first_part()
        other = dict(states[0], fingerprint="0123456789abcdef")
        with self.assertRaisesRegex(ValueError, "another dataset"):
            feeds(1, 16, epoch=0, state=other)
        with self.assertRaisesRegex(ValueError, "not a tandem feed's state_dict"):
            feeds(1, 16, epoch=0, state={"step": 3})
        with self.assertRaisesRegex(ValueError, "start_step and state are both given"):
            feeds(1, 16, start_step=2, steps=20, state=states[0])

    def test_tandem_dataset_resumes_an_epoch_at_another_world_size(self):
        try:
            import torch  # noqa: F401
        except ImportError:
            self.skipTest("python3-torch is missing")
        from tandem.torch import TandemDataset

        def dataset(rank, world, batch):
            return TandemDataset(WORKERS.targets, rank=rank, world=world, batch_size=batch, pin_memory=False, **DATA)

        two = [dataset(r, 2, 8) for r in range(2)]
        before, states = [], []
        for ds in two:
            for k, batch in enumerate(ds):
                before += [int(i) for i in batch.indices]
                if k == 8:  # 9 steps of 16: the rest, 336, is 14 global batches of 3 x 8
                    states.append(ds.state_dict())
                    break
        self.assertEqual(states[0], states[1])
        self.assertEqual(states[0]["data"]["sample"], 144)
        three = [dataset(r, 3, 8) for r in range(3)]
        after = []
        for ds in three:
            ds.load_state_dict(states[0])
            self.assertEqual(ds.epoch, 0)
            for batch in ds:
                after += [int(i) for i in batch.indices]
            self.assertEqual(ds.epoch, 1, "the next pass is the next epoch")
            self.assertEqual(ds.state_dict()["data"], dict(states[0]["data"], epoch=1, sample=0, world=3))
        self.assertEqual(len(after), SIZE - 144)
        self.assertEqual(set(before) | set(after), set(range(SIZE)))
        self.assertFalse(set(before) & set(after))


if __name__ == "__main__":
    unittest.main(argv=[sys.argv[0]], verbosity=2)
