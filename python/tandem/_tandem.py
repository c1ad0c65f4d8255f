"""tandem's feed for Python: a thin ctypes layer over libtandem_feed.so (python/src/capi.h).

The library has a plain C ABI and never links libpython or torch, so one build serves
every CPython from 3.9 on and every torch version. Batches are numpy arrays over the
library's own buffers (no copy): each array's base holds the batch, which is freed when the
last array of it goes. Every wait is cut into slices of 0.1 s, with the GIL released
(ctypes releases it for each call): Ctrl-C lands between slices and closes the feed.
"""
import ctypes
import json

from ._batch import Batch, _dataset
from ._library import _lib, _raise
from ._signals import Interrupted, _SigtermWatch

__version__ = "0.1.0"
_SLICE_S = 0.1
_NEXT_ERROR, _NEXT_WAIT, _NEXT_BATCH, _NEXT_END = -1, 0, 1, 2


def _text(v):
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def _settings(kwargs):
    """Keyword arguments as the text a flag or settings file carries: True/False as
    true/false, a list or tuple one value per element, a dict as JSON."""
    out = []
    for key, value in kwargs.items():
        if value is None:
            continue
        if isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value):
            values = [json.dumps(list(value))]  # a pipeline with {"op": ...} steps: one JSON list
        elif isinstance(value, (list, tuple)):
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


def _request(workers, rank, world, local_threads, start_step, epoch, release, settings, images="auto", state=None):
    return json.dumps({"workers": _targets(workers), "rank": rank, "world": world, "local_threads": int(local_threads),
                       "start_step": int(start_step), "epoch": epoch, "release_workers": bool(release),
                       "images": str(images), "state": state, "settings": _settings(settings)}).encode()


def _ending(exc_type, exc):
    """(why, interrupted) for the workers and the summary, from how the script's feed ended."""
    if exc_type is None or (issubclass(exc_type, SystemExit) and not isinstance(exc, Interrupted) and
                            getattr(exc, "code", None) in (0, None)):
        return "training script finished", False
    if issubclass(exc_type, (Interrupted, KeyboardInterrupt)):
        return f"training script stopped ({exc or exc_type.__name__})", True
    return f"training script crashed: {exc_type.__name__}: {exc}"[:400], False


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
     release_workers=False, images="auto", state=None, **settings)

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
state: a state_dict() an earlier feed gave (the torchdata StatefulDataLoader convention; also
    load_state_dict()): the feed starts at its step and continues the epoch from exactly the
    sample it had reached, at any world size and batch size (rank 0 says what changed:
    the global batch, and that lr is as given). A state of another dataset is refused.
images: "auto" (float32, normalised as the batch lands, where the dataset's own transform
    ends in ToTensor: a torchvision ImageFolder tandem makes natively; else as they travel),
    "uint8" (as they travel; normalise on the device with dataset["mean"], ["std"]) or
    "float32" (always normalised here); dataset["normalized"] says which.
**settings: tandem's own settings with '_' for '-' (tandem.setting_names() lists them):
    data, seed, image_size, dataset_size, num_classes, wire_dtype, pipeline, split, channel,
    on_bad_sample, sagemaker_root, batch_size, steps, inflight, prefetch, connect_timeout,
    batch_timeout, log_every, summary_json, workers_watch, worker_service, emulate_step_ms,
    metrics_port, metrics_bind, token, token_file, job_name, tls_ca, tls_cert, tls_key, tls_server_name. Under
    `tandem launch`, those in $TANDEM_SETTINGS come first. workers_watch (a file of host:port
    lines, re-read when it changes) and worker_service (a DNS name, re-resolved) let workers join
    and leave as it runs; metrics_port serves rank 0's gauges, tandem_workers_wanted among them,
    as Prometheus text for an autoscaler.

A dataset this host has no copy of (no data on a GPU host) is learnt from the workers; the
settings it fixes without the files (seed, pipeline, image size, ...) must match theirs.
Iterating gives a Batch per step: numpy arrays over tandem's own buffers (no copy) by field
name, batch["image"] (N, C, H, W) as images= says, batch["label"] (N,) int64, and the
dataset's other fields (a ragged field NAME as NAME, NAME_lengths, NAME_offsets; see
batch.rows(NAME)). A batch with image and label unpacks: for images, labels in feed. A bad
setting, or a worker serving other data, raises ValueError with tandem's message; a feed
that cannot go on (no worker answers within connect_timeout, every source failed, no batch
within batch_timeout) raises RuntimeError. Every wait can be interrupted with Ctrl-C.
Rank 0 measures the run (the time spent waiting in next() is its data wait) and writes
metrics.jsonl, summary.json and report.html, as tandem's trainer does. See docs/python.md."""

    def __init__(self, workers=None, *, rank=None, world=None, local_threads=0, start_step=0, epoch=None,
                 release_workers=False, images="auto", state=None, **settings):
        """Connects to the workers (waiting up to connect_timeout for one to answer), checks that they serve
        this dataset, and starts streaming: workers, rank, world, local_threads, start_step, epoch,
        release_workers, images, state and **settings as in help(tandem.Feed)"""
        self._args = (workers, rank, world, local_threads, start_step, epoch, release_workers, settings, images)
        self._open(state)

    def _open(self, state):
        workers, rank, world, local_threads, start_step, epoch, release_workers, settings, images = self._args
        self._handle = None
        self._stats = None
        self._state = None
        self._closed = False
        self._taken = 0
        self._start_step = None  # known once started
        self._sigterm = _SigtermWatch()
        self._handle = handle = _lib.tandem_feed_open(_request(workers, rank, world, local_threads, start_step,
                                                               epoch, release_workers, settings, images, state))
        if not handle:
            self._sigterm.restore()
            _raise()

        def started(seconds):
            if self._sigterm.signalled:
                self._end("training script stopped (SIGTERM while its feed connected)", True)
                raise Interrupted("SIGTERM while tandem.Feed connected to its workers: nothing was trained; exit, "
                                  "and run again to start (exit code 75)")
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
        self._start_step = info["start_step"]
        self._dataset = _dataset(info["dataset"])

    def _free(self):
        handle, self._handle = self._handle, None
        self._sigterm.restore()
        if handle:
            self._stats = json.loads(_lib.tandem_feed_stats(handle) or b"null")
            if self._start_step is not None:  # else the library's error (why it did not start) stays to raise
                self._state = self._state_at(handle, self._start_step + self._taken)
            _lib.tandem_feed_free(handle)

    @staticmethod
    def _state_at(handle, step):
        text = _lib.tandem_feed_state(handle, step)
        return json.loads(text) if text is not None else None

    def state_dict(self, taken=None):
        """Where this feed is in the data after the batches it has given (or the first `taken` of them): a dict
        of plain numbers (the step, the epoch, the sample of the epoch's order, the geometry, the dataset's
        fingerprint) to save with the model; tandem.Feed(state=...) or load_state_dict() resumes exactly there,
        at any world size. Every rank's is the same after the same number of steps."""
        step = self._start_step + (self._taken if taken is None else int(taken))
        if not self._handle:
            if self._state is None:
                raise RuntimeError("state_dict() of a feed that never started")
            return self._state
        state = self._state_at(self._handle, step)
        if state is None:
            _raise()
        return state

    def load_state_dict(self, state):
        """Restarts this feed at a state_dict() (of any world size): before its first batch only"""
        if self._taken:
            raise RuntimeError("load_state_dict() after this feed gave batches: load the state before the first "
                               "batch, or open a new tandem.Feed(state=...)")
        if not isinstance(state, dict):
            raise ValueError(f"load_state_dict() takes the dict state_dict() gave, not {type(state).__name__}")
        if self._handle:
            _lib.tandem_feed_keep_workers(self._handle)  # the feed that takes its place may release them
        self._free()
        self._open(state)

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
        self._sigterm.watch()  # a handler the script installed since the feed opened is wrapped too
        try:
            while status == _NEXT_WAIT:
                if self._sigterm.signalled:  # the script's own handler took SIGTERM: its loop ends here
                    self._end("training script stopped (SIGTERM)", True)
                    raise StopIteration
                status = _lib.tandem_feed_next(handle, _SLICE_S, ctypes.byref(out))
        except StopIteration:
            raise
        except BaseException as e:
            self._end(*_ending(type(e), e))
            raise
        if status == _NEXT_BATCH:
            self._taken += 1
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
        self._end(*_ending(None, None))

    def _end(self, why, interrupted):
        """close(), saying why the script's feed ended: `why` reaches the workers it releases, and
        `interrupted` (SIGTERM) the summary"""
        if self._sigterm.signalled and not interrupted:  # the signal came, whatever ended the loop after it
            why, interrupted = "training script stopped (SIGTERM)", True
        self._sigterm.restore()
        if self._handle and _lib.tandem_feed_end(self._handle, str(why).encode(), int(bool(interrupted))) < 0:
            _raise()
        self._closed = True

    def log(self, **values):
        """Report the script's own numbers, loss= and lr=: they go into the metric lines (step=N loss=...),
        metrics.jsonl and the summary, as the trainer's do"""
        if not self._handle:
            raise RuntimeError("log() on a closed feed: report before the feed ends")
        for name, value in values.items():
            if _lib.tandem_feed_log(self._handle, str(name).encode(), float(value)) < 0:
                _raise()

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

    def __exit__(self, exc_type, exc, tb):
        """Closes the feed; the workers it releases hear how the block ended (finished, crashed, stopped)"""
        self._end(*_ending(exc_type, exc))

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
        """The dataset (name, size, sample_shape, num_classes, dtype, mean, std, normalized (images already
        normalised with them: images=), fingerprint, class_names, fields: each field's name, dtype, shape and
        ragged), as tandem.plan() and TandemDataset.dataset_info give it"""
        return dict(self._dataset)


def plan(workers=None, *, rank=None, world=None, local_threads=0, start_step=0, images="auto", **settings):
    """What a Feed with these arguments would deliver (steps, batch_size, batches_per_epoch, dataset, and the
    rank, world and workers it found), its dataset found as the Feed finds it: this host's copy of the
    data, else learnt from the workers (waiting up to connect_timeout for one)"""
    task = _lib.tandem_plan_begin(_request(workers, rank, world, local_threads, start_step, None, False, settings,
                                           images))
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
