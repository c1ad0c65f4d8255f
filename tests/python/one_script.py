#!/usr/bin/env python3
"""One script on every host (issue 31's job shape, as SageMaker's toolkit runs an entry
point): tandem.serve() makes a data host serve; the trainer host trains a softmax
regression in numpy (no torch needed) on tandem.Feed and checks that its loss falls.

    tandem simulate --every-host --data synthetic --image-size 16 --num-classes 4 -- python3 one_script.py

Exits 0 when the loss fell, 1 when it did not.
"""
import sys

import numpy as np

import tandem

SETTINGS = dict(data="synthetic", image_size=16, num_classes=4)

place = tandem.serve(**SETTINGS)  # a data host serves here, then exits 0
print(f"one_script: host {place['host']} trains, workers {place['workers']}", file=sys.stderr)
w = np.zeros((3 * 16 * 16, 4), np.float32)
losses = []
with tandem.Feed(batch_size=32, steps=80, release_workers=True, **SETTINGS) as feed:
    for images, labels in feed:
        x = images.reshape(len(images), -1).astype(np.float32)
        z = x @ w
        z -= z.max(1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(1, keepdims=True)
        losses.append(float(-np.log(p[np.arange(len(labels)), labels] + 1e-9).mean()))
        p[np.arange(len(labels)), labels] -= 1
        w -= 0.01 * x.T @ p / len(labels)
first, last = np.mean(losses[:10]), np.mean(losses[-10:])
print(f"one_script: {len(losses)} steps, loss {first:.3f} -> {last:.3f}")
sys.exit(0 if last < first else 1)
