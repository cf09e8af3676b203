"""Names and thresholds every stage shares, defined once: the experiment's precisions and modes, the
estimator's op classes, and when a timing counts as noisy."""

PRECISIONS = ("fp32", "tf32", "fp16", "bf16")
MODES = ("inference", "training")
# How a step runs: eager PyTorch in the default memory format, channels_last tensors (NHWC), torch.compile
# (inductor). rooflow.measure.timing runs them; rooflow.estimate.whatif lists them.
VARIANTS = ("eager", "channels_last", "compile")


def variant_suffix(variant: str) -> str:
    """What a run's name adds for its variant: nothing for eager (so the paths and cached results of eager
    runs stay what they were before variants existed), '-channels_last' or '-compile' otherwise."""
    return "" if variant == "eager" else f"-{variant}"


def variant_of_suffix(suffix: str) -> str:
    """The variant a run name's suffix names (variant_suffix's inverse)."""
    return suffix.removeprefix("-") or "eager"


# Which of the estimate's DRAM-traffic models (rooflow.estimate.core) a variant's step follows: eager PyTorch,
# in either memory format, runs one kernel per aten op (every op reads its inputs and writes its output:
# unfused); inductor fuses elementwise ops and inference BatchNorm into their producers (fusion-aware). It
# places an estimated roofline point and is what the reconciliation holds measured DRAM bytes to.
VARIANT_BYTES_MODELS = {"eager": "unfused", "channels_last": "unfused", "compile": "fused"}


def bytes_model(variant: str | None) -> str:
    """'unfused' or 'fused': the estimate's traffic model for a step run as ``variant`` (None: eager)."""
    return VARIANT_BYTES_MODELS[variant or "eager"]


# The layer type a step's time is booked to where it is not a layer's: the optimizer step and the loss, as the
# timing job's profiled iteration books them (rooflow.measure.optime) and the time model prices them
# (rooflow.estimate.timemodel), so the two compare type for type
PHASE_LAYER_TYPES = {"optimizer": "SGD update", "loss": "loss"}

# The time model's part for the page faults of a CPU tensor mapped afresh (rooflow.estimate.timemodel), which the
# calibration leaves out of an op's work and the checks read back against the faults a step took
PAGE_FAULT_PART = "page faults"

# The estimator's op classes (rooflow.estimate.formulas registers each aten op under one of them).
OP_CLASSES = ("matmul", "attention", "elementwise", "normalization", "pooling", "softmax", "memory", "other")
# The classes that run as GEMMs/convolutions on tensor cores or at the matmul roof.
MATMUL_OP_CLASSES = ("matmul", "attention")

# A timing whose interquartile range exceeds this fraction of its median is noisy: the timing job repeats
# its rounds, the checks flag what stays noisy.
NOISY_SPREAD = 0.05
