"""NVIDIA DeepLearningExamples' ResNeXt101-32x4d and SE-ResNeXt101-32x4d, as your own models: grouped
convolutions and squeeze-and-excitation that torchvision builds by no name. Their published steps
(tests/data/published/nvidia-dle-resnext-steps.json) check rooflow's predictions on GPUs it never ran on.

    rooflow estimate examples.resnext.model:se_resnext101_32x4d --input 3x224x224 --batch 64 --mode training --device v100-sxm2-16gb

The layers of PyTorch/Classification/ConvNets/image_classification/models/resnet.py at commit 291f0d02 (the one
its READMEs' tables were measured with), from torchvision's ResNet parts:
- ResNeXt101-32x4d: NVIDIA's Arch(layers [3, 4, 23, 3], widths [128, 256, 512, 1024], expansion 2,
  cardinality 32) is torchvision's ResNet(Bottleneck, [3, 4, 23, 3], groups=32, width_per_group=4): each block a
  1×1 convolution to the width, a 3×3 one of 32 groups of 4 (first stage) to 32 of 32 channels, a 1×1 one to twice
  the width (torchvision's planes × 4), BatchNorm and ReLU after each, stride 2 on the 3×3.
- SE-ResNeXt101-32x4d: the same, each block's output weighed by its squeeze-and-excitation before the residual
  add: the spatial mean, nn.Linear(channels, 16) (NVIDIA's se_squeeze is 16 units, not a reduction ratio), ReLU,
  nn.Linear(16, channels), sigmoid, then ``torch.addcmul(residual, out, weights)`` (its fused_se default).
"""

from __future__ import annotations

import torch
from torch import nn
from torchvision.models.resnet import Bottleneck, ResNet

LAYERS = [3, 4, 23, 3]
GROUPS, WIDTH_PER_GROUP = 32, 4
SE_UNITS = 16


class SqueezeExcitationBottleneck(Bottleneck):
    """torchvision's Bottleneck with NVIDIA's squeeze-and-excitation on its output (module docstring)."""

    def __init__(self, inplanes: int, planes: int, *args, **kwargs):
        super().__init__(inplanes, planes, *args, **kwargs)
        channels = planes * self.expansion
        self.squeeze = nn.Linear(channels, SE_UNITS)
        self.expand = nn.Linear(SE_UNITS, channels)

    def forward(self, x):
        residual = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        weights = torch.sigmoid(self.expand(self.relu(self.squeeze(out.mean((2, 3))))))
        return self.relu(torch.addcmul(residual, out, weights[:, :, None, None], value=1))


def resnext101_32x4d() -> nn.Module:
    return ResNet(Bottleneck, LAYERS, groups=GROUPS, width_per_group=WIDTH_PER_GROUP)


def se_resnext101_32x4d() -> nn.Module:
    return ResNet(SqueezeExcitationBottleneck, LAYERS, groups=GROUPS, width_per_group=WIDTH_PER_GROUP)
