# %% [markdown]
# # rooflow from Python: any nn.Module
# Run from the repository root: `python -m examples.estimate_api`. Each `# %%` cell also runs on its own in
# an editor that knows the format (VS Code, Jupytext).

# %%
import torch
from torch import nn

import rooflow

# %% [markdown]
# One layer on meta tensors (shapes only: no memory, no arithmetic), predicted on a T4. The result is a
# mapping with the keys of `rooflow estimate --format json`; `.layers` and `.ops` are the tables.

# %%
conv = nn.Conv2d(64, 128, 3, padding=1).to("meta")
result = rooflow.estimate_module(conv, (torch.empty(32, 64, 56, 56, device="meta"),), device="t4")
print(f"{result['forward_flops'] / 1e9:.2f} GFLOP, predicted {result['predicted_seconds'] * 1e3:.3f} ms on a T4 "
      f"({result['predicted_bound']}-bound)")

# %% [markdown]
# A model of two inputs that returns a dict, trained with its own loss (the default loss sums every floating
# output). Its parameters are on the CPU: rooflow counts a meta copy and warns; the model is left as it is.

# %%
from examples.two_input.model import build, loss  # noqa: E402

model = build()
result = rooflow.estimate_module(model, (torch.randn(16, 3, 32, 32), torch.randn(16, 8)), device="a100-sxm4-40gb",
                                 mode="training", loss_fn=loss, name="image_and_features")
print(f"training step: {result['total_flops'] / 1e6:.1f} MFLOP, backward/forward {result['forward_backward_ratio']:.2f}, "
      f"peak memory {result['peak_memory_bytes'] / 1e6:.1f} MB, fits: {result['fits']}")
print(result.layers[["layer", "type", "forward_flops", "backward_flops", "params"]].to_string(index=False))

# %% [markdown]
# A whole torchvision model: the same numbers as `rooflow estimate resnet50 --batch 64 --device t4`.

# %%
from rooflow.workload.models import build_meta_model  # noqa: E402

result = rooflow.estimate_module(build_meta_model("resnet50"), (torch.empty(64, 3, 224, 224, device="meta"),),
                                 device="t4", name="resnet50")
print(f"resnet50 b64 inference on a T4: {result['predicted_seconds'] * 1e3:.1f} ms predicted "
      f"({result['predicted_seconds_low'] * 1e3:.1f}–{result['predicted_seconds_high'] * 1e3:.1f})")
