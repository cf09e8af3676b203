"""A small custom CNN for 3×32×32 images: what `rooflow` measures for a network of your own.

    rooflow estimate examples.tiny_cnn.model:build --input 3x32x32 --batch 8 --mode training
"""

from torch import nn


class TinyCNN(nn.Module):
    def __init__(self, classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(inplace=True), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(inplace=True), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 8 * 8, classes))

    def forward(self, x):
        return self.head(self.features(x))


def build() -> nn.Module:
    """The factory rooflow calls (config: `factory: examples.tiny_cnn.model:build`)."""
    return TinyCNN()
