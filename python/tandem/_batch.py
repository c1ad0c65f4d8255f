"""tandem.Batch: a batch's fields as numpy arrays over the library's own buffers (no copy),
freed with the last array; and the dataset description as Python sees it."""
from ._library import _lib

np = None  # numpy, imported by the first feed or plan: `import tandem` stays quick (serve() needs none)


def _numpy():
    global np, _TYPESTR
    if np is None:
        import numpy

        _TYPESTR = {name: numpy.dtype(name).str for name in ("uint8", "float32", "float16", "int32", "int64", "uint64")}
        np = numpy
    return np


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
