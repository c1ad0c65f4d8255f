"""A Python dataset for tandem's data hosts (--data python:class_folders.py:ClassFolders):
JPEG/PNG files in one folder per class, the "train" channel, decoded with PIL and cropped
and flipped with numpy, the way a user's own torch Dataset would be.

tandem runs it in Python processes on each data host (docs/datasets.md, "Python
datasets"): every random draw comes from tandem.sample_rng(), so a sample is the same
bytes whichever host makes it, and a resumed run gets the batches it would have had.
"""
import os

import numpy as np
from PIL import Image

import tandem


class ClassFolders:
    """Images under ROOT/<class>/<file>, each sample {"image": uint8 [3, size, size], "label": int}:
    a random crop of 50-100% of the shorter side, resized to `size`, flipped half the time.

    root: the class folders; default the train channel ($SM_CHANNEL_TRAIN, which the
    training toolkit sets on every host that receives the channel)."""

    def __init__(self, root=None, size=224):
        root = root or os.environ.get("SM_CHANNEL_TRAIN", "/opt/ml/input/data/train")
        if not os.path.isdir(root):
            raise FileNotFoundError(f"{root}: no such folder of class folders (is the train channel sent to this "
                                    "instance group?)")
        self.classes = sorted(d for d in os.listdir(root) if os.path.isdir(os.path.join(root, d)))
        self.files = [(os.path.join(root, c, f), label)
                      for label, c in enumerate(self.classes)
                      for f in sorted(os.listdir(os.path.join(root, c)))
                      if f.lower().endswith((".jpg", ".jpeg", ".png"))]
        if not self.files:
            raise FileNotFoundError(f"{root}: no .jpg, .jpeg or .png files in its class folders")
        self.size = size

    def __len__(self):
        return len(self.files)

    def __getitem__(self, index):
        path, label = self.files[index]
        rng = tandem.sample_rng()
        with Image.open(path) as f:
            image = f.convert("RGB")
        side = min(image.size)
        crop = int(side * rng.uniform(0.5, 1.0))
        left = int(rng.integers(0, image.size[0] - crop + 1))
        top = int(rng.integers(0, image.size[1] - crop + 1))
        image = image.resize((self.size, self.size), Image.BILINEAR, box=(left, top, left + crop, top + crop))
        pixels = np.asarray(image, dtype=np.uint8).transpose(2, 0, 1)
        if rng.random() < 0.5:
            pixels = pixels[:, :, ::-1]
        return {"image": np.ascontiguousarray(pixels), "label": label}
