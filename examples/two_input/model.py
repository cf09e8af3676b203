"""A two-input model: an image and a vector of side features, fused before the head; it returns a dict
(rooflow's default training loss sums its floating outputs; `loss` below is the one this example's config
names instead).

    rooflow estimate examples.two_input.model:build --input 3x32x32 --input 8 --loss examples.two_input.model:loss
"""

import torch
from torch import nn


class ImageAndFeatures(nn.Module):
    def __init__(self, features: int = 8, classes: int = 5):
        super().__init__()
        self.image = nn.Sequential(nn.Conv2d(3, 8, 3, stride=2, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten())
        self.side = nn.Sequential(nn.Linear(features, 16), nn.ReLU())
        self.head = nn.Linear(8 + 16, classes)

    def forward(self, image, side):
        fused = torch.cat([self.image(image), self.side(side)], dim=1)
        return {"logits": self.head(fused), "embedding": fused}


def build() -> nn.Module:
    return ImageAndFeatures()


def loss(output) -> torch.Tensor:
    """The training loss rooflow calls with the model's output: the logits' log-sum-exp (a stand-in for a
    cross-entropy against labels the example does not have)."""
    return torch.logsumexp(output["logits"], dim=1).mean()
