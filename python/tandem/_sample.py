"""The random key of the sample a tandem worker's Python process is making (tandem.sample_rng).

Pure Python: the worker's Python processes (_dataset_worker.py) import it without the
compiled module.
"""
_seed = None  # the 64-bit seed of the sample being made, set before each __getitem__
_rng = None   # its Generator, made at the first sample_rng() call of that sample


def begin(seed):
    """Called by the dataset worker before each sample."""
    global _seed, _rng
    _seed, _rng = seed, None


def sample_rng():
    """A numpy Generator keyed by this sample's (seed, epoch, index), the same on every worker.

    Inside a Python dataset's __getitem__ run by a tandem worker (`--data python:FILE:NAME`):
    every call during one sample returns the same Generator, so its draws continue.
    random, numpy.random and torch are already seeded from the same key.
    """
    global _rng
    if _seed is None:
        raise RuntimeError("tandem.sample_rng() is for a Python dataset's __getitem__ run by a tandem worker "
                           "(--data python:FILE:NAME); elsewhere make your own numpy.random.default_rng(seed)")
    if _rng is None:
        import numpy as np

        _rng = np.random.Generator(np.random.PCG64(_seed))
    return _rng
