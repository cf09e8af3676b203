"""Peak memory of a step, by replaying the storages the meta run allocated and released.

Every storage the recorded step touched has an allocation point (the op that created it; parameters,
buffers and momentum buffers exist before the step) and a release point (when its last reference died:
autograd frees saved tensors as backward consumes them, intermediate gradients once accumulated). The
live bytes after each op are summed; the peak, and what was live at the peak, are reported:

- ``params``: parameters and buffers (under autocast: the fp32 master weights and their cached
  low-precision copies),
- ``optimizer_state``: SGD momentum buffers (steady state: they exist from the first step on),
- ``gradients``: parameter gradients (``p.grad``; freed by ``zero_grad(set_to_none=True)``),
- ``activations``: tensors made in the forward pass (including the input batch) still alive — the ones
  autograd saved for backward,
- ``temporaries``: everything else alive at the peak (loss and backward intermediates, gradients of
  activations, autocast copies).

This is the technique of ``torch.distributed._tools.mem_tracker.MemTracker`` (live tensors under
FakeTensorMode) on plain meta tensors. It counts tensor bytes only: no allocator rounding or caching, no
framework or library memory (a CPU process adds a few hundred MB of libraries; a CUDA process adds its
context and cuDNN workspaces).

Under fp16/bf16 the autocast emulation casts above autograd (rooflow.estimate.autocast), as autocast does:
an op saves the low-precision copy of its input for backward, and the fp32 tensor it was cast from is freed
when nothing else holds it (tests/estimate/test_autocast.py pins this for a LayerNorm feeding a linear).
"""

from __future__ import annotations

from rooflow.estimate.attention import on_chip_storages
from rooflow.estimate.counter import Trace
from rooflow.estimate.formulas import (
    ELEMENT_BYTES,
    IMAGE_CHANNEL_ALIGN,
    convolves_image_on_nchw,
    image_channels,
    runs_as_gemm,
)

CATEGORIES = ("params", "activations", "gradients", "optimizer_state", "temporaries")


def _category(trace: Trace, key: int, category: str) -> str:
    if key in trace.gradient_keys:
        return "gradients"
    if category in ("params", "optimizer_state"):
        return category
    if key in trace.param_keys:
        return "params"  # the fp16/bf16 copy of a weight that autocast caches for the step
    if category in ("input", "forward"):
        return "activations"
    return "temporaries"


def previous_gradients(trace: Trace) -> tuple[int, int | None]:
    """(bytes, index of the first backward record): the previous step's gradients. rooflow's training step
    (rooflow.measure.timing.Runner, as PyTorch's ImageNet example) calls ``zero_grad(set_to_none=True)``
    after the forward and the loss, just before backward, so in the steady state the last step's gradients
    are still alive through the forward — at the forward's end, where activations peak. (0, None) in
    inference."""
    if not trace.gradient_keys:
        return 0, None
    first = next((record.index for record in trace.records if record.phase == "backward"), None)
    return sum(trace.storages[key].nbytes for key in trace.gradient_keys), first


def live_bytes(trace: Trace, skip: set[int] | frozenset = frozenset(),
               free_at: dict[int, int] | None = None, sizes: dict[int, int] | None = None) -> list[int]:
    """Live bytes after each recorded op (index i: the storages allocated at or before op i and not yet
    released when op i finished, and the previous step's gradients until backward starts); ``skip``: storage
    keys left out; ``free_at``: storage keys released later than the trace recorded (key → op index); ``sizes``:
    storage keys held at other sizes than recorded (key → bytes: a GPU's, ``Trace.cuda_storage_bytes``)."""
    n = len(trace.records)
    delta = [0] * (n + 2)
    stale, zero_grad = previous_gradients(trace)
    base = stale
    if zero_grad is not None:
        delta[zero_grad] -= stale
    free_at, sizes = free_at or {}, sizes or {}
    for storage in trace.storages.values():
        if storage.key in skip:
            continue
        nbytes = sizes.get(storage.key, storage.nbytes)
        start = max(storage.alloc_index, 0)
        if storage.alloc_index < 0:
            base += nbytes
        else:
            delta[start] += nbytes
        free_index = free_at.get(storage.key, storage.free_index)
        if free_index is not None:
            end = max(free_index, start)
            delta[min(end, n + 1)] -= nbytes
    live, current = [], base
    for i in range(n + 1):
        current += delta[i]
        live.append(current)
    return live


def peak_memory(trace: Trace) -> dict:
    live = live_bytes(trace)
    peak_index = max(range(len(live)), key=live.__getitem__)
    breakdown = dict.fromkeys(CATEGORIES, 0)
    for storage in trace.storages.values():
        alive = (storage.alloc_index <= peak_index
                 and (storage.free_index is None or storage.free_index > peak_index))
        if alive:
            breakdown[_category(trace, storage.key, storage.category)] += storage.nbytes
    stale, zero_grad = previous_gradients(trace)
    if zero_grad is not None and peak_index < zero_grad:
        breakdown["gradients"] += stale
    peak_phase = trace.records[min(peak_index, len(trace.records) - 1)].phase if trace.records else None
    return {"peak_memory_bytes": int(live[peak_index]), "breakdown": breakdown, "peak_phase": peak_phase}


def layout_workspace_bytes(trace: Trace) -> list[int]:
    """Per record: the workspace cuDNN takes when a convolution runs on tensor cores with NCHW tensors — it
    transposes its activations (input and output; in backward the output gradient, the input and the input
    gradient) into NHWC copies for the duration of the call. 0 for every other op, for 1×1 stride-1
    convolutions, which run as GEMMs on NCHW tensors (rooflow.estimate.formulas.runs_as_gemm), and for an RGB
    image's of 3×3 or 4×4 taps, which run FFMA kernels on it; a 16-bit image's 7×7 or 11×11 one copies it as 4-byte
    elements of 4 channels (rooflow.estimate.formulas.IMAGE_CHANNELS). On the H100 this
    workspace is what separates the steady-state peaks of TF32 and FP32 runs of the same model
    (VGG16 b256 inference: 13.93 vs 7.35 GB, the first conv layers' input and output); DenseNet-121's, whose peak
    is at a 1×1 convolution of its concatenated features, are the same in TF32 and FP32 (2.82 GB at b256)."""
    workspace = []
    for record in trace.records:
        element = ELEMENT_BYTES.get(record.dtype, 4)
        read_elements = sum(nbytes for _, nbytes in record.reads) / element
        if record.op_class != "matmul" or not record.op.startswith(("convolution", "_convolution")) \
                or any(view[3] > 1 and view[1] == 1 for view in record.gemms) \
                or runs_as_gemm(record.gemms, read_elements):  # depthwise, 1×1: no transposes
            workspace.append(0)
            continue
        reads = sum(nbytes for key, nbytes in record.reads if key not in trace.param_keys)
        writes = sum(nbytes for key, nbytes in record.writes if key not in trace.gradient_keys)
        channels = image_channels(record.gemms) if record.phase == "forward" else 0
        if channels and convolves_image_on_nchw(record.gemms):
            workspace.append(0)  # an RGB stem of 3×3 or 4×4 taps: FFMA kernels on NCHW (formulas.IMAGE_CHANNELS)
            continue
        if channels and element == 2:  # a 16-bit image runs as TF32 on a 4-byte copy, channels padded
            pixels = reads // (element * channels)
            reads = pixels * 4 * -(-channels // IMAGE_CHANNEL_ALIGN) * IMAGE_CHANNEL_ALIGN
        workspace.append(reads + writes)
    return workspace


def fused_attention_peak(trace: Trace, sizes: dict[int, int] | None = None) -> int:
    """The peak of live bytes when attention runs as one fused kernel, as on a GPU (rooflow.estimate.attention):
    the math path's L × L matrices and its copies of q, k, v never exist; the q, k, v they were made from stay
    alive as long as the copies did (the kernel saves its inputs for backward). The peak itself for other
    models. ``sizes``: as :func:`live_bytes`."""
    skip = on_chip_storages(trace.records)
    if not skip:
        return int(max(live_bytes(trace, sizes=sizes)))
    source: dict[int, int] = {}  # an on-chip copy → the live storage it was made from
    free_at: dict[int, int] = {}
    for record in trace.records:
        made = [key for key, _ in record.writes if key in skip and trace.storages[key].alloc_index == record.index]
        inputs = [source.get(key, key) for key, _ in record.reads if trace.storages[key].alloc_index >= 0]
        if not made or len(inputs) != 1 or inputs[0] in skip:
            continue
        for key in made:
            source[key] = inputs[0]
            freed = trace.storages[key].free_index
            held = free_at.get(inputs[0], trace.storages[inputs[0]].free_index)
            free_at[inputs[0]] = None if freed is None or held is None else max(freed, held)
    free_at = {key: index for key, index in free_at.items() if index is not None}
    return int(max(live_bytes(trace, skip, free_at, sizes)))


def peak_with_workspace(trace: Trace, workspace: list[int], live: list[int] | None = None) -> int:
    """The peak of live bytes when each record also holds ``workspace[i]`` bytes while it runs (``live``: the
    trace's :func:`live_bytes`, where already computed)."""
    live = live if live is not None else live_bytes(trace)
    return int(max([live[0]] + [live[i] + workspace[i] for i in range(min(len(workspace), len(live)))]))


def foreach_optimizer_peak(trace: Trace, sizes: dict[int, int] | None = None) -> int:
    """The optimizer's peak of live bytes when SGD runs its multi-tensor (foreach) update, PyTorch's default
    for CUDA tensors (torch.optim.SGD, ``foreach=None``): ``torch._foreach_add(grads, params,
    alpha=weight_decay)`` makes ``g + wd·p`` for every parameter at once, so all of them are alive together
    until the update ends — one more copy of the gradients — where the single-tensor update the trace records
    (CPU's default) holds one at a time. 0 in inference. ``sizes``: as :func:`live_bytes`."""
    optimizer = [record.index for record in trace.records if record.phase == "optimizer"]
    if not optimizer:
        return 0
    first, last = optimizer[0], optimizer[-1]
    held = {storage.key: last for storage in trace.storages.values()
            if storage.category == "optimizer" and first <= storage.alloc_index <= last}
    live = live_bytes(trace, free_at=held, sizes=sizes)
    return int(max(live[first:last + 1]))


def fp32_convolutions(trace: Trace, live: list[int] | None = None) -> list[list[int]]:
    """The forward FP32 convolutions cuDNN may run by FFT (square, ungrouped, stride 1, a kernel over 1×1), each
    as its call shape (N, Cin, size, Cout, kernel, stride, padding) and the live bytes while it runs: whether it
    does on a device, and the workspace it then holds, are the device's (rooflow.estimate.predict). ``live``: the
    trace's :func:`live_bytes`, where already computed."""
    live = live if live is not None else live_bytes(trace)
    return [[*record.call, int(live[record.index])] for record in trace.records
            if record.phase == "forward" and record.dtype == "fp32" and len(record.call) == 7
            and record.op.startswith(("convolution", "_convolution")) and record.call[5] == 1 and record.call[4] > 1]


def memory_totals(trace: Trace) -> dict:
    """The estimate's memory fields (rooflow.estimate.predict.predict_memory reads them)."""
    memory = peak_memory(trace)
    workspace = layout_workspace_bytes(trace)
    # the GPU's variants below hold its tensors at their CUDA sizes (dropout masks: rooflow.estimate.dropout)
    cuda = trace.cuda_storage_bytes
    live = live_bytes(trace, sizes=cuda)
    return {
        "peak_memory_bytes": memory["peak_memory_bytes"],
        "peak_memory_breakdown": memory["breakdown"],
        # the tensors as a GPU allocates them
        "peak_memory_bytes_cuda": int(max(live)),
        # with cuDNN's NCHW→NHWC copies while each convolution runs (tensor-core paths)
        "peak_memory_bytes_layout_workspace": peak_with_workspace(trace, workspace, live),
        # attention as one fused kernel (a GPU's flash / memory-efficient SDPA; see attention.py)
        "peak_memory_bytes_fused_attention": fused_attention_peak(trace, cuda),
        # SGD's multi-tensor update, a GPU's default
        "peak_memory_bytes_foreach_optimizer": foreach_optimizer_peak(trace, cuda),
        "largest_conv_activation_bytes": max(workspace, default=0),
        # FP32 convolutions cuDNN may run by FFT, with the live bytes while each runs (predict adds its workspace)
        "fp32_convolutions": fp32_convolutions(trace, live),
    }
