"""tandem.Feed as a torch.utils.data.IterableDataset, for torchrun + DDP scripts.

    ds = TandemDataset(["10.0.0.5:6000"], batch_size=64, steps=1000, data="synthetic")
    loader = torch.utils.data.DataLoader(ds, batch_size=None)   # the feed batches already
    for images, labels in loader: ...                            # or batch["mask"], batch.rows("boxes")

Each rank reads RANK and WORLD_SIZE (set by torchrun) unless rank/world are given, and
takes its own disjoint slice of every global batch.
"""
import os

import torch
import torch.utils.data

from . import _tandem


def _env_int(name, default):
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"${name} is '{text}', not an integer: torchrun sets it; unset it or fix it") from None


class TandemDataset(torch.utils.data.IterableDataset):
    """Yields tandem.Batch objects of torch tensors over tandem's buffers (torch.from_numpy,
    no copy), by field name: batch["image"] (N, C, H, W) in the wire dtype (uint8 or
    float32), batch["label"] int64, and the dataset's other fields (a ragged NAME as NAME,
    NAME_lengths, NAME_offsets; batch.rows(NAME) gives each sample's rows). A batch with
    image and label unpacks: for images, labels in loader.
    Use it with DataLoader(ds, batch_size=None) and num_workers=0: tandem makes batches
    in its own threads and on its data workers, not in DataLoader processes.

    Every iteration opens a new tandem.Feed over steps [start_step, steps); the settings
    are tandem.Feed's. release_workers=True tells the workers to exit when an iteration
    ends: with several ranks, let one rank call shutdown_workers() after a barrier
    instead.

    Known when it is made (the settings are checked then, without the network):
    len(ds): steps this rank's iterations deliver (steps - start_step);
    ds.batches_per_epoch: global batches in one pass over the dataset;
    ds.dataset_info: the dataset as a dict, the same as tandem.Feed's .dataset: name,
        size (samples per epoch), sample_shape [C, H, W], num_classes, dtype (numpy),
        mean and std (per channel, for values scaled to [0, 1]; empty: none),
        fingerprint and class_names (each label's name, e.g. its class folder; empty: none),
        fields (each field's name, dtype, shape and ragged; a ragged shape starts with -1).
        Build the model from it, e.g. num_classes=ds.dataset_info["num_classes"]."""

    def __init__(self, workers=None, *, rank=None, world=None, local_threads=0, start_step=0,
                 release_workers=False, **settings):
        super().__init__()
        self.workers = workers
        self.rank = _env_int("RANK", 0) if rank is None else int(rank)
        self.world = _env_int("WORLD_SIZE", 1) if world is None else int(world)
        self.local_threads = local_threads
        self.start_step = start_step
        self.release_workers = release_workers
        self.settings = settings
        self._feed = None
        # Every setting is checked now, where the mistake is made (without the network).
        plan = _tandem.plan(rank=self.rank, world=self.world, start_step=start_step, **settings)
        self._len = plan["steps"]
        self.dataset_info = plan["dataset"]
        self.batches_per_epoch = plan["batches_per_epoch"]

    def _open(self, release=False):
        return _tandem.Feed(self.workers, rank=self.rank, world=self.world, local_threads=self.local_threads,
                            start_step=self.start_step, release_workers=release, **self.settings)

    def __len__(self):
        return self._len

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise RuntimeError("TandemDataset runs in the main process: use DataLoader(ds, batch_size=None, "
                               "num_workers=0); tandem makes batches in its own threads and on its workers")
        feed = self._open(self.release_workers)
        self._feed = feed
        try:
            for batch in feed:
                yield batch.map(torch.from_numpy)
        finally:
            self._feed = None
            feed.close()

    def stats(self):
        """The running (or last) feed's stats: per-source counts and hedged requests."""
        return self._feed.stats() if self._feed is not None else None

    def shutdown_workers(self):
        """Tells every worker to exit (call it on one rank, after the others are done)."""
        security = {k: v for k, v in self.settings.items()
                    if k.replace("-", "_") in ("token", "token_file", "job_name", "tls_ca", "tls_cert", "tls_key",
                                               "tls_server_name")}
        return _tandem.shutdown_workers(self.workers, **security)
