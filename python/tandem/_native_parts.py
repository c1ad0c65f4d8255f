"""The Python side of datasets tandem makes natively (issue 52, docs/datasets.md):

- describe_listed: a dataset of the user's own whose samples are (tandem.Image(path),
  label). Its first Python process reads every sample's path and label once, at start
  (the dataset's __getitem__ returns tandem.Image(path) and opens nothing, so this is
  quick), and translates the dataset's `transform` attribute as a torchvision
  ImageFolder's (_torchvision_native). The worker then makes the samples in C++ exactly
  as it makes such a folder's.
- python_part: the transforms tandem has no step for, run by a python() step's processes
  on the image tandem's steps made.
"""
import os
import sys

from tandem._torchvision_native import _Refused, _flatten, _name, _write_list, translate


def _image_of(sample):
    """The tandem.Image a sample gives as its image (a tuple's first item, a dict's "image")."""
    image_type = getattr(sys.modules.get("tandem._sample"), "Image", None)
    image = sample.get("image") if isinstance(sample, dict) else \
        sample[0] if isinstance(sample, tuple) and sample else None
    return image if image_type is not None and isinstance(image, image_type) else None


def _image_and_label(sample):
    """(path, label) of a sample that is (tandem.Image(path), int) or {"image", "label"} and
    nothing more; else None."""
    image = _image_of(sample)
    if image is None or image.path is None:
        return None
    if isinstance(sample, dict):
        label = sample["label"] if set(sample) == {"image", "label"} else None
    else:
        label = sample[1] if len(sample) == 2 else None
    try:
        return os.path.abspath(image.path), int(label.item() if hasattr(label, "item") else label)
    except (TypeError, ValueError):
        return None


def _listed(dataset):
    """Every sample's (path, label), or None when one is not (tandem.Image(path), label)."""
    samples = []
    for index in range(len(dataset)):
        pair = _image_and_label(dataset[index])
        if pair is None:
            return None
        samples.append(pair)
    return samples


def _classes(dataset, labels):
    classes = getattr(dataset, "classes", None)
    if classes is not None and not isinstance(classes, str):
        return [str(c) for c in classes]
    k = getattr(dataset, "num_classes", None)
    return [str(i) for i in range(int(k) if k is not None else max(labels) + 1)]


def describe_listed(dataset, made_by):
    """As _torchvision_native.describe, for a dataset whose images are tandem.Image: listed
    once when every sample is (tandem.Image(path), label), else {"per_sample": true, ...}:
    each sample's image bytes come with its other fields and tandem decodes them. Raises
    _Refused when its images are not tandem.Image, or it has no transform."""
    if "tandem._sample" not in sys.modules or _image_of(dataset[0]) is None:
        raise _Refused("it is not a torchvision ImageFolder or DatasetFolder, and its images are not tandem.Image")
    transform = getattr(dataset, "transform", None)
    if transform is None:
        raise _Refused("its samples are tandem.Image files but it has no `transform` attribute: give it the "
                       "torchvision transform tandem applies (self.transform = T.Compose([...]))")
    steps, in_python, output = translate(transform, made_by)
    described = {"steps": steps, "in_python": in_python, "kind": "tandem-images/v1", "output": output,
                 "transform": " ".join(repr(transform).split())[:300]}
    samples = _listed(dataset)
    if samples is None:
        return dict(described, per_sample=True), ""
    classes = _classes(dataset, [label for _, label in samples])
    root = os.path.commonpath([os.path.dirname(path) for path, _ in samples])
    return dict(described, root=root, classes=classes, count=len(samples), what="a dataset of tandem.Image files",
                list_file=_write_list(samples, root, len(classes))), ""


def python_part(dataset, part):
    """The function a python() step of translate() runs: transforms [from, to) of the
    dataset's transform on tandem's uint8 [C, H, W] image, given as torchvision gives it
    (a PIL image, or a uint8 tensor), and their result as a uint8 [C, H, W] array."""
    import numpy as np

    transforms, domain = _flatten(dataset.transform)[part["from"]:part["to"]], part["domain"]
    names = ", ".join(_name(t) for t in transforms)
    if domain == "pil":
        from PIL import Image

        def given(a):
            return Image.fromarray(np.ascontiguousarray(a.transpose(1, 2, 0)) if a.shape[0] == 3 else a[0])
    else:
        import torch

        given = torch.from_numpy

    def run(array):
        x = given(array)
        for t in transforms:
            x = t(x)
        return _chw(np, x, names)
    return run


def _chw(np, x, names):
    if hasattr(x, "convert") and hasattr(x, "mode"):  # a PIL image
        a = np.asarray(x if x.mode in ("RGB", "L") else x.convert("RGB"))
        return np.ascontiguousarray(a.transpose(2, 0, 1) if a.ndim == 3 else a[None])
    if hasattr(x, "numpy") and str(getattr(x, "dtype", "")) == "torch.uint8":
        a = x.detach().cpu().numpy()
        return np.ascontiguousarray(a if a.ndim == 3 else a[None])
    raise TypeError(f"transforms {names} gave a {type(x).__name__} {getattr(x, 'dtype', '')}, where a PIL image or a "
                    "uint8 tensor goes on to the transforms after them")
