"""The random key of the sample a tandem worker's Python process is making (tandem.sample_rng).

Pure Python: the worker's Python processes (_dataset_worker.py) import it without the
compiled module.
"""
_seed = None   # the 64-bit seed of the sample being made, set before each __getitem__
_index = None  # and its index
_rng = None    # its Generator, made at the first sample_rng() call of that sample
_many = None   # inside __getitems__: {index: seed} of its samples
_many_rngs = {}


def begin(seed, index=None):
    """Called by the dataset worker before each sample (None: none is being made)."""
    global _seed, _index, _rng, _many
    _seed, _index, _rng, _many = seed, index, None, None
    _many_rngs.clear()


def begin_many(seeds):
    """Called by the dataset worker before __getitems__: {index: seed} of its samples."""
    begin(None)
    global _many
    _many = dict(seeds)


def _generator(seed):
    import numpy as np

    return np.random.Generator(np.random.PCG64(seed))


def sample_rng(index=None):
    """A numpy Generator keyed by this sample's (seed, epoch, index), the same on every worker.

    Inside a Python dataset's __getitem__ run by a tandem worker (`--data python:FILE:NAME`):
    every call during one sample returns the same Generator, so its draws continue.
    random, numpy.random and torch are already seeded from the same key.
    Inside its __getitems__(indices), which makes many samples at once, name the sample:
    sample_rng(index) is that sample's Generator, the same one its __getitem__ would get.
    """
    global _rng
    if _many is not None:
        if index is None or index not in _many:
            raise RuntimeError("inside __getitems__, tandem.sample_rng(index) needs the index of one of its samples "
                               f"(got {index!r}): each sample has its own generator")
        if index not in _many_rngs:
            _many_rngs[index] = _generator(_many[index])
        return _many_rngs[index]
    if _seed is None:
        raise RuntimeError("tandem.sample_rng() is for a Python dataset's __getitem__ run by a tandem worker "
                           "(--data python:FILE:NAME); elsewhere make your own numpy.random.default_rng(seed)")
    if index is not None and _index is not None and index != _index:
        raise RuntimeError(f"tandem.sample_rng({index!r}) inside __getitem__ of sample {_index}: "
                           "pass that sample's index, or none")
    if _rng is None:
        _rng = _generator(_seed)
    return _rng


class Image:
    """An encoded JPEG or PNG for tandem to decode and augment in C++ (docs/datasets.md):
    return tandem.Image(path) (or tandem.Image(bytes), the file's contents) as a sample's
    image, e.g. `return tandem.Image(path), label`, and give the dataset a `transform`
    attribute (a torchvision Compose). Samples that are (tandem.Image(path), label) are
    listed once at start and made as a torchvision ImageFolder is (the path and label must
    depend on the index alone); others (bytes, more fields) send their image's bytes with
    each sample. Elsewhere (your own DataLoader), open() gives the PIL image in RGB."""
    __slots__ = ("path", "data")

    def __init__(self, source):
        import os

        if isinstance(source, (bytes, bytearray, memoryview)):
            self.path, self.data = None, bytes(source)
        else:
            self.path, self.data = os.fspath(source), None

    def read(self):
        """The encoded bytes."""
        if self.data is not None:
            return self.data
        with open(self.path, "rb") as f:
            return f.read()

    def open(self):
        import io

        from PIL import Image as _PIL

        with _PIL.open(io.BytesIO(self.data) if self.data is not None else self.path) as im:
            return im.convert("RGB")

    def __repr__(self):
        return f"tandem.Image({self.path!r})" if self.path is not None else f"tandem.Image(<{len(self.data)} bytes>)"
