#!/usr/bin/python3
"""A tiny fully convolutional segmenter for shapes.py's Segmentation, with the
training_step tandem's trainer calls (docs/models.md), saved as TorchScript:

    /usr/bin/python3 segmentation_model.py segmenter.pt

training_step gets the batch as tandem serves it: image uint8 [N, 3, H, W] and mask
uint8 [N, H, W], as the dataset made them. forward is for predictions: the same uint8
images in, per-pixel scores [N, 2, H, W] out."""
import sys
from typing import Dict

import torch
from torch import nn
import torch.nn.functional as F


class Segmenter(nn.Module):
    def __init__(self, classes: int = 2, width: int = 16):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 3, padding=1), nn.BatchNorm2d(width), nn.ReLU(),
            nn.Conv2d(width, width, 3, padding=2, dilation=2), nn.ReLU(),
            nn.Conv2d(width, classes, 1))

    def forward(self, image: torch.Tensor) -> torch.Tensor:
        return self.body(image.float() / 255)

    @torch.jit.export
    def training_step(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(self(batch["image"]), batch["mask"].long())


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(Segmenter()).save(sys.argv[1] if len(sys.argv) > 1 else "segmenter.pt")
