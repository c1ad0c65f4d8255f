"""One Python process of a tandem worker's pool for `--data python:FILE:NAME` (docs/datasets.md).

Started by the worker (src/data/python/process_pool.cc) as

    PYTHON _dataset_worker.py SOCKET_FD SHM_FD

SOCKET_FD is one end of a socketpair, SHM_FD a memfd the worker created. Needs numpy only:
never the compiled tandem module. Every message is a 4-byte little-endian length and a
JSON object. The worker sends

    {"op": "init", "file": F, "name": N, "args": {...}}   -> {"ok": true, "len": L,
                                                             "num_classes": K|null, "classes": [...]|null,
                                                             "ragged_fields": [...]}
    {"op": "get", "index": I, "seed": S}                   -> {"ok": true, "shm_size": B, "fields": {
                                                             name: {"dtype": "uint8", "shape": [3, 8, 8],
                                                                    "offset": O, "nbytes": B}    (an array)
                                                             name: {"dtype": "int64", "shape": [], "value": 3}}}
                                                                                                 (a number)
and a failure is {"ok": false, "error": "...", "where": "file:line", "traceback": "..."}.
Many samples at once (one message each way for them all):

    {"op": "many", "items": [[I, S], ...]}                 -> {"ok": true, "shm_size": B, "samples": [
                                                              {"ok": true, "fields": {...}} | a failure | null]}
their arrays one after the other in the shared memory; null: not made here (they did not
fit in it), for the worker to ask for alone. The dataset's __getitems__(indices) makes them
when it has one and the indices differ, with tandem.sample_rng(index) keyed per sample;
if it draws from random, numpy.random or torch's generator instead (their states moved),
whose draws would depend on how samples are grouped, its samples are dropped and this
process makes every sample with __getitem__ from then on, each seeded alone.
With "kind": "function" in init (the python(FILE:FUNCTION) step of --pipeline), NAME is
a function of one array (init answers "len": 0 and the function's ragged_fields attribute)
and the worker sends

    {"op": "call", "index": I, "seed": S, "shape": [C, H, W], "nbytes": B}
                                                           -> as "get", with the field "output"
                                                              (or the fields of a returned dict)
with the uint8 input at offset 0 of the shared memory (the worker grows the memfd for it);
its "transforms" make it a part of NAME(**args)'s torchvision transform; "native": true asks
if tandem makes the dataset itself (_torchvision_native.py). A tandem.Image is "encoded".
init's "max_shm" caps the shared memory: a sample needing more is {"ok": false, "shm_needed": B}.
Arrays lie in the shared memory at their offsets; a sample larger than the mapping grows
the memfd (ftruncate) and the worker maps it again at "shm_size". The C++ side of these
messages is src/data/python/pool_channel.h. The process ends on EOF from the worker, or
with it: the worker starts it with PR_SET_PDEATHSIG (SIGKILL), and every process the
dataset forks here gets the same tie to this one, so nothing outlives the worker.
"""
import os
import sys

# Run by path from inside the package: sys.path[0] is this folder, where tandem/torch.py
# would shadow the real torch. Make it the package's parent, so that `import tandem`
# finds this package (for tandem.sample_rng) and `import torch` finds torch.
sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_TANDEM_DATASET_CHILD = True  # tandem/__init__.py then leaves the compiled module alone

import importlib.util  # noqa: E402
import json  # noqa: E402
import mmap  # noqa: E402
import random  # noqa: E402
import struct  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

_TRACE_FRAMES = 4


def _die_with_parent():
    """In a process the dataset forks: SIGKILL when this pool process dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL
    except (OSError, AttributeError):
        pass  # no prctl: the worker still ends this process group when it stops


def _read_exact(fd, n):
    chunks = []
    while n > 0:
        chunk = os.read(fd, n) or os._exit(0)  # nothing: the worker closed its end, it is stopping
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _receive(fd):
    (n,) = struct.unpack("<I", _read_exact(fd, 4))
    return json.loads(_read_exact(fd, n))


def _send(fd, message):
    data = json.dumps(message).encode()
    data = struct.pack("<I", len(data)) + data
    while data:
        data = data[os.write(fd, data):]


def _user_frames(tb, user_file):
    """The last frames of a traceback, and the innermost one in the user's file as file:line."""
    here = os.path.abspath(__file__)
    frames = [f for f in traceback.extract_tb(tb) if os.path.abspath(f.filename) != here]
    mine = [f for f in frames if os.path.abspath(f.filename) == user_file] or frames[-1:]
    where = f"{mine[-1].filename}:{mine[-1].lineno}" if mine else ""
    return where, "".join(traceback.format_list(frames[-_TRACE_FRAMES:])).rstrip()


def _error_reply(error, where="", trace="", **extra):
    """Every failure reply: {"ok": false, "error", "where", "traceback"} and any extra keys."""
    return {"ok": False, "error": error, "where": where, "traceback": trace, **extra}


def _failure(exc, user_file):
    where, trace = _user_frames(exc.__traceback__, user_file)
    return _error_reply(f"{type(exc).__name__}: {exc}", where, trace)


def _answer(np, shared, user_file, make):
    """The reply for one sample: make() seeded and written to shared memory, or why not."""
    try:
        return make()
    except _SharedMemoryFull as e:
        return _error_reply(str(e), shm_needed=e.needed)
    except Exception as e:  # noqa: BLE001: the user's code may raise anything
        return _failure(e, user_file)


def _load_function(file, name, transforms=None):
    """FUNCTION of a python(FILE:FUNCTION) step: a callable in FILE; given transforms, a part
    of NAME(**args)'s torchvision transform (_native_parts.python_part)."""
    if transforms is not None:
        from tandem._native_parts import python_part
        return python_part(_load(file, name, transforms["args"]), transforms)
    function = _attribute(_import(file), file, name)
    if not callable(function):
        raise TypeError(f"{file}'s '{name}' is a {type(function).__name__}, not a function: "
                        "name a function of one uint8 array [C, H, W] that returns an array or a dict of fields")
    return function


def _attribute(module, file, name):
    if not hasattr(module, name):
        public = sorted(n for n in vars(module) if not n.startswith("_") and callable(getattr(module, n)))
        raise AttributeError(f"{file} has no '{name}' (it defines: {', '.join(public) or 'nothing callable'})")
    return getattr(module, name)


def _import(file):
    folder = os.path.dirname(file)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    module_name = os.path.splitext(os.path.basename(file))[0]
    spec = importlib.util.spec_from_file_location(module_name, file)
    if spec is None:
        raise ImportError(f"{file} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module


def _load(file, name, args):
    dataset = _attribute(_import(file), file, name)(**args)
    for need in ("__len__", "__getitem__"):
        if not hasattr(dataset, need):
            raise TypeError(f"{name}(...) returned a {type(dataset).__name__}, which has no {need}: "
                            "return an object with __len__ and __getitem__ (a torch Dataset works)")
    return dataset


def _classes(dataset):
    num_classes = getattr(dataset, "num_classes", None)
    classes = getattr(dataset, "classes", None)
    if classes is not None:
        classes = [str(c) for c in classes]
    if num_classes is not None:
        num_classes = int(num_classes)
    return num_classes, classes


class _SharedMemoryFull(Exception):
    def __init__(self, needed):
        super().__init__(f"the sample needs {needed} bytes of shared memory")
        self.needed = needed


class _Shared:
    """The memfd both sides map; grown here when a sample does not fit."""

    def __init__(self, fd, limit=0):
        self.fd = fd
        self.limit = limit or (1 << 62)
        self.size = os.fstat(fd).st_size
        self.map = mmap.mmap(fd, self.size)

    def refresh(self):
        """Maps the memfd again if the worker grew it (a call's input)."""
        size = os.fstat(self.fd).st_size
        if size > self.size:
            self.map.close()
            self.size = size
            self.map = mmap.mmap(self.fd, size)

    def fit(self, needed):
        if needed <= self.size:
            return
        if needed > self.limit:
            raise _SharedMemoryFull(needed)
        size = min(max(needed, 2 * self.size), self.limit)
        self.map.close()
        os.ftruncate(self.fd, size)
        self.size = size
        self.map = mmap.mmap(self.fd, size)


def _as_fields(sample):
    if isinstance(sample, dict):
        return sample
    if isinstance(sample, (tuple, list)) and len(sample) == 2:
        return {"image": sample[0], "label": sample[1]}
    raise TypeError(f"__getitem__ returned a {type(sample).__name__}: return a dict of fields, "
                    "like {'image': uint8 array [C, H, W], 'label': int}, or an (image, label) tuple")


def _field(np, value):
    """(descriptor, contiguous array or None) for one field's value."""
    if isinstance(value, (bool, np.bool_)):
        return {"dtype": "bool", "shape": [], "value": bool(value)}, None
    if isinstance(value, (int, np.integer)):
        return {"dtype": "int64", "shape": [], "value": int(value)}, None
    if isinstance(value, (float, np.floating)):
        return {"dtype": "float64", "shape": [], "value": float(value)}, None
    if not isinstance(value, np.ndarray):
        if type(value).__module__ == "tandem._sample" and type(value).__name__ == "Image":  # decoded by tandem
            data = np.frombuffer(value.read(), np.uint8)
            return {"dtype": "encoded", "shape": [len(data)]}, data
        if hasattr(value, "numpy") and hasattr(value, "detach"):  # a torch tensor
            value = value.detach().cpu().numpy()
        else:
            return {"dtype": type(value).__name__, "shape": None}, None
    if value.ndim == 0:  # a 0-d array is its number
        return _field(np, value.item())
    return {"dtype": str(value.dtype), "shape": list(value.shape)}, value  # any strides: copied once, below


def _write_fields(np, fields, shared, offset=0):
    """Writes the fields' arrays from `offset` of the shared memory: the reply, and where the next sample's may start."""
    arrays, out = [], {}
    for name, value in fields.items():
        desc, array = _field(np, value)
        if array is not None and array.dtype.hasobject:
            raise TypeError(f"field {name!r} is an array of Python objects (dtype object), which has no bytes to send: "
                            "make it an array of numbers (np.stack its items; text as uint8 codes) or leave it out")
        if array is not None:
            desc["offset"], desc["nbytes"] = offset, array.nbytes
            arrays.append((offset, array))
            offset += (array.nbytes + 63) // 64 * 64
        out[str(name)] = desc
    shared.fit(offset)
    for at, array in arrays:
        if array.nbytes:
            view = np.frombuffer(shared.map, dtype=np.uint8, count=array.nbytes, offset=at)
            # One copy, straight from the array's strides (a transposed HWC image, a slice)
            # into C order in the shared memory.
            np.copyto(view.view(array.dtype).reshape(array.shape), array, casting="no")
            del view
    return {"ok": True, "shm_size": shared.size, "fields": out}, offset


_torch_accelerated = None  # whether torch here sees an accelerator: decided at the first sample


def _seed_torch(torch, seed):
    """torch.manual_seed(seed), without its cost where it changes nothing: it also queues the
    seeding of CUDA's generators with a captured stack (about 100 us a call). Without an
    accelerator torch has only its CPU generator, seeded alike either way."""
    global _torch_accelerated
    if _torch_accelerated is None:
        cuda, mps = getattr(torch, "cuda", None), getattr(getattr(torch, "backends", None), "mps", None)
        _torch_accelerated = bool((cuda is not None and cuda.is_available()) or
                                  (mps is not None and mps.is_available()) or
                                  (hasattr(torch, "xpu") and torch.xpu.is_available()))
    if _torch_accelerated:
        torch.manual_seed(seed)
    else:
        torch.default_generator.manual_seed(seed)


class _SeedTorchOnImport:
    """A finder that, when a sample first imports torch (inside __getitem__, not at the
    top of the dataset's file), seeds torch's generator with that sample's seed as the
    import ends: torch is then seeded for every sample, the first included. It leaves
    sys.meta_path once torch is imported."""

    def __init__(self):
        self.seed = None  # the sample being made (None: none)

    def find_spec(self, name, path=None, target=None):
        if name != "torch" or self.seed is None:
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec("torch")
        if spec is None or spec.loader is None:
            return spec
        load, seed = spec.loader.exec_module, self.seed

        def exec_module(module):
            load(module)
            _seed_torch(module, seed)

        spec.loader.exec_module = exec_module
        return spec


_torch_import = _SeedTorchOnImport()


def _seed(np, seed, index=None):
    import tandem._sample as state

    random.seed(seed)
    np.random.seed([seed & 0xFFFFFFFF, seed >> 32])
    if "torch" in sys.modules:
        _seed_torch(sys.modules["torch"], seed)
    elif _torch_import in sys.meta_path:
        _torch_import.seed = seed
    state.begin(seed, index)


def _call(np, shared, function, request):
    """The python() step: FUNCTION on the uint8 input the worker put in the shared memory."""
    shared.refresh()
    n = request["nbytes"]
    array = np.frombuffer(shared.map, dtype=np.uint8, count=n, offset=0).reshape(request["shape"]).copy()
    out = function(array)
    return _write_fields(np, out if isinstance(out, dict) else {"output": out}, shared)[0]


def _serve(np, sock, shared, dataset, user_file):
    def get(request):
        _seed(np, request["seed"], request["index"])
        return _write_fields(np, _as_fields(dataset[request["index"]]), shared)[0]

    def call(request):
        _seed(np, request["seed"])
        return _call(np, shared, dataset, request)

    from tandem._many import Many

    many = Many(np, dataset, lambda seed, index: _seed(np, seed, index),
                lambda fields, offset: _write_fields(np, _as_fields(fields), shared, offset),
                lambda e: _failure(e, user_file), _SharedMemoryFull, shared)
    ops = {"get": get, "call": call, "many": many}
    while True:
        request = _receive(sock)
        op = ops.get(request.get("op"))
        if op is None:
            _send(sock, _error_reply(f"unknown request {request.get('op')!r}"))
            continue
        started = time.process_time()  # every thread of this process: the sample's CPU
        reply = _answer(np, shared, user_file, lambda: op(request))
        reply["cpu"] = time.process_time() - started
        _send(sock, reply)


def main():
    sock, shm_fd = int(sys.argv[1]), int(sys.argv[2])
    os.register_at_fork(after_in_child=_die_with_parent)
    init = _receive(sock)
    user_file = os.path.abspath(init["file"])
    try:
        import numpy as np
    except ImportError as e:
        _send(sock, _error_reply(f"{sys.executable} cannot import numpy ({e}): install numpy for it, "
                                 "or pass --python with an interpreter that has it"))
        return
    try:
        shared = _Shared(shm_fd, init.get("max_shm", 0))
        if init.get("kind") == "function":
            dataset = _load_function(user_file, init["name"], init.get("transforms"))
            ragged = [str(f) for f in getattr(dataset, "ragged_fields", None) or ()]
            _send(sock, {"ok": True, "len": 0, "num_classes": None, "classes": None, "ragged_fields": ragged})
        else:
            dataset = _load(user_file, init["name"], init["args"])
            if "torch" not in sys.modules:  # a sample may import it: seeded then (_SeedTorchOnImport)
                sys.meta_path.insert(0, _torch_import)
            num_classes, classes = _classes(dataset)
            ragged = [str(f) for f in getattr(dataset, "ragged_fields", None) or ()]
            reply = {"ok": True, "len": int(len(dataset)), "num_classes": num_classes, "classes": classes,
                     "ragged_fields": ragged}
            if init.get("native"):  # a torchvision image folder is made natively (issue 52)
                from tandem._torchvision_native import describe
                reply["native"], reply["native_reason"] = describe(dataset, init)
            _send(sock, reply)
    except BaseException as e:  # noqa: BLE001: SystemExit from the user's module is an error too
        _send(sock, _failure(e, user_file))
        return
    _serve(np, sock, shared, dataset, user_file)


if __name__ == "__main__":
    main()
