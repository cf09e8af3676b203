"""BatchNorm training kernels that run one thread block per channel (PyTorch's native NCHW kernels).

PyTorch runs BatchNorm on bf16 activations in its own kernels, never cuDNN (rooflow.estimate.timemodel,
``NATIVE_NORMALIZATION_OPS``). In training, its statistics kernel (``batch_norm_collect_statistics_kernel``)
and the reduction of backward (``batch_norm_backward_reduce_kernel``) launch one block per channel
(aten/src/ATen/native/cuda/Normalization.cuh: ``dim3 blocks(input.size(1))``), each block walking the
N·H·W elements of its channel. A layer with few channels and large images (a stem: 64 channels of
N × 112 × 112) then leaves most SMs idle and takes the time one block needs for its channel, whatever
the bandwidth: ``passes × elements per channel × waves / block_elements_per_second``.

The channels are read from the ops table: a training ``native_batch_norm`` reads its input, weight, bias
and running statistics (4 × C fp32 values) and writes its output and the saved mean and inverse standard
deviation (2 × C): bytes read − bytes written = 8 · C.
"""

from __future__ import annotations

import math

BLOCK_OPS = {"native_batch_norm": 1, "native_batch_norm_backward": 2}  # op → per-channel passes (inputs read)
BLOCKS_PER_SM = 4  # 512-thread blocks, 2,048 threads per SM
PARAM_BYTES_PER_CHANNEL = 8  # (4 read − 2 written) fp32 values per channel


def channels_by_layer(ops, element_bytes: float) -> dict[str, tuple[int, float]]:
    """{layer: (channels, elements per channel)} of the training BatchNorms of an ops table (per call)."""
    found = {}
    rows = ops[(ops["op"] == "native_batch_norm") & (ops["phase"] == "forward")]
    for layer, read, written, calls in zip(rows["layer"], rows["bytes_read"], rows["bytes_written"], rows["calls"]):
        calls = max(1, int(calls))
        channels = round((float(read) - float(written)) / calls / PARAM_BYTES_PER_CHANNEL)
        if channels <= 0:
            continue
        activation_elements = (float(written) / calls - 2 * 4 * channels) / element_bytes
        found[layer] = (channels, activation_elements / channels)
    return found


def block_seconds(op: str, channels: int, elements_per_channel: float, sm_count: int,
                  block_elements_per_second: float) -> float:
    """Seconds of the per-channel passes of one native BatchNorm call (module docstring)."""
    passes = BLOCK_OPS.get(op, 0)
    if not passes or not block_elements_per_second:
        return 0.0
    waves = math.ceil(channels / (BLOCKS_PER_SM * max(1, sm_count)))
    return passes * elements_per_channel * waves / block_elements_per_second
