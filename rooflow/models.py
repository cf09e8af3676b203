"""torchvision classification models: names, input sizes, construction (random weights, no download)."""

from __future__ import annotations

import functools

from rooflow.errors import RooflowError


@functools.cache
def classification_models() -> tuple[str, ...]:
    """Every classification model torchvision ships (its own `list_models`), sorted."""
    import torchvision

    return tuple(sorted(torchvision.models.list_models(module=torchvision.models)))


def check_model_names(names: list[str], source: str = "config") -> None:
    valid = classification_models()
    unknown = [name for name in names if name not in valid]
    if unknown:
        raise RooflowError(
            f"{source}: unknown model(s) {', '.join(unknown)}: use torchvision classification model names, "
            f"one of {', '.join(valid)}"
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
    """The model with random weights (weights=None: nothing is downloaded)."""
    import torchvision

    check_model_names([name], "model")
    return torchvision.models.get_model(name, weights=None, num_classes=num_classes)
