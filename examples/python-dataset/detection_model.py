#!/usr/bin/python3
"""A tiny one-stage detector for shapes.py's Detection, with the training_step tandem's
trainer calls (docs/models.md), saved as TorchScript:

    /usr/bin/python3 detection_model.py detector.pt

The image is cut into cells (stride 8): each cell predicts background or a class, and a
box. training_step gets the batch as tandem serves it: image uint8 [N, 3, H, W], and the
ragged fields as their rows concatenated: boxes float32 [B, 4] and labels int64 [B] for
all B boxes of the batch, with boxes_lengths int64 [N] (each sample's box count) and
boxes_offsets int64 [N + 1] (sample i's rows are offsets[i] to offsets[i + 1]). The cell
holding a box's centre must predict its class and its box."""
import sys
from typing import Dict, Tuple

import torch
from torch import nn
import torch.nn.functional as F


class Detector(nn.Module):
    def __init__(self, classes: int = 3, width: int = 32):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
            nn.Conv2d(32, width, 3, stride=2, padding=1), nn.ReLU())
        self.scores = nn.Conv2d(width, classes + 1, 1)  # per cell: 0 = background, 1 + class
        self.boxes = nn.Conv2d(width, 4, 1)             # per cell: x1, y1, x2, y2 in [0, 1]

    def forward(self, image: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        f = self.body(image.float() / 255)
        return self.scores(f), torch.sigmoid(self.boxes(f))

    @torch.jit.export
    def training_step(self, batch: Dict[str, torch.Tensor]) -> torch.Tensor:
        scores, boxes = self(batch["image"])
        cls, target, has_box = self.targets(batch["boxes"], batch["labels"], batch["boxes_lengths"],
                                            scores.size(0), scores.size(2), scores.size(3))
        loss = F.cross_entropy(scores, cls)
        predicted = boxes.permute(0, 2, 3, 1)[has_box]
        if predicted.size(0) > 0:
            loss = loss + F.l1_loss(predicted, target[has_box])
        return loss

    @torch.jit.export
    def targets(self, boxes: torch.Tensor, labels: torch.Tensor, lengths: torch.Tensor, n: int, h: int,
                w: int) -> Tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per cell: the class to predict ([n, h, w], 0 = none) and the box ([n, h, w, 4])."""
        sample = torch.repeat_interleave(torch.arange(n, device=boxes.device), lengths)
        cx = ((boxes[:, 0] + boxes[:, 2]) / 2 * w).long().clamp(0, w - 1)
        cy = ((boxes[:, 1] + boxes[:, 3]) / 2 * h).long().clamp(0, h - 1)
        cls = torch.zeros(n, h, w, dtype=torch.long, device=boxes.device)
        cls[sample, cy, cx] = labels + 1
        target = torch.zeros(n, h, w, 4, device=boxes.device)
        target[sample, cy, cx] = boxes
        return cls, target, cls > 0


if __name__ == "__main__":
    torch.manual_seed(0)
    torch.jit.script(Detector()).save(sys.argv[1] if len(sys.argv) > 1 else "detector.pt")
