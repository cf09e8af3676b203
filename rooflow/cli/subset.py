"""`rooflow subset`: the image subset the measurement jobs read."""

from __future__ import annotations

import argparse

from rooflow.arguments import positive_int
from rooflow.workload.dataset import SubsetSpec, build_subset


def _cmd_subset(args: argparse.Namespace) -> int:
    spec = SubsetSpec(args.root, args.classes, args.images_per_class, args.resize, args.image_size, args.seed)
    print(build_subset(spec, args.output, args.manifest))
    return 0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "subset", help="build the image subset (uint8 tensor + manifest CSV)",
        description="Pick classes × images_per_class images from an ImageFolder tree with a fixed seed "
                    "(or generate a stand-in set), apply resize + center crop, write a .pt and a manifest.")
    parser.add_argument("--root", default=None, help="ImageFolder root (omit for the generated stand-in)")
    parser.add_argument("--classes", type=positive_int, default=4)
    parser.add_argument("--images-per-class", type=positive_int, default=8)
    parser.add_argument("--resize", type=positive_int, default=256)
    parser.add_argument("--image-size", type=positive_int, default=224)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", required=True, help="subset .pt file to write")
    parser.add_argument("--manifest", required=True, help="manifest CSV to write")
    parser.set_defaults(func=_cmd_subset)
