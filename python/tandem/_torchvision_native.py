"""A torchvision image folder that tandem makes natively (issue 52).

A `python:FILE:NAME` dataset that is a torchvision `ImageFolder` (or `DatasetFolder`) with
torchvision's default loader is not run as Python: its sample list (paths, labels,
classes) and its `transform` (a v1 `torchvision.transforms.Compose` or a v2
`torchvision.transforms.v2.Compose`) are translated here into tandem's own steps, and the
worker makes its samples in C++ (decode through libjpeg-turbo or libpng, augment with
tandem's steps). describe() says what tandem needs for that, or why it cannot: a transform
tandem has no step for, an argument it would have to approximate (another interpolation, an
uneven jitter range), a loader or a `__getitem__` of the user's own. Nothing is approximated
silently: such a dataset is made by its own Python code, as before.

Runs inside the dataset's Python process (_dataset_worker.py); imports only what the
dataset already imported (torchvision), and never raises: a failure is a reason.
"""
import os
import sys
import tempfile

_DECODED = (".jpg", ".jpeg", ".png")  # what tandem's codecs read
# Where each step of tandem's works on the image, by the transform's domain: the PIL image
# the loader gives, a uint8 tensor (PILToTensor, ToImage) or a float one in [0, 1]
# (ToTensor, ConvertImageDtype, ToDtype(scale=True)), before Normalize.
_PIL, _UINT8, _FLOAT, _NORMALIZED = "PIL image", "uint8 tensor", "float tensor", "normalized tensor"


class _Refused(Exception):
    """Why a transform cannot be made natively."""


def describe(dataset, made_by=None):
    """(description, "") for an image folder tandem can make natively, else (None, why).

    made_by: {"file", "name", "args"}, how the dataset was made: transforms tandem has no
    step for then run in Python after tandem's steps (a python() step that makes the
    dataset again and applies them); None: such a transform leaves the dataset to Python.
    The description: {"root", "classes", "count", "list_file" (a file of "label<TAB>path"
    lines, paths relative to root where they are under it), "steps" (tandem's pipeline as a
    JSON array), "transform" (the transform's repr, for the log), "in_python" (why some
    transforms run in Python, "" when none do)}."""
    try:
        return _describe(dataset, made_by)
    except _Refused as e:
        return None, str(e)
    except Exception as e:  # noqa: BLE001: a bug here must leave the dataset to its own code
        return None, f"tandem could not read it ({type(e).__name__}: {e})"


def _describe(dataset, made_by):
    folder = sys.modules.get("torchvision.datasets.folder")
    if folder is None or not isinstance(dataset, folder.DatasetFolder):
        from tandem._native_parts import describe_listed
        return describe_listed(dataset, made_by)
    kind = type(dataset)
    for method in ("__getitem__", "__len__"):
        if getattr(kind, method) is not getattr(folder.DatasetFolder, method):
            raise _Refused(f"{kind.__name__} has its own {method}")
    if dataset.loader not in (folder.default_loader, folder.pil_loader):
        raise _Refused(f"its loader is {getattr(dataset.loader, '__name__', dataset.loader)!r}, not torchvision's")
    tv = sys.modules.get("torchvision")
    if dataset.loader is folder.default_loader and tv is not None and tv.get_image_backend() != "PIL":
        raise _Refused(f"torchvision's image backend is {tv.get_image_backend()!r}, not PIL")
    if dataset.target_transform is not None:
        raise _Refused("it has a target_transform")
    steps, in_python, output = translate(dataset.transform, made_by)
    root = os.path.abspath(os.fspath(dataset.root))
    classes = [str(c) for c in dataset.classes]
    return {"root": root, "classes": classes, "count": len(dataset.samples),
            "list_file": _write_list(dataset.samples, root, len(classes)), "steps": steps,
            "transform": " ".join(repr(dataset.transform).split())[:300], "in_python": in_python, "output": output}, ""


def _write_list(samples, root, num_classes):
    lines = []
    for path, label in samples:
        path = os.path.abspath(os.fspath(path))
        if not path.lower().endswith(_DECODED):
            raise _Refused(f"{path} is not a JPEG or PNG file (tandem decodes those)")
        if "\n" in path or "\t" in path:
            raise _Refused(f"the path {path!r} holds a tab or a line break")
        if not (isinstance(label, int) and 0 <= label < num_classes):
            raise _Refused(f"the label {label!r} of {path} is not a class index below {num_classes}")
        lines.append(f"{label}\t{os.path.relpath(path, root) if path.startswith(root + os.sep) else path}\n")
    with tempfile.NamedTemporaryFile("w", prefix="tandem-folder-", suffix=".tsv", delete=False,
                                     encoding="utf-8", errors="surrogateescape") as f:
        f.writelines(lines)
        return f.name


def translate(transform, made_by=None):
    """(steps, in_python, output): tandem's steps for a torchvision transform (v1 or v2), as
    a list of JSON objects; why some of them run in Python ("" when none do); what it ends
    in, "float32" (ToTensor, with or without Normalize) or "uint8" (PILToTensor). The first
    transform tandem has no step for, and what follows it up to the closing conversions
    (ToTensor, Normalize, ...), become one python() step when made_by says how to make the
    dataset again, the steps before it fix the image's size and it works on the image
    before ToTensor; else raises _Refused naming it."""
    state = {"domain": _PIL, "normalized": False}
    steps = [{"op": "decode", "channels": 3, "scaled": 0}]  # PIL's full decode, in RGB
    flat, index, in_python = _flatten(transform), 0, ""
    while index < len(flat):
        try:
            steps.extend(_step(flat[index], state))
            index += 1
        except _Refused as e:
            why = f"transform {index} ({_name(flat[index])}): {e}"
            stop = _closing(flat, index)
            steps.append(_python_step(made_by if _name(flat[index]) not in _CLOSING else None, index, stop, state,
                                      steps, why))
            in_python = f"transforms {index}-{stop - 1} ({', '.join(_name(t) for t in flat[index:stop])}) run in " \
                        f"Python after tandem's steps, because {why}"
            index = stop
    if state["domain"] == _PIL:
        raise _Refused("it ends in a PIL image, not a tensor (ToTensor, PILToTensor)")
    if not _fixes_size(steps):
        raise _Refused("no transform gives every image one size (RandomResizedCrop, CenterCrop, RandomCrop, "
                       "Resize((h, w)))")
    if state["domain"] == _FLOAT:  # ToTensor alone: values in [0, 1]
        steps.append({"op": "normalize", "args": [0, 0, 0, 1, 1, 1]})
    return steps, in_python, "uint8" if state["domain"] == _UINT8 else "float32"


_CLOSING = ("ToTensor", "ConvertImageDtype", "ToDtype", "PILToTensor", "ToImage", "ToImageTensor", "ToPureTensor",
            "Identity", "Normalize")


def _closing(flat, index):
    """Where the closing conversions start after flat[index]: the end of a Python part."""
    stop = len(flat)
    while stop > index + 1 and _name(flat[stop - 1]) in _CLOSING:
        stop -= 1
    return stop


def _fixes_size(steps):
    fixed = ("random_resized_crop", "center_crop", "random_crop")
    return any(s["op"] in fixed or (s["op"] == "resize" and s.get("width")) for s in steps)


def _python_step(made_by, start, stop, state, steps, why):
    """The python() step that runs transforms [start, stop) of the dataset's own transform."""
    if made_by is None:
        raise _Refused(why)
    if any(s["op"] == "python" for s in steps):
        raise _Refused(f"{why}, and transforms before it already run in Python")
    if state["domain"] not in (_PIL, _UINT8):
        raise _Refused(f"{why}, and it works on a {state['domain']}: only transforms before ToTensor run in Python "
                       "after tandem's steps")
    if not _fixes_size(steps):
        raise _Refused(f"{why}, and the steps before it do not give every image one size, which tandem needs "
                       "before a Python step")
    domain = "pil" if state["domain"] == _PIL else "uint8"
    return {"op": "python", "file": made_by["file"], "function": made_by["name"],
            "transforms": {"args": made_by.get("args") or {}, "from": start, "to": stop, "domain": domain}}


def _flatten(transform):
    if transform is None:
        return []
    if _name(transform) == "Compose" or type(transform).__name__ == "Sequential":
        out = []
        for t in getattr(transform, "transforms", None) or list(transform):
            out.extend(_flatten(t))
        return out
    return [transform]


def _name(t):
    return type(t).__name__


def _value(x):
    return getattr(x, "value", x)  # an InterpolationMode (or AutoAugmentPolicy) as its string


def _hw(size):
    if isinstance(size, int):
        return size, size
    size = [int(s) for s in size]
    return (size[0], size[0]) if len(size) == 1 else (size[0], size[1])


def _bilinear(t):
    mode = _value(getattr(t, "interpolation", "bilinear"))
    if mode not in ("bilinear", 2):
        raise _Refused(f"interpolation {mode!r}: tandem resamples bilinearly (antialiased) only")


def _antialiased(t, state):
    # A PIL image is always resampled with antialiasing; a tensor only when asked.
    if state["domain"] != _PIL and getattr(t, "antialias", True) is not True:
        raise _Refused("a tensor resized without antialias=True: tandem always antialiases")


def _geometry(t, state):
    if state["normalized"]:
        raise _Refused("after Normalize: tandem augments before normalising")


def _step(t, state):  # noqa: C901: one branch per transform, as the table in docs/datasets.md
    name = _name(t)
    if name in ("ToTensor", "ConvertImageDtype", "ToDtype"):
        return _to_float(t, state)
    if name in ("PILToTensor", "ToImage", "ToImageTensor"):
        state["domain"] = _UINT8 if state["domain"] == _PIL else state["domain"]
        return []
    if name in ("ToPureTensor", "Identity"):
        return []
    if name == "Normalize":
        return _normalize(t, state)
    _geometry(t, state)
    if name == "Resize":
        _bilinear(t)
        _antialiased(t, state)
        if getattr(t, "max_size", None) is not None:
            raise _Refused("max_size: tandem has no such limit")
        size = t.size if isinstance(t.size, int) else list(t.size)
        if isinstance(size, int) or len(size) == 1:
            return [{"op": "resize", "size": int(size if isinstance(size, int) else size[0])}]
        return [{"op": "resize", "size": size[0], "width": size[1]}]
    if name == "CenterCrop":
        h, w = _hw(t.size)
        return [{"op": "center_crop", "size": h, "width": w}]
    if name == "RandomResizedCrop":
        _bilinear(t)
        _antialiased(t, state)
        h, w = _hw(t.size)
        return [{"op": "random_resized_crop", "size": h, "width": w, "scale_min": float(t.scale[0]),
                 "scale_max": float(t.scale[1]), "ratio_min": float(t.ratio[0]), "ratio_max": float(t.ratio[1])}]
    if name in ("RandomHorizontalFlip", "RandomVerticalFlip"):
        return [{"op": "hflip" if name == "RandomHorizontalFlip" else "vflip", "p": float(t.p)}]
    if name in ("RandomGrayscale", "Grayscale"):
        return [_grayscale(t, 1.0)]
    if name == "RandomCrop":
        return [_random_crop(t, state)]
    if name == "RandomApply":
        return _random_apply(t, state)
    if name in ("RandomChoice", "RandomOrder"):
        return [_group(t, state, name, _step)]
    if name == "ColorJitter":
        return [_color_jitter(t, 1.0)]
    if name == "GaussianBlur":
        return [_gaussian_blur(t, 1.0)]
    if name == "RandomRotation":
        return [_rotation(t)]
    return _auto_augment(t, name) or _erasing(t, state, name)


def _to_float(t, state):
    name = _name(t)
    dtype = str(getattr(t, "dtype", "torch.float32"))
    if name == "ToDtype":
        if isinstance(t.dtype, dict):
            dtype = str(next((v for k, v in t.dtype.items() if "Image" in str(k)), t.dtype.get("others")))
        if "uint8" in dtype:
            return []
        if not getattr(t, "scale", False):
            raise _Refused(f"{dtype} without scale=True: values stay 0-255, which tandem does not give")
    if "float" not in dtype:
        raise _Refused(f"to {dtype}: tandem gives float32 images")
    state["domain"] = _FLOAT
    return []


def _normalize(t, state):
    if state["domain"] != _FLOAT or state["normalized"]:
        raise _Refused(f"Normalize of a {state['domain']}")
    mean, std = [float(m) for m in t.mean], [float(s) for s in t.std]
    if len(mean) == 1:
        mean, std = mean * 3, std * 3
    if len(mean) != 3 or len(std) != 3:
        raise _Refused(f"{len(mean)} channels' mean: tandem's images have 3")
    state["domain"], state["normalized"] = _NORMALIZED, True
    return [{"op": "normalize", "args": mean + std}]


def _random_apply(t, state):
    inner = list(t.transforms)
    if len(inner) != 1:
        raise _Refused(f"RandomApply of {len(inner)} transforms: tandem applies one step at a time")
    name, p = _name(inner[0]), float(t.p)
    if name == "ColorJitter":
        return [_color_jitter(inner[0], p)]
    if name == "GaussianBlur":
        return [_gaussian_blur(inner[0], p)]
    if name in ("RandomHorizontalFlip", "RandomVerticalFlip"):
        return [{"op": "hflip" if name == "RandomHorizontalFlip" else "vflip", "p": p * float(inner[0].p)}]
    if name in ("RandomGrayscale", "Grayscale"):
        return [_grayscale(inner[0], p)]
    raise _Refused(f"RandomApply of {name}: tandem has no such step")


# One function per transform (they use the names above, so they come last).
from tandem._torchvision_steps import (_auto_augment, _color_jitter, _erasing, _gaussian_blur, _grayscale,  # noqa: E402
                                       _group, _random_crop, _rotation)
