"""`rooflow subset`: the image subset the measurement jobs read."""

from __future__ import annotations

import argparse

from rooflow.arguments import positive_int
from rooflow.workload.dataset import SubsetSpec, build_subset


def _cmd_subset(args: argparse.Namespace) -> int:
    spec = SubsetSpec(args.root, args.classes, args.images_per_class, args.resize, args.image_size, args.seed)
    written = build_subset(spec, args.output, args.manifest)
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
    parser.add_argument("--resize", type=positive_int, default=256,
                        help="shorter side after resizing, in pixels, before the center crop (default: %(default)s)")
    parser.add_argument("--image-size", type=positive_int, default=224,
                        help="side of the square center crop, in pixels: the models' input (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the pick (default: %(default)s)")
    parser.add_argument("--output", required=True, help="subset .pt file to write (uint8 images and labels)")
    parser.add_argument("--manifest", required=True, help="manifest CSV to write (one row per image: its class and "
                                                          "source file)")
    parser.set_defaults(func=_cmd_subset)
