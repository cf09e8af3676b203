"""`rooflow subset`: the image subset the measurement jobs read."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from rooflow.arguments import RESIZE_PIXELS, SEED, bounded_int, positive_int
from rooflow.errors import RooflowError
from rooflow.workload.dataset import SubsetSpec, build_subset

# The subset job's words for its inputs (the config's dataset keys) and this command's flags for them.
_FLAGS = [(r"dataset\.root\b", "--root"), (r"dataset\.classes=", "--classes "), (r"dataset\.classes\b", "--classes"),
          (r"(dataset\.)?images_per_class=", "--images-per-class "), (r"(dataset\.)?images_per_class\b",
                                                                        "--images-per-class"),
          (r"\bresize (\d+) is below image_size (\d+)", r"--resize \1 is below --image-size \2"),
          (r"\bresize to image_size or more", "raise --resize to --image-size or more"),
          (r"dataset root '", "--root '")]


def in_flags(message: str) -> str:
    """A subset error in this command's words: its flags where the workflow's job names config keys."""
    for pattern, flag in _FLAGS:
        message = re.sub(pattern, flag, message)
    return message


def _cmd_subset(args: argparse.Namespace) -> int:
    if Path(args.output).resolve() == Path(args.manifest).resolve():  # the second write would replace the first
        raise RooflowError(f"--output and --manifest are both {args.output}: give the manifest its own file (a .csv)")
    try:
        spec = SubsetSpec(args.root, args.classes, args.images_per_class, args.resize, args.image_size, args.seed)
        written = build_subset(spec, args.output, args.manifest)
    except RooflowError as error:
        raise RooflowError(in_flags(str(error))) from None
    source = "generated stand-in" if written["generated"] else f"from {args.root}"
    print(f"{written['images']} images of {written['classes']} classes ({source}, "
          f"{'x'.join(map(str, written['shape'][1:]))} uint8) in {args.output}; their manifest in {args.manifest}")
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "subset", help="build the image subset (uint8 tensor + manifest CSV)",
        description="Pick classes × images_per_class images from an ImageFolder tree with a fixed seed "
                    "(or generate a stand-in set), apply resize + center crop, write a .pt and a manifest.")
    parser.add_argument("--root", default=None, help="ImageFolder root: one folder of images per class (omit for "
                                                     "the generated stand-in)")
    parser.add_argument("--classes", type=positive_int, default=4,
                        help="class folders to pick at random (seeded) under --root (default: %(default)s)")
    parser.add_argument("--images-per-class", type=positive_int, default=8,
                        help="images to pick from each class (default: %(default)s)")
    parser.add_argument("--resize", type=bounded_int(*RESIZE_PIXELS, "a side in pixels"), default=256,
                        help="shorter side after resizing, in pixels, before the center crop (default: %(default)s)")
    parser.add_argument("--image-size", type=positive_int, default=224,
                        help="side of the square center crop, in pixels: the models' input (default: %(default)s)")
    parser.add_argument("--seed", type=bounded_int(*SEED, "a seed"), default=0,
                        help="seed of the pick (default: %(default)s)")
    parser.add_argument("--output", required=True, help="subset .pt file to write (uint8 images and labels)")
    parser.add_argument("--manifest", required=True, help="manifest CSV to write (one row per image: its class and "
                                                          "source file)")
    parser.set_defaults(func=_cmd_subset)
