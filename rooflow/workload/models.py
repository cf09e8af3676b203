"""torchvision models by name: classification, segmentation and detection — names, input sizes, construction
(random weights, no download). A user's own model is rooflow.workload.spec's."""

from __future__ import annotations

import contextlib
import functools

from rooflow.errors import RooflowError


@functools.cache
def classification_models() -> tuple[str, ...]:
    """Every classification model torchvision ships (its own `list_models`), sorted.

    For the torchvision version in rooflow/schemas/torchvision_models.yaml the names are read from there:
    importing torchvision (and torch) took about 3 s of every Snakemake parse of the workflow, where config
    validation only needs the names."""
    shipped = _shipped_model_names()
    if shipped is not None:
        return shipped
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)))


def _shipped_model_names(key: str = "models") -> tuple[str, ...] | None:
    """The names listed under ``key`` for the installed torchvision version, or None (another version, or
    none)."""
    from importlib import metadata

    from rooflow.config_io import load_schema

    try:
        installed = metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        return None
    listed = load_schema("torchvision_models.yaml")
    return tuple(listed[key]) if listed.get("torchvision") == installed else None


@functools.cache
def task_models(task: str) -> tuple[str, ...]:
    """torchvision's segmentation or detection models (keypoint and instance segmentation included)."""
    shipped = _shipped_model_names(task)
    if shipped is not None:
        return shipped
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=getattr(torchvision.models, task))))


TASKS = ("segmentation", "detection", "video", "optical_flow")
# A video model's clip: 16 frames (torchvision's video weights are evaluated on 16-frame clips; their
# published _ops match 16 frames: r3d_18 40.7 GMACs at 16×112×112).
VIDEO_FRAMES = 16
# Optical flow (RAFT) on two frames of 520×960, the size of torchvision's RAFT tutorial
# (https://pytorch.org/vision/stable/auto_examples/others/plot_optical_flow.html); sides divisible by 8.
OPTICAL_FLOW_SIZE = (520, 960)


@functools.cache
def named_models() -> tuple[str, ...]:
    """Every torchvision model rooflow runs by name: classification, then the other tasks (TASKS)."""
    return classification_models() + tuple(name for kind in TASKS for name in task_models(kind))


def task(name: str) -> str:
    """classification, or one of TASKS."""
    for kind in TASKS:
        if name in task_models(kind):
            return kind
    return "classification"


def input_shapes(name: str, side: int | None = None) -> tuple[tuple[int, ...], ...]:
    """Per-sample input shapes (the batch prepended): one image (3, S, S) for most models, a clip
    (3, VIDEO_FRAMES, S, S) for video, two images for optical flow (always OPTICAL_FLOW_SIZE). ``side``: S,
    the model's own input_size where None."""
    kind = task(name)
    if kind == "optical_flow":
        return ((3, *OPTICAL_FLOW_SIZE),) * 2
    side = side or input_size(name)
    return ((3, VIDEO_FRAMES, side, side),) if kind == "video" else ((3, side, side),)


def closest_models_hint(names: list[str]) -> str:
    """' (closest: a, b, …)' for unknown model names, nearest first; '' where nothing is close."""
    from rooflow.config_io import close_matches

    valid = named_models()
    closest = list(dict.fromkeys(match for name in names for match in close_matches(name, valid)))
    return f" (closest: {', '.join(closest)})" if closest else ""


QUANTIZED_PREFIX = "quantized_"  # torchvision.models.quantization's names: quantized_resnet18, ...


def quantized_problem(name: str) -> str | None:
    """Why rooflow does not take ``name``, a torchvision int8 quantized model (``quantized_`` and a model rooflow
    takes), and the float model to take instead; None for any other name. They were refused as unknown names,
    "closest: resnet18" the only hint."""
    base = name.removeprefix(QUANTIZED_PREFIX)
    if base == name or base not in named_models():
        return None
    return (f"{name} is torchvision's int8 quantized model (CPU inference through fbgemm or qnnpack), whose int8 "
            f"kernels rooflow neither counts nor prices: use its float model {base}, in precision fp32, tf32, fp16 "
            f"or bf16")


def check_model_names(names: list[str], source: str = "config") -> None:
    valid = named_models()
    unknown = [name for name in names if name not in valid]
    for name in unknown:
        if problem := quantized_problem(name):
            raise RooflowError(f"{source}: {problem}")
    if unknown:
        raise RooflowError(
            f"{source}: unknown model(s) {', '.join(unknown)}{closest_models_hint(unknown)}: use torchvision "
            f"model names (classification, segmentation, video, optical flow), one of "
            f"{', '.join(name for name in valid if task(name) != 'detection')}, or your own model as "
            f"package.module:factory (torchvision's detection models cannot be estimated or run by the workflow, "
            f"only timed: rooflow time --model NAME --mode inference)"
        )


# The torchvision models PyTorch cannot train at batch 1: a BatchNorm of theirs meets a 1×1 map (Inception-v3's
# auxiliary head; DeepLabV3's ASPP image pooling), and in training it needs more than one value per channel. Every
# other model rooflow runs by name trains at batch 1: the classification zoo (tests/estimate/test_estimate_zoo.py),
# the segmentation models (tests/config/test_config.py), the video and optical-flow ones (by hand, 2026-12-04).
NO_TRAINING_AT_BATCH_1 = ("deeplabv3_mobilenet_v3_large", "deeplabv3_resnet101", "deeplabv3_resnet50", "inception_v3")


# Detection models resize every image to their transform's min_size (GeneralizedRCNNTransform: 800; the
# SSDs and the 320 FPN variant: the size in their name); their weights' transform documents no size.
DETECTION_INPUT_SIZE = 800


@functools.cache
def input_size(name: str) -> int:
    """The square input side the model's own weights were evaluated at (224 for most; 299 for
    inception_v3, 384/518 for some ViTs; 520 for segmentation; 800, 300 or 320 for detection), from the
    weights' evaluation transform (nothing is downloaded)."""
    import re

    import torchvision

    check_model_names([name], "model")
    if task(name) == "detection":
        sized = re.search(r"(?<![0-9])([0-9]{3})(?![0-9])", name)
        return int(sized.group(1)) if sized else DETECTION_INPUT_SIZE
    if task(name) == "optical_flow":
        return OPTICAL_FLOW_SIZE[1]
    weights = torchvision.models.get_model_weights(name).DEFAULT
    if task(name) == "segmentation":
        return int(weights.transforms().resize_size[0])
    crop = weights.transforms().crop_size
    return int(crop[0] if isinstance(crop, (list, tuple)) else crop)


def output_classes(name: str) -> int | None:
    """How many classes :func:`build_model`'s classifier outputs: 1,000 for an image classifier, its DEFAULT
    weights' categories for a video one (Kinetics-400); None for the tasks trained on other targets."""
    if task(name) == "classification":
        return 1000
    if task(name) == "video":
        import torchvision

        return len(torchvision.models.get_model_weights(name).DEFAULT.meta["categories"])
    return None


def build_model(name: str, num_classes: int = 1000):
    """The model with random weights (weights=None: nothing is downloaded), with the architecture of its
    DEFAULT weights: a ViT is built for the image size those weights use (vit_h_14: 518, whereas
    ``weights=None`` alone builds it for 224 and it then rejects the input of ``input_size``)."""
    import torchvision

    check_model_names([name], "model")
    if task(name) in ("segmentation", "detection"):  # their own classes (21 VOC, 91 COCO); no backbone download
        return torchvision.models.get_model(name, weights=None, weights_backbone=None)
    if task(name) != "classification":  # video (400 Kinetics classes), optical flow
        return torchvision.models.get_model(name, weights=None)
    kwargs = {}
    if name.startswith("vit_"):
        kwargs["image_size"] = input_size(name)
    if name in ("googlenet", "inception_v3"):
        # torchvision's coming default (PyTorch's own initialisation), said aloud: left unsaid, every timing and
        # profiling job's log carried its FutureWarning; the weights are random either way
        kwargs["init_weights"] = False
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes, **kwargs)


@contextlib.contextmanager
def parameters_on_meta():
    """Within this context, every parameter and buffer a module registers is moved to the meta device as it
    is registered (the approach of ``accelerate.init_empty_weights``): no memory, and weight
    initialisation runs on meta in no time. Plain tensors created in ``__init__`` stay real, which is why
    this works where ``with torch.device("meta")`` fails: the 15 RegNets do tensor math in ``__init__``."""
    import torch
    from torch import nn

    register_parameter = nn.Module.register_parameter
    register_buffer = nn.Module.register_buffer

    def register_parameter_on_meta(module, name, param):
        register_parameter(module, name, param)
        param = module._parameters.get(name)
        if isinstance(param, nn.parameter.UninitializedParameter):
            # a lazy module's (nn.LazyLinear): no data yet, and its first forward makes it here, on meta
            module._parameters[name] = nn.parameter.UninitializedParameter(param.requires_grad, "meta", param.dtype)
        elif param is not None and param.device.type != "meta":
            module._parameters[name] = type(param)(param.to("meta"), requires_grad=param.requires_grad)

    def register_buffer_on_meta(module, name, tensor, persistent=True):
        register_buffer(module, name, tensor, persistent)
        buffer = module._buffers.get(name)
        if isinstance(buffer, torch.Tensor) and buffer.device.type != "meta":
            module._buffers[name] = buffer.to("meta")

    nn.Module.register_parameter = register_parameter_on_meta
    nn.Module.register_buffer = register_buffer_on_meta
    try:
        yield
    finally:
        nn.Module.register_parameter = register_parameter
        nn.Module.register_buffer = register_buffer


def build_meta_model(name: str, num_classes: int = 1000):
    """The model with its parameters and buffers on the meta device (shapes and dtypes only)."""
    import warnings

    check_model_names([name], "model")
    with parameters_on_meta(), warnings.catch_warnings():
        # GoogLeNet/Inception-v3 warn that their default initialisation will change: irrelevant on meta
        warnings.filterwarnings("ignore", category=FutureWarning, module="torchvision")
        return build_model(name, num_classes=num_classes)


def weights_meta(name: str) -> dict:
    """The DEFAULT weights' metadata (``_ops`` in GMACs, ``num_params``, ...): read from torchvision's
    tables, nothing is downloaded."""
    import torchvision

    check_model_names([name], "model")
    return dict(torchvision.models.get_model_weights(name).DEFAULT.meta)
