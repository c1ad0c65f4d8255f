"""Many samples of a Python dataset in one request: the "many" operation of a tandem
worker's Python process (_dataset_worker.py, whose docstring has the protocol).

Pure Python (numpy, and torch when the dataset imported it): imported by the worker's
processes without the compiled module.
"""
import random
import sys

_MOST_RAISED = 3  # __getitems__ calls in a row that may raise before it is no longer called
_PROGRESS_BYTES = 64  # steps made, and the samples of the next, before the arrays (pool_channel.h)


def global_draws(np):
    """The states of the generators tandem seeds per sample: any draw moves one."""
    legacy = np.random.get_state(legacy=True)
    torch = sys.modules.get("torch")
    torch_state = bytes(torch.default_generator.get_state().numpy()) if torch is not None else None
    return random.getstate(), legacy[1].tobytes(), legacy[2:], torch_state


def _moved(before, after):
    """Whether a generator's state moved between two global_draws (torch's only when it was
    imported before: one imported meanwhile has no state to compare with)."""
    if before[3] is None:
        after = after[:3] + (None,)
    return before != after


class Many:
    """Many samples in one request ("many"): __getitems__ where it can be used, else
    __getitem__ for each, seeded alone; arrays one after the other in the shared memory.
    The worker's own pieces come in: seed(seed, index) seeds one sample; write(sample,
    offset) places its fields from `offset` and returns (reply, next offset), raising
    `full` when they do not fit; failure(exception) is the reply for one that raised."""

    def __init__(self, np, dataset, seed, write, failure, full, shared):
        self.np, self.dataset, self.seed, self.write, self.failure, self.full = np, dataset, seed, write, failure, full
        self.shared = shared
        self.batched = callable(getattr(dataset, "__getitems__", None))
        self.raised = 0  # __getitems__ calls in a row that raised
        self.made = 0    # samples made, in all: the worker waits while it moves
        self.checked = False  # __getitems__ held to __getitem__ (_differs), at its first use

    def __call__(self, request):
        items = [(int(i), int(s)) for i, s in request["items"]]
        samples = self._together(items) if request.get("batched", True) else None
        out, offset = [], _PROGRESS_BYTES
        for k, (index, seed) in enumerate(items):
            self._made(1)
            try:
                if samples is None:
                    self.seed(seed, index)
                    sample = self.dataset[index]
                else:
                    sample = samples[k]
                reply, offset = self.write(sample, offset)
                del reply["shm_size"]
                out.append(reply)
            except self.full:
                out.extend([None] * (len(items) - k))  # the worker asks for these alone
                break
            except Exception as e:  # noqa: BLE001: the user's code may raise anything
                if samples is None:
                    out.append(self.failure(e))
                    continue
                # From __getitems__: a sample tandem cannot send (an array of Python
                # objects) that __getitem__ may give as it can. The rest are made alone.
                samples = None
                self._give_up(f"gave for index {index} a sample tandem cannot send ({type(e).__name__}: {e})")
                out.append(None)  # the worker asks for it alone: __getitem__ says if it is bad
        return {"ok": True, "shm_size": self.shared.size, "samples": out}

    def _made(self, next_call):
        """One more step made: the worker's wait for the reply goes on, for `next_call`
        samples' time (each has its own --sample-timeout)."""
        self.made += 1
        self.shared.map[:16] = self.made.to_bytes(8, "little") + next_call.to_bytes(8, "little")

    def _together(self, items):
        """The samples from one __getitems__ call, or None: make them one by one."""
        indices = [i for i, _ in items]
        if not self.batched or len(set(indices)) != len(indices):
            return None
        if not self.checked:
            self.checked = True
            why = self._differs()
            if why:
                return self._give_up(why)
        return self._batch(items)

    def _differs(self):
        """Why __getitems__ cannot stand in for __getitem__ ("" when it can): samples 0, the
        middle one and the last, made by __getitems__ in that order and reversed, must equal
        __getitem__'s, field by field (a dataset that returns them in another order, views
        of one reused buffer, or labels that are not their samples' would train on wrong
        samples, silently)."""
        n = len(self.dataset)
        probe = sorted({0, n // 2, n - 1}) if n > 0 else []
        if len(probe) < 2:
            return ""
        seeds = {i: 0x9E3779B97F4A7C15 ^ i for i in probe}
        alone = {}
        for i in probe:
            self._made(1)
            self.seed(seeds[i], i)
            try:
                alone[i] = _plain(self.np, self.dataset[i])
            except Exception:  # noqa: BLE001: a bad sample is named when it is asked for
                continue
        probe = [i for i in probe if i in alone]
        if len(probe) < 2:
            return ""
        for order in (probe, probe[::-1]):
            together = self._batch([(i, seeds[i]) for i in order])
            if together is None:
                return ""  # it raised or drew from a global generator: _batch said so, or will
            for i, sample in zip(order, together):
                why = _difference(self.np, alone[i], _plain(self.np, sample))
                if why:
                    return (f"gave for index {i} (asked for {order}) a sample other than __getitem__({i}): {why}: "
                            "return the samples in the order of the indices, each its own array (not views of one "
                            "buffer it reuses)")
        return ""

    def _batch(self, items):
        indices = [i for i, _ in items]
        import tandem._sample as state

        state.begin_many({i: s for i, s in items})
        before = global_draws(self.np)
        self._made(1)  # one sample's time for the call: a hang in it is found as soon as in one sample
        try:
            samples = list(self.dataset.__getitems__(indices))
        except Exception as e:  # noqa: BLE001: each sample alone says what went wrong, if anything
            # One bad sample among them is made alone and named; a __getitems__ that
            # always raises is given up.
            self.raised += 1
            return self._give_up(f"raised {type(e).__name__}: {e}") if self.raised >= _MOST_RAISED else None
        finally:
            state.begin(None)
        if _moved(before, global_draws(self.np)):
            return self._give_up("draws from random, numpy.random or torch, whose draws would depend on how "
                                 "samples are grouped (draw from tandem.sample_rng(index) in it to keep it)")
        if len(samples) != len(indices):
            return self._give_up(f"returned {len(samples)} samples for {len(indices)} indices")
        self.raised = 0
        return samples

    def _give_up(self, why):
        """From now on this process makes each sample with __getitem__, seeded alone."""
        self.batched = False
        print(f"tandem: {type(self.dataset).__name__}.__getitems__ {why}: making each sample with __getitem__ "
              "instead", file=sys.stderr, flush=True)


def _plain(np, sample):
    """A sample as {field: numpy array or number}, copied out of the dataset's buffers."""
    fields = sample if isinstance(sample, dict) else (
        {"image": sample[0], "label": sample[1]} if isinstance(sample, (tuple, list)) and len(sample) == 2
        else {"sample": sample})
    out = {}
    for name, value in fields.items():
        if hasattr(value, "numpy") and hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        out[str(name)] = np.array(value, copy=True) if isinstance(value, np.ndarray) else value
    return out


def _difference(np, a, b):
    """How two samples differ ("" when they do not)."""
    if a.keys() != b.keys():
        return f"fields {sorted(a)} against {sorted(b)}"
    for name in a:
        x, y = a[name], b[name]
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            same = (isinstance(x, np.ndarray) and isinstance(y, np.ndarray) and x.shape == y.shape and
                    x.dtype == y.dtype and (x.dtype.hasobject or np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")))
        else:
            try:
                same = bool(x == y)
            except Exception:  # noqa: BLE001: a value that cannot be compared is taken as equal
                same = True
        if not same:
            return f"its field {name!r} differs"
    return ""
