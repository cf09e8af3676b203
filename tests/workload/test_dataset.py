import hashlib
import re

import pandas as pd
import pytest
import torch
from PIL import Image

from rooflow.errors import RooflowError
from rooflow.workload.dataset import SubsetSpec, build_subset, load_subset, make_batch


def _build(tmp_path, spec, name="a"):
    tensor, manifest = tmp_path / f"{name}.pt", tmp_path / f"{name}.csv"
    build_subset(spec, tensor, manifest)
    return load_subset(tensor), pd.read_csv(manifest)


def test_generated_subset_is_deterministic_and_shaped(tmp_path):
    spec = SubsetSpec(None, classes=3, images_per_class=2, resize=80, image_size=64, seed=7)
    first, manifest = _build(tmp_path, spec, "a")
    second, manifest2 = _build(tmp_path, spec, "b")
    assert first["images"].shape == (6, 3, 64, 64) and first["images"].dtype == torch.uint8
    assert first["labels"].tolist() == [0, 0, 1, 1, 2, 2]
    assert torch.equal(first["images"], second["images"])
    assert manifest["sha256"].tolist() == manifest2["sha256"].tolist()
    assert first["generated"] is True
    assert manifest["source_path"].str.startswith("generated://").all()
    other, _ = _build(tmp_path, SubsetSpec(None, 3, 2, 80, 64, seed=8), "c")
    assert not torch.equal(first["images"], other["images"])


def _image_folder(root, classes=5, per_class=4):
    for c in range(classes):
        folder = root / f"n{c:08d}"
        folder.mkdir(parents=True)
        for i in range(per_class):
            colour = (40 * c % 255, 30 * i % 255, 100)
            Image.new("RGB", (300 + 10 * i, 260), colour).save(folder / f"img_{i}.JPEG", format="JPEG")
    return root


def test_image_folder_subset_picks_seeded_sample_with_checksums(tmp_path):
    root = _image_folder(tmp_path / "imagenet" / "val")
    spec = SubsetSpec(str(root), classes=2, images_per_class=3, resize=256, image_size=224, seed=1)
    data, manifest = _build(tmp_path, spec)
    assert data["images"].shape == (6, 3, 224, 224)
    assert len(set(manifest["class_name"])) == 2
    for _, row in manifest.iterrows():  # the checksum is of the source file's bytes
        assert hashlib.sha256(open(row["source_path"], "rb").read()).hexdigest() == row["sha256"]
    again, manifest_again = _build(tmp_path, spec, "again")
    assert manifest["source_path"].tolist() == manifest_again["source_path"].tolist()
    # resize 256 of a 260-high image then a 224 crop keeps the solid colour of the source
    first = manifest.iloc[0]
    assert data["images"][0, 2].float().mean().item() == pytest.approx(100, abs=3)
    assert first["source_height"] == 260


def test_too_few_classes_is_one_clear_error(tmp_path):
    root = _image_folder(tmp_path / "tree", classes=2, per_class=2)
    with pytest.raises(RooflowError, match="fewer than dataset.classes=3"):
        build_subset(SubsetSpec(str(root), classes=3, images_per_class=1), tmp_path / "x.pt", tmp_path / "x.csv")
    assert not (tmp_path / "x.pt").exists()


def test_an_empty_class_folder_is_named(tmp_path):
    """It said "lower images_per_class", which no number fixes."""
    root = _image_folder(tmp_path / "tree", classes=2, per_class=2)
    (root / "empty").mkdir()
    with pytest.raises(RooflowError, match=r"class folder '.*empty' holds no image \(.bmp, .jpeg.*: remove it from"):
        build_subset(SubsetSpec(str(root), classes=3, images_per_class=1), tmp_path / "x.pt", tmp_path / "x.csv")


def test_rooflow_subset_says_what_it_wrote_and_writes_nothing_when_the_manifest_cannot_be(tmp_path, capsys):
    """It printed a dict's repr; a manifest path under a file failed after the subset was written, leaving it
    for a re-run to trust; an output under a file named the error 'file exists'."""
    from rooflow.cli import main

    tensor, manifest = tmp_path / "s.pt", tmp_path / "m.csv"
    assert main(["subset", "--classes", "2", "--images-per-class", "2", "--output", str(tensor),
                 "--manifest", str(manifest)]) == 0
    assert capsys.readouterr().out.strip() == (f"4 images of 2 classes (generated stand-in, 3x224x224 uint8) in "
                                               f"{tensor}; their manifest in {manifest}")
    (tmp_path / "file").write_text("")
    again = tmp_path / "t.pt"
    assert main(["subset", "--classes", "2", "--images-per-class", "2", "--output", str(again),
                 "--manifest", str(tmp_path / "file" / "m.csv")]) == 2
    assert capsys.readouterr().err.strip() == (
        f"rooflow subset: error: {tmp_path / 'file' / 'm.csv'}: cannot write it: {tmp_path / 'file'} is a file, not "
        f"a folder; give an output path in a folder (or move that file)")
    assert not again.exists() and not list(tmp_path.glob(".t.pt.*"))


def test_missing_root_is_one_clear_error(tmp_path):
    with pytest.raises(RooflowError, match="not a directory"):
        build_subset(SubsetSpec(str(tmp_path / "nope")), tmp_path / "x.pt", tmp_path / "x.csv")


def test_make_batch_cycles_and_normalises(tmp_path):
    data, _ = _build(tmp_path, SubsetSpec(None, 2, 2, 40, 32, 0))
    x, y = make_batch(data, 6)
    assert x.shape == (6, 3, 32, 32) and x.dtype == torch.float32
    assert y.tolist() == [0, 0, 1, 1, 0, 0]
    assert torch.equal(x[0], x[4])
    x_big, _ = make_batch(data, 2, image_size=48)
    assert x_big.shape == (2, 3, 48, 48)


def test_a_cut_or_foreign_subset_file_is_one_sentence(tmp_path):
    """A subset .pt cut short, a text file, or a tensor file of another kind ended in torch.load's traceback or a
    KeyError inside the timing job; now one sentence saying which file belongs there and to make it again if it is
    one cut short (it said "delete it": the file given by mistake may be anything, a shipped calibration)."""
    path = tmp_path / "subset.pt"
    build_subset(SubsetSpec(root=None, classes=2, images_per_class=2, image_size=32, resize=36), path,
                 tmp_path / "manifest.csv")
    assert load_subset(path)["images"].shape == (4, 3, 32, 32)
    whole = path.read_bytes()
    for name, content in (("cut.pt", whole[: len(whole) // 2]), ("text.pt", b"not a tensor file\n")):
        (tmp_path / name).write_bytes(content)
        with pytest.raises(RooflowError, match=rf"subset '.*{name}' is not a subset rooflow wrote \(torch.load "
                                               r"raised \w+: a file cut short.*\): give the \.pt file `rooflow subset "
                                               r"--output` wrote, or, if it is one cut short, make it again"):
            load_subset(tmp_path / name)
    torch.save({"weights": torch.zeros(2)}, tmp_path / "other.pt")
    with pytest.raises(RooflowError, match=r"holds no uint8 images \(N, 3, H, W\) with their labels: give the \.pt "
                                         r"file `rooflow subset --output` wrote"):
        load_subset(tmp_path / "other.pt")
    # none of its images (a ZeroDivisionError traceback in make_batch), or one channel of them (timed as "ok")
    good = load_subset(path)
    for name, images, labels in (("none.pt", good["images"][:0], good["labels"][:0]),
                                 ("gray.pt", good["images"][:, :1], good["labels"])):
        torch.save({**good, "images": images.clone(), "labels": labels.clone()}, tmp_path / name)
        with pytest.raises(RooflowError, match=rf"subset '.*{name}' holds no uint8 images \(N, 3, H, W\)"):
            load_subset(tmp_path / name)


def test_rooflow_time_refuses_factory_options_on_a_torchvision_model(tmp_path, capsys):
    """`rooflow time --model resnet18 --input 3x32x32` timed 224×224 images without a word; now one sentence
    naming where a torchvision model's input side comes from (the subset's image size)."""
    from rooflow.cli import main

    path = tmp_path / "subset.pt"
    build_subset(SubsetSpec(root=None, classes=1, images_per_class=2, image_size=32, resize=36), path,
                 tmp_path / "manifest.csv")
    assert main(["time", "--model", "resnet18", "--input", "3x32x32", "--batch", "2", "--subset", str(path)]) == 2
    assert capsys.readouterr().err.strip() == (
        "rooflow time: error: --input describes a package.module:factory model, but resnet18 is a torchvision "
        "model: leave --input out (a torchvision model's square input side is the subset's image size: "
        "`rooflow subset --image-size`)")


@pytest.mark.parametrize("option", ["--classes", "--images-per-class", "--resize", "--image-size"])
def test_rooflow_subset_refuses_a_size_or_count_of_zero(tmp_path, capsys, option):
    """--classes 0 ended in torch.stack's traceback and --image-size 0 wrote a subset of 0×0 images that every
    timing job then read; each is now argparse's one sentence, and nothing is written."""
    from rooflow.cli import main

    with pytest.raises(SystemExit) as exited:
        main(["subset", option, "0", "--output", str(tmp_path / "s.pt"), "--manifest", str(tmp_path / "m.csv")])
    assert exited.value.code == 2
    expected = "a side in pixels from 2 to 4,096" if option == "--resize" else "a positive integer (1 or more)"
    assert f"rooflow subset: error: argument {option}: 0 is not {expected}" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_rooflow_subset_refuses_a_resize_below_the_crop(tmp_path, capsys):
    """--resize 100 with a 224 crop wrote images with black borders (the crop zero-pads); one sentence, nothing
    written."""
    from rooflow.cli import main

    assert main(["subset", "--resize", "100", "--image-size", "224", "--output", str(tmp_path / "s.pt"),
                 "--manifest", str(tmp_path / "m.csv")]) == 2
    assert ("--resize 100 is below --image-size 224: the center crop would pad the images with black borders; "
            "raise --resize to --image-size or more" in capsys.readouterr().err)
    assert not list(tmp_path.iterdir())


def test_rooflow_subsets_errors_name_its_flags_not_the_configs_keys(tmp_path, capsys):
    """The subset job's sentences name the config's keys (dataset.classes, dataset.root): at `rooflow subset` they
    told a user to lower a key the command does not have. Each names the flag instead."""
    from PIL import Image

    from rooflow.cli import main

    tree = tmp_path / "tree"
    for name in ("cat", "dog"):
        (tree / name).mkdir(parents=True)
        for i in range(2):
            Image.new("RGB", (64, 64)).save(tree / name / f"{i}.jpg")
    out = ["--output", str(tmp_path / "s.pt"), "--manifest", str(tmp_path / "m.csv")]
    said = {}
    for case, argv in {"classes": ["--root", str(tree), "--classes", "3"],
                       "images": ["--root", str(tree), "--classes", "2", "--images-per-class", "3"],
                       "root": ["--root", str(tmp_path / "nowhere")]}.items():
        assert main(["subset", *argv, *out]) == 2
        said[case] = capsys.readouterr().err.strip()
    assert said["classes"] == (f"rooflow subset: error: --root '{tree}' has 2 class folder(s), fewer than --classes "
                               "3: lower --classes or use the ImageNet train/ or val/ folder (one folder per class)")
    assert said["images"].endswith("holds 2 image(s), fewer than --images-per-class 3: lower --images-per-class")
    assert said["root"].endswith("is not a directory: point --root at an ImageFolder tree")
    assert not any("dataset." in text for text in said.values())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]  # nothing written


def test_images_the_8_bit_subset_cannot_hold_are_one_sentence_each(tmp_path, monkeypatch):
    """A 16-bit PNG was stored as a white frame and a float TIFF of 0..1 as a black one (exit 0, their checksums in the
    manifest); an image over Pillow's pixel limit was a DecompressionBombError traceback."""
    import numpy as np

    cases = {"sixteen.png": Image.fromarray(np.arange(64 * 64, dtype=np.uint16).reshape(64, 64) * 16),
             "float.tif": Image.fromarray(np.linspace(0, 1, 64 * 64, dtype=np.float32).reshape(64, 64)),
             "large.png": Image.new("RGB", (80, 80))}
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 3000)  # 80 × 80 = 6,400 px is over twice it: Pillow's error
    for name, image in cases.items():
        root = tmp_path / name.split(".")[0]
        (root / "only").mkdir(parents=True)
        image.save(root / "only" / name)
        words = ("has more pixels than Pillow decodes (3,000; a decompression-bomb guard): downscale it" if
                 name == "large.png" else f"has {image.mode} pixels (more than 8 bits per channel), which the 8-bit "
                 f"subset would store clipped to white or black: convert it to 8-bit RGB")
        with pytest.raises(RooflowError, match=re.escape(f"image '{root / 'only' / name}' {words}")):
            build_subset(SubsetSpec(str(root), 1, 1), tmp_path / f"{name}.pt", tmp_path / f"{name}.csv")
        assert not (tmp_path / f"{name}.pt").exists()


def test_rooflow_subset_refuses_to_write_inside_the_dataset_it_reads(tmp_path, capsys):
    """`rooflow subset --root T --output T/a/0.jpg` replaced that image with the subset (exit 0); a re-run then
    blamed the dataset ("cannot identify image file"). An output anywhere in the tree is refused, nothing written."""
    from rooflow.cli import main

    tree = _image_folder(tmp_path / "tree", classes=2, per_class=2)
    image = tree / "n00000000" / "img_0.JPEG"
    before = image.read_bytes()
    for output, manifest in ((image, tmp_path / "m.csv"), (tmp_path / "s.pt", tree / "manifest.csv")):
        assert main(["subset", "--root", str(tree), "--classes", "1", "--images-per-class", "2", "--output",
                     str(output), "--manifest", str(manifest)]) == 2
        inside = output if output == image else manifest
        assert capsys.readouterr().err.strip() == (
            f"rooflow subset: error: the subset's output {inside} is inside --root '{tree}': writing it there could "
            "replace an image it reads; write it outside the dataset tree")
    assert image.read_bytes() == before and not (tree / "manifest.csv").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tree"]


def test_the_stand_in_made_in_memory_is_the_workflows_default_subset_file(tmp_path):
    """`rooflow time` without --subset times the generated stand-in made in memory (subset_data): the same images
    and labels the workflow's default subset step writes (SubsetSpec's defaults: config/config.yaml's dataset)."""
    from rooflow.workload.dataset import subset_data

    written, _ = _build(tmp_path, SubsetSpec())
    in_memory, rows = subset_data(SubsetSpec())
    assert in_memory["images"].shape == (32, 3, 224, 224) and len(rows) == 32
    assert torch.equal(in_memory["images"], written["images"]) and torch.equal(in_memory["labels"], written["labels"])


def test_rooflow_time_runs_without_a_subset_file(tmp_path, capsys):
    """A user times a model in one command: no `rooflow subset` first."""
    import json

    from rooflow.cli import main

    output = tmp_path / "timing.json"
    assert main(["time", "--model", "squeezenet1_1", "--batch", "1", "--warmup", "0", "--iterations", "2",
                 "--rounds", "1", "--threads", "1", "--output", str(output)]) == 0
    record = json.loads(output.read_text())
    assert record["status"] == "ok" and len(record["seconds"]) == 2 and record["model"] == "squeezenet1_1"
    capsys.readouterr()
    assert main(["time", "--model", "squeezenet1_1", "--batch", "1", "--subset", str(tmp_path / "absent.pt")]) != 0
    assert "absent.pt' does not exist: run the subset_dataset step (or `rooflow subset`) first" in \
        capsys.readouterr().err

