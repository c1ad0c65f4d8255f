"""tandem.Feed as a torch.utils.data.IterableDataset, for torchrun + DDP scripts.

    ds = TandemDataset(["10.0.0.5:6000"], batch_size=64, data="synthetic")
    loader = torch.utils.data.DataLoader(ds, batch_size=None)   # the feed batches already
    for epoch in range(10):
        for images, labels in loader: ...                        # or batch["mask"], batch.rows("boxes")

Each pass is a new epoch (a new shuffle and new augmentation), as with a DataLoader;
set_epoch(n) chooses the next pass's epoch. Given steps=N instead, one pass delivers steps
[start_step, N) across epochs. Each rank reads RANK and WORLD_SIZE (set by torchrun and
tandem launch) unless rank/world are given, and takes its own disjoint slice of every
global batch.
"""
import contextlib

import torch
import torch.utils.data

from . import _tandem
from ._batch import Batch
from ._library import _lib

_PAGE = 4096


class TandemDataset(torch.utils.data.IterableDataset):
    """Yields tandem.Batch objects of torch tensors over tandem's buffers (torch.from_numpy,
    no copy), by field name: batch["image"] (N, C, H, W) in the wire dtype (uint8 or
    float32), batch["label"] int64, and the dataset's other fields (a ragged NAME as NAME,
    NAME_lengths, NAME_offsets; batch.rows(NAME) gives each sample's rows). A batch with
    image and label unpacks: for images, labels in loader.
    Use it with DataLoader(ds, batch_size=None) and num_workers=0: tandem makes batches
    in its own threads and on its data workers, not in DataLoader processes.

    Two forms. By epoch (no steps=): each pass (each iteration) delivers one epoch, its
    batches_per_epoch steps, in a new shuffle with new augmentation: the epochs 0, 1, 2,
    ... in turn, as a DataLoader gives them; set_epoch(n) makes the next pass epoch n (as
    DistributedSampler.set_epoch does; then n+1, ...). The same (seed, epoch) gives the
    same batches. By step (steps=N): one pass delivers steps [start_step, N) across
    epochs, for a loop that counts steps; a second pass is an error (it would replay the
    same batches). Every pass opens a new tandem.Feed; the settings are tandem.Feed's.
    release_workers=True tells the workers to exit when a pass ends: with several ranks,
    let one rank call shutdown_workers() after a barrier instead.

    Batches that reach the GPU without a stall. pin_memory (default: whether torch has
    CUDA): the batches' images lie in page-locked memory, tandem's own buffers reused
    batch after batch and registered with CUDA once each (no copy), so
    images.cuda(non_blocking=True) is an asynchronous DMA; is_pinned() is true.
    device="cuda" (or "cuda:1", a torch.device): each batch is copied there on a side
    stream one batch ahead of the loop, and images the dataset wants as float32
    (images="auto", a Compose ending in ToTensor and Normalize) travel as uint8 and are
    normalised on the device: a quarter of the bytes over PCIe. device="cpu" runs the same
    path without CUDA.

    Known when it is made (the settings are checked then; a dataset not on this host is
    learnt from the workers, waiting up to connect_timeout for one):
    len(ds): steps of one pass (batches_per_epoch by epoch, steps - start_step by step);
    ds.batches_per_epoch: global batches in one pass over the dataset;
    ds.epoch: the epoch of the next pass (by epoch; None by step);
    ds.dataset_info: the dataset as a dict, the same as tandem.Feed's .dataset: name,
        size (samples per epoch), sample_shape [C, H, W], num_classes, dtype (numpy),
        mean and std (per channel, for values scaled to [0, 1]; empty: none), normalized
        (the images come as float32, already normalised with them: images=, device=),
        fingerprint and class_names (each label's name, e.g. its class folder; empty: none),
        fields (each field's name, dtype, shape and ragged; a ragged shape starts with -1).
        Build the model from it, e.g. num_classes=ds.dataset_info["num_classes"]."""

    def __init__(self, workers=None, *, rank=None, world=None, local_threads=0, start_step=0,
                 release_workers=False, pin_memory=None, device=None, **settings):
        super().__init__()
        self.device = torch.device(device) if device is not None else None
        self.pin_memory = _pinning(pin_memory, self.device)
        self.local_threads = local_threads
        self.start_step = start_step
        self.release_workers = release_workers
        self.settings = settings
        self.by_epoch = "steps" not in settings
        if self.by_epoch and start_step:
            raise ValueError("start_step belongs to the step form (steps=N): by epoch, resume with set_epoch(n)")
        self._feed = None
        self._passes = 0
        self._yielded = 0       # batches the running pass has given
        self._resume = None     # a loaded state, for the next pass
        self._last_state = None  # where the last pass ended
        # Every setting is checked now, where the mistake is made; the workers, rank and
        # world are found once (arguments, else tandem launch's or torchrun's environment).
        plan = _tandem.plan(workers, rank=rank, world=world, local_threads=local_threads, start_step=start_step,
                            **settings)
        self.workers = plan["workers"]
        self.rank = plan["rank"]
        self.world = plan["world"]
        self.dataset_info = plan["dataset"]
        self._normalize = None  # (mean, std) on the device: uint8 images normalised there
        if self.device is not None and self.dataset_info.get("normalized"):
            self.settings["images"] = "uint8"
            n = self.dataset_info["sample_shape"][0] if self.dataset_info["sample_shape"] else 3
            mean, std = self.dataset_info["mean"] or [0.0] * n, self.dataset_info["std"] or [1.0] * n
            self._normalize = [torch.tensor(v, dtype=torch.float32, device=self.device)[:, None, None]
                               for v in (mean, std)]
        self._registered = set()  # addresses of buffers page-locked with CUDA
        if self.pin_memory:
            _lib.tandem_use_buffer_pool(1)  # on already (tandem_init): reused blocks, each locked once
        self.batches_per_epoch = plan["batches_per_epoch"]
        self._len = self.batches_per_epoch if self.by_epoch else plan["steps"]
        self.epoch = 0 if self.by_epoch else None
        self._first_state = plan["state"]

    def set_epoch(self, epoch):
        """Makes the next pass deliver epoch `epoch` (then epoch + 1, ...): its own shuffle
        and augmentation, the same batches for the same (seed, epoch). By epoch only."""
        if not self.by_epoch:
            raise ValueError("set_epoch() belongs to the epoch form: this TandemDataset was given steps=, so one "
                             "pass delivers steps [start_step, steps); leave steps out to iterate by epoch")
        if int(epoch) < 0:
            raise ValueError(f"epoch {epoch} is negative: epochs count from 0")
        self.epoch = int(epoch)

    def _open(self, release=False):
        args = dict(rank=self.rank, world=self.world, local_threads=self.local_threads,
                    release_workers=release, **self.settings)
        state, self._resume = self._resume, None
        if self.by_epoch:
            if state is not None and self.epoch > state["data"]["epoch"]:
                state = None  # a later epoch than the state's starts at its beginning
            return _tandem.Feed(self.workers, epoch=self.epoch, state=state, **args)
        if state is not None:
            return _tandem.Feed(self.workers, state=state, **args)
        return _tandem.Feed(self.workers, start_step=self.start_step, **args)

    def state_dict(self):
        """Where this dataset is in the data after the batches it has given (torchdata's StatefulDataLoader
        convention): within a pass, after the batches yielded so far; between passes, where the last ended.
        Save it with the model; load_state_dict() on a new TandemDataset, of any world size or batch size,
        continues from exactly that sample (tandem.Feed's state=)."""
        if self._feed is not None:
            return self._feed.state_dict(taken=self._yielded)
        for state in (self._resume, self._last_state):
            if state is not None:
                return state
        if self.by_epoch and self.epoch != self._first_state["data"]["epoch"]:
            raise RuntimeError(f"state_dict() before epoch {self.epoch} began: save it while iterating, or after "
                               "a pass")
        return self._first_state

    def load_state_dict(self, state):
        """The next pass starts at `state` (a state_dict(), of any world size): by epoch, the pass is the
        state's epoch, from its sample on (set_epoch may change it: a later epoch starts at its beginning)."""
        if not isinstance(state, dict) or not isinstance(state.get("data"), dict):
            raise ValueError("load_state_dict() takes the dict state_dict() gave, unchanged")
        self._resume = state
        self._passes = 0
        if self.by_epoch:
            self.epoch = int(state["data"]["epoch"])

    def __len__(self):
        return self._len

    def __iter__(self):
        info = torch.utils.data.get_worker_info()
        if info is not None:
            raise RuntimeError("TandemDataset runs in the main process: use DataLoader(ds, batch_size=None, "
                               "num_workers=0); tandem makes batches in its own threads and on its workers")
        if not self.by_epoch and self._passes > 0:
            raise RuntimeError("this TandemDataset was given steps=, and its one pass over steps [start_step, steps) "
                               "is done: a second would replay the same batches. Leave steps out to iterate by "
                               "epoch (each pass a new epoch), or make a new one with start_step")
        self._passes += 1
        feed = self._open(self.release_workers)
        if self.by_epoch:
            self.epoch += 1
        self._feed = feed
        self._yielded = 0
        try:
            batches = (batch.map(torch.from_numpy) for batch in feed)
            if self.pin_memory:
                batches = (self._pinned(b) for b in batches)
            if self.device is not None:
                batches = _ahead(batches, self.device, self._normalize)
            for batch in batches:
                self._yielded += 1
                yield batch
        finally:
            self._last_state = feed.state_dict(taken=self._yielded)
            self._feed = None
            feed.close()

    def log(self, **values):
        """Report the script's own numbers (loss=, lr=) to the running pass's feed: the metric
        lines, metrics.jsonl and the summary carry them, as tandem.Feed.log does."""
        if self._feed is None:
            raise RuntimeError("log() between passes: report while iterating over this TandemDataset")
        self._feed.log(**values)

    def stats(self):
        """The running (or last) feed's stats: per-source counts and hedged requests."""
        return self._feed.stats() if self._feed is not None else None

    def shutdown_workers(self):
        """Tells every worker to exit (call it on one rank, after the others are done)."""
        security = {k: v for k, v in self.settings.items()
                    if k.replace("-", "_") in ("token", "token_file", "job_name", "tls_ca", "tls_cert", "tls_key",
                                               "tls_server_name")}
        return _tandem.shutdown_workers(self.workers, **security)

    def _pinned(self, batch):
        """The batch with its image's buffer page-locked with CUDA (once per buffer: they recur)."""
        image = batch.fields.get("image")
        if image is not None and image.numel():
            address = image.data_ptr()
            if address not in self._registered:
                size = -(-image.numel() * image.element_size() // _PAGE) * _PAGE
                err = torch.cuda.cudart().cudaHostRegister(address, size, 0)
                if int(getattr(err, "value", err)) != 0:
                    raise RuntimeError(f"pin_memory: CUDA could not page-lock a batch buffer of {size} bytes ({err}): "
                                       "the locked-memory limit (ulimit -l) may be too low; pass pin_memory=False")
                self._registered.add(address)
        return batch


def _pinning(pin_memory, device):
    """Whether batches are page-locked: pin_memory as given, else whether torch has CUDA."""
    if device is not None and device.type == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device={device}: this torch has no CUDA device (torch.cuda.is_available() is False): "
                           "leave device unset, or pass device='cpu'")
    if pin_memory is None:
        return torch.cuda.is_available()
    if pin_memory and not torch.cuda.is_available():
        raise RuntimeError("pin_memory=True: this torch has no CUDA device (torch.cuda.is_available() is False), and "
                           "page-locked memory is for copies to one: leave pin_memory unset")
    return bool(pin_memory)


def _ahead(batches, device, normalize):
    """The batches on `device`, each copied (and its uint8 images normalised) on a side
    stream while the loop still works on the one before."""
    stream = torch.cuda.Stream(device) if device.type == "cuda" else None
    pending = None
    for batch in batches:
        moved = _issue(batch, device, stream, normalize)
        if pending is not None:
            yield _ready(*pending, device)
        pending = moved
    if pending is not None:
        yield _ready(*pending, device)


def _issue(batch, device, stream, normalize):
    with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
        fields = {k: v.to(device, non_blocking=True) for k, v in batch.fields.items()}
        if normalize is not None and "image" in fields:
            mean, std = normalize
            fields["image"] = fields["image"].to(torch.float32).div_(255).sub_(mean).div_(std)
        event = stream.record_event() if stream is not None else None
    return Batch(fields, batch.indices, batch.sequence, batch.epoch, batch.source), batch, event


def _ready(moved, host, event, device):
    """`moved` once its copy is done: the host batch (`host`) may go, and the loop's stream
    may use (and free) the device tensors."""
    if event is not None:
        event.synchronize()
        current = torch.cuda.current_stream(device)
        for t in moved.fields.values():
            t.record_stream(current)
    del host
    return moved
