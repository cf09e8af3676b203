"""A small, reproducible image subset: from any ImageFolder tree, or generated when none is configured.

Output: one `.pt` file holding a uint8 tensor [N, 3, S, S] (after the standard evaluation transform:
resize the shorter side, center crop) with labels, plus a manifest CSV (source path, class, SHA-256).
"""

from __future__ import annotations

import hashlib
import logging
import random
from dataclasses import dataclass
from pathlib import Path

from rooflow.errors import RooflowError
from rooflow.io import atomic_path, inside, write_csv

# The largest subset (uint8 images) one may ask for: it is built in memory, and every timing job loads it whole.
MAX_SUBSET_BYTES = 2 * 2**30


def subset_bytes(classes: int, images_per_class: int, image_size: int) -> int:
    """Bytes of a subset's uint8 images (N, 3, S, S)."""
    return classes * images_per_class * 3 * image_size ** 2

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = {".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".tif", ".tiff", ".webp"}
# ImageNet's mean and std, for turning the uint8 subset into model input.
IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


@dataclass
class SubsetSpec:
    root: str | None = None
    classes: int = 4
    images_per_class: int = 8
    resize: int = 256
    image_size: int = 224
    seed: int = 0

    def __post_init__(self) -> None:
        # a crop larger than the resized image is zero-padded: black borders no model was evaluated on
        if self.resize < self.image_size:
            raise RooflowError(f"resize {self.resize} is below image_size {self.image_size}: the center crop would pad "
                               f"the images with black borders; resize to image_size or more (the evaluation "
                               f"transform: 256 for a 224 crop)")
        images, nbytes = self.classes * self.images_per_class, subset_bytes(self.classes, self.images_per_class,
                                                                            self.image_size)
        if nbytes > MAX_SUBSET_BYTES:  # it is built in memory and every timing job loads it
            raise RooflowError(f"dataset.classes {self.classes} × dataset.images_per_class {self.images_per_class} is "
                               f"{images:,} images, {nbytes / 1e9:.1f} GB at "
                               f"{self.image_size}×{self.image_size}, over the {MAX_SUBSET_BYTES / 2**30:.0f} GiB a "
                               f"subset may hold: lower them (the timed batches cycle through the subset)")


def _evaluation_transform(image, spec: SubsetSpec):
    """Resize the shorter side to `resize`, center crop `image_size` (torchvision's evaluation preset)."""
    from torchvision.transforms.v2 import functional as F

    image = F.resize(image, spec.resize, antialias=True)
    return F.center_crop(image, [spec.image_size, spec.image_size])


def _pick_files(spec: SubsetSpec) -> list[tuple[str, Path]]:
    root = Path(spec.root)
    if not root.is_dir():
        raise RooflowError(f"dataset root '{root}' is not a directory: point dataset.root at an ImageFolder tree")
    class_dirs = sorted(p for p in root.iterdir() if p.is_dir())
    if len(class_dirs) < spec.classes:
        raise RooflowError(
            f"dataset root '{root}' has {len(class_dirs)} class folder(s), fewer than dataset.classes="
            f"{spec.classes}: lower dataset.classes or use the ImageNet train/ or val/ folder (one folder per class)")
    rng = random.Random(spec.seed)
    chosen = sorted(rng.sample(class_dirs, spec.classes))
    picked = []
    for class_dir in chosen:
        images = sorted(p for p in class_dir.rglob("*") if p.suffix.lower() in IMAGE_EXTENSIONS)
        if not images:  # no number of images per class helps
            raise RooflowError(f"class folder '{class_dir}' holds no image ({', '.join(sorted(IMAGE_EXTENSIONS))}): "
                               f"remove it from '{root}', or put its class's images in it")
        if len(images) < spec.images_per_class:
            raise RooflowError(
                f"class folder '{class_dir}' holds {len(images)} image(s), fewer than dataset.images_per_class="
                f"{spec.images_per_class}: lower images_per_class")
        picked += [(class_dir.name, p) for p in sorted(rng.sample(images, spec.images_per_class))]
    return picked


# Pillow's modes of more than 8 bits per channel (16-bit integer, 32-bit integer, float): convert("RGB") clips them to
# 255 or truncates them to 0 (a 16-bit PNG stored as a white frame, a float TIFF of 0..1 as a black one, exit 0)
WIDE_MODES = ("I;16", "I;16B", "I;16L", "I;16N", "I", "F")


def _load_image(path: Path):
    import warnings

    from PIL import Image, UnidentifiedImageError
    from torchvision.transforms.v2 import functional as F

    try:
        with warnings.catch_warnings():
            # an image of 89-179 Mpx warns (DecompressionBombWarning) on stderr at each read; over that it is an error
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as image:
                if image.mode in WIDE_MODES:
                    raise RooflowError(f"image '{path}' has {image.mode} pixels (more than 8 bits per channel), which "
                                       f"the 8-bit subset would store clipped to white or black: convert it to 8-bit "
                                       f"RGB (e.g. PIL's convert, ImageMagick's -depth 8) or remove it from the dataset")
                return F.pil_to_tensor(image.convert("RGB"))
    except Image.DecompressionBombError:  # not an OSError: a traceback
        raise RooflowError(f"image '{path}' has more pixels than Pillow decodes ({Image.MAX_IMAGE_PIXELS:,}; a "
                           f"decompression-bomb guard): downscale it or remove it from the dataset") from None
    except (UnidentifiedImageError, OSError) as error:
        raise RooflowError(f"image '{path}' cannot be read ({error}): remove it or fix the dataset") from None


def _generated_image(label: int, index: int, spec: SubsetSpec):
    """A deterministic stand-in photo: smooth per-class colour fields plus noise, 320×400 before the
    transform so the same resize/crop path runs as for real images."""
    import torch

    generator = torch.Generator().manual_seed(spec.seed * 1_000_003 + label * 10_007 + index)
    coarse = torch.rand(3, 5, 6, generator=generator) * 0.6 + 0.2 * (label % 3)
    smooth = torch.nn.functional.interpolate(coarse[None], size=(320, 400), mode="bicubic", align_corners=False)[0]
    noise = torch.rand(3, 320, 400, generator=generator) * 0.15
    return ((smooth + noise).clamp(0, 1) * 255).to(torch.uint8)


def subset_data(spec: SubsetSpec) -> tuple[dict, list[dict]]:
    """Pick and transform the subset (or generate the stand-in, when ``spec.root`` is None): the data a subset file
    holds, and its manifest's rows."""
    import torch

    rows, images, labels = [], [], []
    if spec.root is None:
        class_names = [f"generated_{i:03d}" for i in range(spec.classes)]
        for label, name in enumerate(class_names):
            for index in range(spec.images_per_class):
                raw = _generated_image(label, index, spec)
                images.append(_evaluation_transform(raw, spec))
                labels.append(label)
                digest = hashlib.sha256(raw.numpy().tobytes()).hexdigest()
                rows.append({"source_path": f"generated://{name}/{index:04d}", "class_name": name,
                             "label": label, "sha256": digest,
                             "source_height": raw.shape[1], "source_width": raw.shape[2]})
    else:
        picked = _pick_files(spec)
        class_names = sorted({name for name, _ in picked})
        for done, (name, path) in enumerate(picked, 1):
            raw = _load_image(path)
            images.append(_evaluation_transform(raw, spec))
            labels.append(class_names.index(name))
            rows.append({"source_path": str(path), "class_name": name, "label": class_names.index(name),
                         "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                         "source_height": raw.shape[1], "source_width": raw.shape[2]})
            if done % 50 == 0:
                log.info("subset: %d/%d images", done, len(picked))
    data = {
        "images": torch.stack(images).contiguous(),
        "labels": torch.tensor(labels, dtype=torch.int64),
        "classes": class_names,
        "generated": spec.root is None,
        "spec": vars(spec),
    }
    return data, rows


def build_subset(spec: SubsetSpec, tensor_path: str | Path, manifest_path: str | Path) -> dict:
    """Pick, transform and write the subset; return a short description for logs and the report."""
    import pandas as pd
    import torch

    if spec.root is not None:
        for path in (tensor_path, manifest_path):
            if inside(path, spec.root) is not None:  # an image it reads, replaced (the dataset is the user's)
                raise RooflowError(f"the subset's output {path} is inside dataset.root '{spec.root}': writing it there "
                                   f"could replace an image it reads; write it outside the dataset tree")
    data, rows = subset_data(spec)
    manifest = pd.DataFrame(rows)
    manifest.insert(0, "index", range(len(manifest)))
    with atomic_path(tensor_path) as tmp:
        torch.save(data, tmp)
        write_csv(manifest_path, manifest)  # within: a manifest that cannot be written leaves no subset either
    summary = {"images": len(rows), "classes": len(data["classes"]), "generated": spec.root is None,
               "shape": list(data["images"].shape)}
    log.info("subset written: %s", summary)
    return summary


def load_subset(path: str | Path) -> dict:
    import torch

    path = Path(path)
    if path.is_dir():
        raise RooflowError(f"dataset subset '{path}' is a folder: give the .pt file `rooflow subset --output` (the "
                           f"workflow's subset_dataset step) wrote")
    if not path.is_file():
        raise RooflowError(f"dataset subset '{path}' does not exist: run the subset_dataset step (or `rooflow subset`) first")
    try:
        data = torch.load(path, weights_only=True)
    except Exception as error:  # torch.load's errors for a truncated or foreign file are of many types
        raise RooflowError(f"dataset subset '{path}' is not a subset rooflow wrote (torch.load raised "
                           f"{type(error).__name__}: a file cut short, or another kind of file): give the .pt file `rooflow "
                           f"subset --output` wrote, or, if it is one cut short, make it again (the subset_dataset step)"
                           ) from None
    if not (isinstance(data, dict) and isinstance(data.get("images"), torch.Tensor) and data["images"].dim() == 4
            and data["images"].dtype == torch.uint8 and data["images"].shape[1] == 3 and len(data["images"])
            and isinstance(data.get("labels"), torch.Tensor) and len(data["labels"]) == len(data["images"])):
        # (none: a ZeroDivisionError in make_batch; one channel: timed as if it were the 3-channel images)
        raise RooflowError(f"dataset subset '{path}' holds no uint8 images (N, 3, H, W) with their labels: give the "
                           f".pt file `rooflow subset --output` wrote, or make it again (the subset_dataset step)")
    return data


def make_batch(subset: dict, batch: int, image_size: int | None = None):
    """A float batch of `batch` images (cycling through the subset), normalised with ImageNet's statistics,
    resized when a model wants another input size (inception_v3: 299)."""
    import torch

    images, labels = subset["images"], subset["labels"]
    index = torch.arange(batch) % images.shape[0]
    x = images[index].float().div_(255)
    if image_size and image_size != x.shape[-1]:
        x = torch.nn.functional.interpolate(x, size=(image_size, image_size), mode="bilinear", antialias=True)
    mean = torch.tensor(IMAGENET_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD).view(1, 3, 1, 1)
    return (x - mean) / std, labels[index]
