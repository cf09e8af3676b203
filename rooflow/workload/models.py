"""torchvision classification models: names, input sizes, construction (random weights, no download)."""

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


def _shipped_model_names() -> tuple[str, ...] | None:
    """The names listed for the installed torchvision version, or None (another version, or none)."""
    from importlib import metadata

    from rooflow.config_io import load_schema

    try:
        installed = metadata.version("torchvision")
    except metadata.PackageNotFoundError:
        return None
    listed = load_schema("torchvision_models.yaml")
    return tuple(listed["models"]) if listed.get("torchvision") == installed else None


def closest_models_hint(names: list[str]) -> str:
    """' (closest: a, b, …)' for unknown model names, nearest first; '' where nothing is close."""
    from rooflow.config_io import close_matches

    valid = classification_models()
    closest = list(dict.fromkeys(match for name in names for match in close_matches(name, valid)))
    return f" (closest: {', '.join(closest)})" if closest else ""


def check_model_names(names: list[str], source: str = "config") -> None:
    valid = classification_models()
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise RooflowError(
            f"{source}: unknown model(s) {', '.join(unknown)}{closest_models_hint(unknown)}: use torchvision "
            f"classification model names, one of {', '.join(valid)}"
        )


@functools.cache
def input_size(name: str) -> int:
    """The square input side the model's own weights were evaluated at (224 for most; 299 for
    inception_v3, 384/518 for some ViTs), from the weights' evaluation transform (nothing is downloaded)."""
    import torchvision

    check_model_names([name], "model")
    weights = torchvision.models.get_model_weights(name).DEFAULT
    crop = weights.transforms().crop_size
    return int(crop[0] if isinstance(crop, (list, tuple)) else crop)


def build_model(name: str, num_classes: int = 1000):
    """The model with random weights (weights=None: nothing is downloaded), with the architecture of its
    DEFAULT weights: a ViT is built for the image size those weights use (vit_h_14: 518, whereas
    ``weights=None`` alone builds it for 224 and it then rejects the input of ``input_size``)."""
    import torchvision

    check_model_names([name], "model")
    kwargs = {}
    if name.startswith("vit_"):
        kwargs["image_size"] = input_size(name)
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
        if param is not None and param.device.type != "meta":
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
