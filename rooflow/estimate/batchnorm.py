"""PyTorch's native NCHW BatchNorm kernels, where their thread blocks rather than their bytes set the time.

PyTorch runs BatchNorm on bf16 activations in its own kernels, never cuDNN (rooflow.estimate.timemodel,
``NATIVE_NORMALIZATION_OPS``). In training, its statistics kernel (``batch_norm_collect_statistics_kernel``)
and the reduction of backward (``batch_norm_backward_reduce_kernel``) launch one block per channel
(aten/src/ATen/native/cuda/Normalization.cuh: ``dim3 blocks(input.size(1))``), each block walking the
N·H·W elements of its channel. A layer with few channels and large images (a stem: 64 channels of
N × 112 × 112) then leaves most SMs idle and takes the time one block needs for its channel, whatever
the bandwidth: ``passes × elements per channel × waves / block_elements_per_second``.

Its normalising pass (``batch_norm_transform_input_kernel``: a bf16 BatchNorm's whole inference, and the
second kernel of its training forward) launches one block per (sample, channel) plane instead
(``blocks_trans(C, min(256K / C, ⌈N / tb⌉))`` of ``tf × tb`` threads, each block walking a plane's H·W
elements). Where planes are small (7×7, 14×14) the blocks, not the bytes, set its time: the SMs retire one such
block every :data:`TRANSFORM_BLOCK_CYCLES` cycles (:func:`transform_seconds`).

The channels are read from the ops table: a training ``native_batch_norm`` reads its input, weight, bias
and running statistics (4 × C fp32 values) and writes its output and the saved mean and inverse standard
deviation (2 × C): bytes read − bytes written = 8 · C.
"""

from __future__ import annotations

import math

BLOCK_OPS = {"native_batch_norm": 1, "native_batch_norm_backward": 2}  # op → per-channel passes (inputs read)
# SM cycles per block of the transform kernel where its planes are small: on the H200 (132 SMs, 1.98 GHz; traces in
# tests/data/real/gpu-2026-11-27), RegNetY-1.6GF's 58 bf16 inference calls on 7×7 and 14×14 planes (888 and 336
# channels, batch 256) took 159-167 cycles per block, whatever the plane (49 or 196 elements): read from them. Checked
# on GoogLeNet's bf16 inference (42 such calls, median 168 and 176; its 24 of 20 µs or more each within 10%) and
# MobileNetV2's bf16 training forward (33, median 159 and 163; 26 within 10%); shorter calls add their launch and
# tail. On 28×28 and larger planes the calls of all three run at 1.5-1.9 TB/s, their bytes' time.
TRANSFORM_BLOCK_CYCLES = 165.0
TRANSFORM_MAX_BLOCKS_PER_CHANNEL = 256 * 1024  # the launch's cap on its grid's second dimension, over C
BLOCK_THREADS = (32, 64, 128, 256, 512)  # Normalization.cuh's getNumThreads: the smallest that covers n, at most 512
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


def _threads(n: float) -> int:
    return next((t for t in BLOCK_THREADS if n <= t), BLOCK_THREADS[-1])


def transform_blocks(channels: int, elements_per_channel: float, batch: int) -> int:
    """Thread blocks of one call of the transform kernel on N = ``batch`` samples (module docstring)."""
    batch = max(1, int(batch))
    plane = elements_per_channel / batch
    threads_x = max(_threads(plane / 4), min(_threads(plane), 64))
    threads_y = max(64 // threads_x, 1)
    return int(channels * max(1, min(TRANSFORM_MAX_BLOCKS_PER_CHANNEL // max(1, channels), -(-batch // threads_y))))


def transform_seconds(channels: int, elements_per_channel: float, batch: int, sm_count: int,
                      clock_hz: float | None) -> float:
    """The least time of one call of the transform kernel: its blocks at :data:`TRANSFORM_BLOCK_CYCLES` each on
    every SM (0 where the clock is unknown)."""
    if not clock_hz or not sm_count:
        return 0.0
    return transform_blocks(channels, elements_per_channel, batch) * TRANSFORM_BLOCK_CYCLES / (sm_count * clock_hz)
