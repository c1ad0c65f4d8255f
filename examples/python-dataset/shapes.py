"""Two small generated datasets for `--data python:shapes.py:NAME`: bright shapes drawn on
dark noise, so that the example runs anywhere with numpy alone (no files to download).

    Segmentation: image uint8 [3, size, size] + mask uint8 [size, size] (1 on the shape)
    Detection:    image uint8 [3, size, size] + boxes float32 [k, 4] (x1, y1, x2, y2 as
                  fractions of the side) + labels int64 [k] (the colour: 0 red, 1 green,
                  2 blue), k from 1 to max_boxes: both ragged

Each sample draws from numpy.random, which tandem seeds per sample from (--seed, epoch,
index): the same sample is the same bytes on every worker, and differs in each epoch."""
import numpy as np


def noise(size):
    """Dark noise, uint8 [3, size, size]."""
    return np.random.randint(0, 64, (3, size, size), dtype=np.uint8)


class Segmentation:
    def __init__(self, n=512, size=32):
        self.n, self.size = n, size

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        s = self.size
        image = noise(s)
        cy, cx = np.random.randint(s // 4, 3 * s // 4, 2)
        r = np.random.randint(max(s // 8, 1), max(s // 4, 2))
        yy, xx = np.mgrid[:s, :s]
        if np.random.rand() < 0.5:
            inside = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r  # a disc
        else:
            inside = (np.abs(yy - cy) <= r) & (np.abs(xx - cx) <= r)  # a square
        image[:, inside] = np.random.randint(128, 256, (3, 1))
        return {"image": image, "mask": inside.astype(np.uint8)}


class Detection:
    ragged_fields = ["boxes", "labels"]  # their first dimension (the box count) varies
    colours = ("red", "green", "blue")

    def __init__(self, n=512, size=32, max_boxes=3):
        self.n, self.size, self.max_boxes = n, size, max_boxes

    def __len__(self):
        return self.n

    def __getitem__(self, index):
        s = self.size
        image = noise(s)
        k = np.random.randint(1, self.max_boxes + 1)
        boxes = np.zeros((k, 4), np.float32)
        labels = np.zeros(k, np.int64)
        for j in range(k):
            w, h = np.random.randint(max(s // 6, 1), max(s // 3, 2), 2)
            x1, y1 = np.random.randint(0, s - w), np.random.randint(0, s - h)
            c = np.random.randint(len(self.colours))
            image[:, y1:y1 + h, x1:x1 + w] = 32
            image[c, y1:y1 + h, x1:x1 + w] = 255
            boxes[j] = (x1 / s, y1 / s, (x1 + w) / s, (y1 + h) / s)
            labels[j] = c
        return {"image": image, "boxes": boxes, "labels": labels}
