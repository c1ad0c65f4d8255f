"""tandem's feed for Python: a thin ctypes layer over libtandem_feed.so (python/src/capi.h).

The library has a plain C ABI and never links libpython or torch, so one build serves
every CPython from 3.9 on and every torch version. Batches are numpy arrays over the
library's own buffers (no copy): each array's base holds the batch, which is freed when the
last array of it goes. Every wait is cut into slices of 0.1 s, with the GIL released
(ctypes releases it for each call): Ctrl-C lands between slices and closes the feed.
"""
import ctypes
import json
import os

np = None  # numpy, imported by the first feed or plan: `import tandem` stays quick (serve() needs none)


def _numpy():
    global np, _TYPESTR
    if np is None:
        import numpy

        _TYPESTR = {name: numpy.dtype(name).str for name in ("uint8", "float32", "float16", "int32", "int64", "uint64")}
        np = numpy
    return np

__version__ = "0.1.0"
_SLICE_S = 0.1
_CAPI_VERSION = 1
_NEXT_ERROR, _NEXT_WAIT, _NEXT_BATCH, _NEXT_END = -1, 0, 1, 2
_VALUE_ERROR = 1


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.environ.get("TANDEM_FEED_LIBRARY") or os.path.join(here, "libtandem_feed.so")
    if not os.path.exists(path):
        raise ImportError(f"tandem: {path} is missing: build tandem (scripts/setup) and put build/python on "
                          "PYTHONPATH, or pip install the wheel (scripts/wheel)")
    lib = ctypes.CDLL(path)
    sig = {
        "tandem_capi_version": ([], ctypes.c_int),
        "tandem_version": ([], ctypes.c_char_p),
        "tandem_error_kind": ([], ctypes.c_int),
        "tandem_error_message": ([], ctypes.c_char_p),
        "tandem_init": ([], None),
        "tandem_setting_names": ([], ctypes.c_char_p),
        "tandem_set_log_level": ([ctypes.c_char_p], ctypes.c_int),
        "tandem_shutdown_workers": ([ctypes.c_char_p], ctypes.c_int),
        "tandem_plan_begin": ([ctypes.c_char_p], ctypes.c_void_p),
        "tandem_task_wait": ([ctypes.c_void_p, ctypes.c_double], ctypes.c_int),
        "tandem_task_result": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_task_free": ([ctypes.c_void_p], None),
        "tandem_feed_open": ([ctypes.c_char_p], ctypes.c_void_p),
        "tandem_feed_wait_started": ([ctypes.c_void_p, ctypes.c_double], ctypes.c_int),
        "tandem_feed_info": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_feed_next": ([ctypes.c_void_p, ctypes.c_double, ctypes.POINTER(ctypes.c_void_p)], ctypes.c_int),
        "tandem_feed_close": ([ctypes.c_void_p], ctypes.c_int),
        "tandem_feed_shutdown": ([ctypes.c_void_p], ctypes.c_int),
        "tandem_feed_stats": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_feed_free": ([ctypes.c_void_p], None),
        "tandem_batch_json": ([ctypes.c_void_p], ctypes.c_char_p),
        "tandem_batch_free": ([ctypes.c_void_p], None),
    }
    for name, (args, result) in sig.items():
        f = getattr(lib, name)
        f.argtypes, f.restype = args, result
    if lib.tandem_capi_version() != _CAPI_VERSION:
        raise ImportError(f"tandem: {path} speaks C API {lib.tandem_capi_version()}, this package {_CAPI_VERSION}: "
                          "the library and the Python files come from different builds; reinstall tandem")
    lib.tandem_init()
    return lib


_lib = _load()


def _raise():
    message = (_lib.tandem_error_message() or b"").decode("utf-8", "replace")
    raise (ValueError if _lib.tandem_error_kind() == _VALUE_ERROR else RuntimeError)(message)


def _text(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _settings(kwargs):
    """Keyword arguments as the text a flag or settings file carries: True/False as
    true/false, a list or tuple one value per element, a dict as JSON."""
    out = []
    for key, value in kwargs.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)):
            values = [_text(v) for v in value]
        elif isinstance(value, dict):
            values = [json.dumps(value)]
        else:
            values = [_text(value)]
        out.append([key, values])
    return out


def _targets(workers):
    if workers is None:
        return None
    if isinstance(workers, str):  # "a:1,b:2", as --workers takes them
        return [w for w in workers.split(",") if w]
    return [str(w) for w in workers]


def _request(workers, rank, world, local_threads, start_step, epoch, release, settings):
    return json.dumps({"workers": _targets(workers), "rank": rank, "world": world, "local_threads": int(local_threads),
                       "start_step": int(start_step), "epoch": epoch, "release_workers": bool(release),
                       "settings": _settings(settings)}).encode()


def _dataset(d):
    _numpy()
    d = dict(d)
    d["class_names"] = [bytes.fromhex(h).decode("utf-8", "surrogateescape") for h in d.pop("class_names_hex")]
    d["dtype"] = np.dtype(d["dtype"])
    for f in d["fields"]:
        f["dtype"] = np.dtype(f["dtype"])
    return d


class _Memory:
    """Owns one C++ batch, freed when the last array over it goes: it is the base of every
    array of the batch (numpy reads __array_interface__, set in turn for each, once)."""
    __slots__ = ("handle", "__array_interface__")

    def __init__(self, handle):
        self.handle = handle

    def __del__(self, free=_lib.tandem_batch_free):
        free(self.handle)

    def array(self, address, dtype, shape, nbytes):
        """A numpy array over the batch's buffer at address (no copy), based on this memory."""
        if nbytes == 0 or address == 0:
            return np.empty(shape, dtype)
        self.__array_interface__ = {"data": (address, False), "typestr": _TYPESTR[dtype], "shape": tuple(shape),
                                    "version": 3}
        return np.asarray(self)


_TYPESTR = {}


class Batch:
    """One batch's fields by name (batch['image'], batch['mask'], 'boxes' with 'boxes_lengths' and
    'boxes_offsets' for a ragged field), numpy arrays over tandem's buffers; keys(), values(),
    items(), len, in. A batch with image and label unpacks as images, labels = batch. Also:
    indices (the samples it was made from), sequence, epoch, source."""
    __slots__ = ("fields", "indices", "sequence", "epoch", "source")

    def __init__(self, fields, indices=None, sequence=0, epoch=0, source=""):
        self.fields = fields
        self.indices = indices
        self.sequence = sequence
        self.epoch = epoch
        self.source = source

    @classmethod
    def _from(cls, handle):
        """The batch the library handed over, from its one-line description (capi.cc: describe)."""
        _numpy()
        memory = _Memory(handle)
        d = _lib.tandem_batch_json(handle).decode().split("\t")
        fields = {}
        for i in range(5, len(d), 7):
            name, dtype, shape, address, nbytes, lengths, count = d[i:i + 7]
            shape = [int(x) for x in shape.split(",")] if shape else []
            fields[name] = memory.array(int(address), dtype, shape, int(nbytes))
            count = int(count)
            if count:  # ragged: rows of every sample, rows per sample, where each sample's rows start
                n = memory.array(int(lengths), "int64", [count], count * 8)
                offsets = np.zeros(count + 1, np.int64)
                np.cumsum(n, out=offsets[1:])
                fields[name + "_lengths"] = n
                fields[name + "_offsets"] = offsets
        count = int(d[4])
        indices = memory.array(int(d[3]), "uint64", [count], count * 8)
        return cls(fields, indices, int(d[0]), int(d[1]), d[2])

    def __getitem__(self, name):
        """The field's array; KeyError naming the fields there are"""
        if not isinstance(name, str):
            first = next(iter(self.fields), "image")
            raise TypeError(f"a Batch is indexed by field name, not by position ({name!r}): write batch['{first}'] "
                            f"(its fields: {', '.join(self.fields)}), or images, labels = batch")
        try:
            return self.fields[name]
        except KeyError:
            raise KeyError(f"this batch has no field '{name}' (it has {', '.join(self.fields)})") from None

    def __contains__(self, name):
        """Whether it holds an array of that name"""
        return name in self.fields

    def __len__(self):
        """How many arrays (fields) it holds"""
        return len(self.fields)

    def __iter__(self):
        """(images, labels): only a batch with both fields unpacks; else TypeError"""
        if "image" not in self.fields or "label" not in self.fields:
            raise TypeError(f"this batch has fields {', '.join(self.fields)}, not image and label: take them by name, "
                            "batch['name'] (only a batch with both unpacks as images, labels)")
        return iter((self.fields["image"], self.fields["label"]))

    def keys(self):
        """The field names, image and label first"""
        return self.fields.keys()

    def values(self):
        """The arrays, in keys() order"""
        return self.fields.values()

    def items(self):
        """(name, array) pairs"""
        return self.fields.items()

    def get(self, name, default=None):
        """The field's array, or default without one"""
        return self.fields.get(name, default)

    def to_dict(self):
        """The fields as a new dict"""
        return dict(self.fields)

    def rows(self, name):
        """A ragged field's rows, one view (no copy) per sample: values[offsets[i]:offsets[i+1]]"""
        values = self[name]
        if name + "_offsets" not in self.fields:
            raise KeyError(f"field '{name}' is not ragged")
        o = self.fields[name + "_offsets"]
        return [values[o[i]:o[i + 1]] for i in range(len(o) - 1)]

    def map(self, fn):
        """The same batch with fn applied to every field, e.g. batch.map(torch.from_numpy)"""
        return Batch({k: fn(v) for k, v in self.fields.items()}, self.indices, self.sequence, self.epoch,
                     self.source)

    @property
    def images(self):
        """batch['image'], or None without one"""
        return self.fields.get("image")

    @property
    def labels(self):
        """batch['label'], or None without one"""
        return self.fields.get("label")

    def __repr__(self):
        shapes = ", ".join(f"{k}={tuple(getattr(v, 'shape', ()))}" for k, v in self.fields.items())
        return f"tandem.Batch(sequence={self.sequence}, epoch={self.epoch}, {shapes})"


def _wait(poll, on_interrupt):
    """Calls poll(_SLICE_S) until it returns true; Ctrl-C (or a signal handler's exception)
    runs on_interrupt, then propagates."""
    try:
        while not poll(_SLICE_S):
            pass
    except BaseException:
        on_interrupt()
        raise


class Feed:
    """Streams batches from tandem data workers, and from threads of this process, in step order.

Feed(workers=None, *, rank=None, world=None, local_threads=0, start_step=0, epoch=None,
     release_workers=False, **settings)

workers: the data workers, a list of "host:port" (or one "a:1,b:2" string, like --workers).
    None: those `tandem launch` names ($TANDEM_WORKERS), else the worker groups of the
    cluster tandem discovers (SageMaker's resourceconfig.json under sagemaker_root, ...),
    else none (local_threads only).
rank, world: this process's slice of every global batch of world x batch_size samples.
    None: $RANK and $WORLD_SIZE (torchrun, tandem launch), else this host's place among
    the cluster's trainer hosts, else 0 and 1.
local_threads: threads of this process that make batches too (0: workers only).
start_step: the first step delivered, to resume (batches are a pure function of seed and step).
epoch: deliver exactly this epoch (its batches_per_epoch steps, a new shuffle and
    augmentation per epoch) instead of steps [start_step, steps).
release_workers: when the feed ends or is closed, tell every worker to exit.
**settings: tandem's own settings with '_' for '-' (tandem.setting_names() lists them):
    data, seed, image_size, dataset_size, num_classes, wire_dtype, pipeline, split, channel,
    on_bad_sample, sagemaker_root, batch_size, steps, inflight, prefetch, connect_timeout,
    batch_timeout, log_every, summary_json, token, token_file, job_name, tls_ca, tls_cert,
    tls_key, tls_server_name. Under `tandem launch`, those in $TANDEM_SETTINGS come first.

A dataset this host has no copy of (no data on a GPU host) is learnt from the workers; the
settings it fixes without the files (seed, pipeline, image size, ...) must match theirs.
Iterating gives a Batch per step: numpy arrays over tandem's own buffers (no copy) by field
name, batch["image"] (N, C, H, W) in the wire dtype, batch["label"] (N,) int64, and the
dataset's other fields (a ragged field NAME as NAME, NAME_lengths, NAME_offsets; see
batch.rows(NAME)). A batch with image and label unpacks: for images, labels in feed. A bad
setting, or a worker serving other data, raises ValueError with tandem's message; a feed
that cannot go on (no worker answers within connect_timeout, every source failed, no batch
within batch_timeout) raises RuntimeError. Every wait can be interrupted with Ctrl-C.
Rank 0 measures the run (the time spent waiting in next() is its data wait) and writes
metrics.jsonl, summary.json and report.html, as tandem's trainer does. See docs/python.md."""

    def __init__(self, workers=None, *, rank=None, world=None, local_threads=0, start_step=0, epoch=None,
                 release_workers=False, **settings):
        """Connects to the workers (waiting up to connect_timeout for one to answer), checks that they serve
        this dataset, and starts streaming: workers, rank, world, local_threads, start_step, epoch,
        release_workers and **settings as in help(tandem.Feed)"""
        self._handle = None
        self._stats = None
        self._closed = False
        handle = _lib.tandem_feed_open(_request(workers, rank, world, local_threads, start_step, epoch,
                                                release_workers, settings))
        if not handle:
            _raise()
        self._handle = handle

        def started(seconds):
            got = _lib.tandem_feed_wait_started(handle, seconds)
            if got < 0:
                self._free()
                _raise()
            return got == 1

        _wait(started, self._free)
        info = json.loads(_lib.tandem_feed_info(handle))
        self._length = info["length"]
        self._batch_size = info["batch_size"]
        self._batches_per_epoch = info["batches_per_epoch"]
        self._dataset = _dataset(info["dataset"])

    def _free(self):
        handle, self._handle = self._handle, None
        if handle:
            self._stats = json.loads(_lib.tandem_feed_stats(handle) or b"null")
            _lib.tandem_feed_free(handle)

    def __del__(self):
        self._free()

    def __iter__(self):
        """The feed itself: it is its own iterator"""
        return self

    def __next__(self):
        """The next Batch (unpacks as images, labels); StopIteration after the last step"""
        return self.next_batch()

    def next_batch(self):
        """The next Batch (images, labels, indices, sequence, epoch, source); StopIteration after the last step"""
        handle = self._handle
        if not handle:
            raise StopIteration
        out = ctypes.c_void_p()
        status = _NEXT_WAIT
        try:
            while status == _NEXT_WAIT:
                status = _lib.tandem_feed_next(handle, _SLICE_S, ctypes.byref(out))
        except BaseException:
            self.close()
            raise
        if status == _NEXT_BATCH:
            return Batch._from(out.value)
        if status == _NEXT_END:
            self.close()
            raise StopIteration
        _raise()

    def __len__(self):
        """Steps this feed delivers in all: steps - start_step"""
        return self._length

    def close(self):
        """Stops streaming at once (a wait in another thread ends); batches already taken stay valid. With
        release_workers, tells the workers to exit"""
        if self._handle and _lib.tandem_feed_close(self._handle) < 0:
            _raise()
        self._closed = True

    def shutdown(self):
        """Tell every worker to exit now; returns how many acknowledged"""
        got = _lib.tandem_feed_shutdown(self._handle) if self._handle else -1
        if not self._handle:
            raise RuntimeError("shutdown() on a closed feed: call tandem.shutdown_workers(workers)")
        if got < 0:
            _raise()
        return got

    def stats(self):
        """Per source (sources: name, batches, samples, compute_seconds, failed, error, rejoins) and
        hedged_requests"""
        if not self._handle:
            return self._stats
        text = _lib.tandem_feed_stats(self._handle)
        if text is None:
            _raise()
        return json.loads(text)

    def __enter__(self):
        """The feed; leaving the with block closes it"""
        return self

    def __exit__(self, *exc):
        """Closes the feed"""
        self.close()

    @property
    def closed(self):
        """True once close() was called or the last step was taken"""
        return self._closed or not self._handle

    @property
    def batch_size(self):
        """Samples per batch (per rank and step)"""
        return self._batch_size

    @property
    def batches_per_epoch(self):
        """Global batches in one pass over the dataset: dataset size // (world x batch_size)"""
        return self._batches_per_epoch

    @property
    def dataset(self):
        """The dataset (name, size, sample_shape, num_classes, dtype, mean, std, fingerprint, class_names,
        fields: each field's name, dtype, shape and ragged), as tandem.plan() and TandemDataset.dataset_info
        give it"""
        return dict(self._dataset)


def plan(workers=None, *, rank=None, world=None, local_threads=0, start_step=0, **settings):
    """What a Feed with these arguments would deliver (steps, batch_size, batches_per_epoch, dataset, and the
    rank, world and workers it found), its dataset found as the Feed finds it: this host's copy of the
    data, else learnt from the workers (waiting up to connect_timeout for one)"""
    task = _lib.tandem_plan_begin(_request(workers, rank, world, local_threads, start_step, None, False, settings))
    if not task:
        _raise()
    try:
        _wait(lambda s: _lib.tandem_task_wait(task, s) == 1, lambda: None)
        text = _lib.tandem_task_result(task)
        if text is None:
            _raise()
    finally:
        _lib.tandem_task_free(task)
    d = json.loads(text)
    d["dataset"] = _dataset(d["dataset"])
    return d


def shutdown_workers(workers, *, reason="training script finished", **security):
    """Tells each of workers (a list of "host:port", or one "a:1,b:2" string) to exit, with reason in its
    log; takes the security settings (token, token_file, job_name, tls_*) as keyword arguments. Returns how
    many acknowledged"""
    got = _lib.tandem_shutdown_workers(json.dumps({"workers": _targets(workers), "reason": reason,
                                                   "settings": _settings(security)}).encode())
    if got < 0:
        _raise()
    return got


def setting_names():
    """The data settings tandem.Feed accepts as keyword arguments"""
    return json.loads(_lib.tandem_setting_names())


def set_log_level(level):
    """tandem's log level on stderr: level is debug, info, warning, error or off"""
    if _lib.tandem_set_log_level(str(level).encode()) < 0:
        _raise()
