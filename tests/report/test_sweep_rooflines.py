"""Rooflines at sweep scale and legends true to their points.

A 480-run summary (20 models × 4 batches × 3 precisions × 2 modes) is built from the real H100 summary rows
(tests/data/real/h100-rooflow/summary-tf32.csv), relabelled (rooflow.report.sweep.relabelled_sweep), and
drawn once: no label covers another label or a marker, every model is distinguishable in its panel, the
legends lie inside the figure and list exactly what is drawn, in the colours it is drawn in. The
companion figures are drawn from a CPU + GPU summary whose batches and models differ between the devices.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from matplotlib.collections import PathCollection
from matplotlib.colors import to_rgba
from support import marker_boxes, overlap, text_box

from rooflow.hardware.devices import default_catalogue_path, load_device
from rooflow.report import figures
from rooflow.report.checks import build_checks, flagged_runs
from rooflow.report.interactive import interactive_roofline
from rooflow.report.plots import FLAG_STYLES
from rooflow.report.summary import COLUMNS
from rooflow.report.sweep import SWEEP_POINTS, device_roofline, model_styles, relabelled_sweep

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"


@pytest.fixture(scope="module")
def sweep():
    device = load_device(default_catalogue_path(), "h100-sxm5-80gb", REAL / "ceilings-h100.json")
    summary = relabelled_sweep(pd.read_csv(REAL / "summary-tf32.csv"), device)
    checks, _ = build_checks(summary)
    return summary, checks, device


@pytest.fixture(scope="module")
def drawn(sweep, tmp_path_factory):
    summary, checks, device = sweep
    out = device_roofline(summary, device, tmp_path_factory.mktemp("sweep") / "h100.png",
                          flags=flagged_runs(checks), keep_open=True)
    yield out
    plt.close(out["figure"])


def test_the_relabelled_sweep_is_sweep_sized_and_keeps_the_real_rows_numbers(sweep):
    summary, checks, device = sweep
    assert len(summary) == 480 and summary["model"].nunique() == 20
    assert summary.groupby(["model", "batch", "precision", "mode"]).size().max() == 1
    # every run recomputed against the device's roof as the summary does: share = achieved / attainable
    share = 100 * summary["achieved_flops_per_second"] / summary["attainable_flops_per_second"]
    assert share.to_numpy() == pytest.approx(summary["percent_of_roofline"].to_numpy())
    peak, bandwidth = device.roof_for_precision("tf32")
    tf32 = summary[summary["precision"] == "tf32"]
    attainable = [min(peak, bandwidth * ai) for ai in tf32["arithmetic_intensity"]]
    assert tf32["attainable_flops_per_second"].to_numpy() == pytest.approx(attainable)
    assert not checks.empty  # some runs are flagged, so the figure has rings to keep labels off


def test_model_styles_do_not_repeat_for_130_models():
    styles = model_styles([f"m{i:03d}" for i in range(130)])
    assert len(set(styles.values())) == 130


def test_a_sweep_is_drawn_as_small_multiples_of_precision_by_mode(drawn):
    assert len(drawn["points"]) == 480 > SWEEP_POINTS
    assert [(p["precision"], p["mode"]) for p in drawn["panels"]] == [
        (precision, mode) for precision in ("bf16", "fp32", "tf32") for mode in ("inference", "training")]
    assert all(len(p["points"]) == 80 for p in drawn["panels"])


def _points_by_model(ax) -> dict:
    """{(edge colour, marker path): number of points} of the run markers on `ax` (not the rings)."""
    rings = {to_rgba(style["color"]) for style in FLAG_STYLES.values()}
    found = {}
    for collection in ax.collections:
        colour = tuple(collection.get_edgecolor()[0])
        if colour in rings:
            continue
        path = collection.get_paths()[0].vertices.round(3).tobytes()
        found[(colour, path)] = found.get((colour, path), 0) + len(collection.get_offsets())
    return found


def test_every_model_is_distinguishable_in_its_panel(drawn):
    for panel in drawn["panels"]:
        models = {p["model"] for p in panel["points"]}
        found = _points_by_model(panel["ax"])
        # one (colour, marker) per model in the artists themselves, and every point drawn
        assert len(found) == len(models) == 20, panel["precision"]
        assert sum(found.values()) == len(panel["points"])


def test_labels_collide_with_no_label_and_no_marker(drawn):
    fig = drawn["figure"]
    renderer = fig.canvas.get_renderer()
    placed = [(panel, t) for panel in drawn["panels"] for t in panel["label_artists"]]
    # flagged runs and outliers only, and the layout leaves room for most of them
    assert len(placed) >= len(drawn["panels"]) * 3
    assert len(placed) < len(drawn["points"]) / 5
    flagged = {f["label"] for f in drawn["flagged"]}
    boxes = [text_box(t, renderer) for _, t in placed]
    for i, a in enumerate(boxes):
        for j in range(i):
            assert not overlap(a, boxes[j]), (placed[i][1].get_text(), placed[j][1].get_text())
    for panel in drawn["panels"]:
        ax = panel["ax"]
        markers = marker_boxes(ax)
        assert len(markers) >= len(panel["points"])
        for text in panel["label_artists"]:
            box = text_box(text, renderer)
            assert not any(overlap(box, m) for m in markers), text.get_text()
            assert ax.get_window_extent(renderer).contains(box.x0, box.y0)
            assert ax.get_window_extent(renderer).contains(box.x1, box.y1)
    # every flagged run in a panel was a label candidate (placed or, without room, left out)
    candidates = {f"{lbl['text']} {p['precision']} {p['mode']}" for p in drawn["panels"] for lbl in p["labels"]}
    assert flagged <= candidates


def test_the_legends_are_inside_the_figure_and_true_to_the_points(drawn):
    fig = drawn["figure"]
    renderer = fig.canvas.get_renderer()
    legend, roofs = drawn["legends"]
    for box in (legend.get_window_extent(renderer), roofs.get_window_extent(renderer),
                fig._suptitle.get_window_extent(renderer), *[ax.get_tightbbox(renderer) for ax in fig.axes]):
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.width and box.y1 <= fig.bbox.height
    texts = [t.get_text() for t in legend.get_texts()]
    models = sorted({p["model"] for p in drawn["points"]})
    assert texts[:len(models)] == models
    assert [t for t in texts if t.startswith("batch ")] == ["batch 1", "batch 8", "batch 32", "batch 128"]
    # the legend's model entries in the colours and markers of that model's points
    ax = drawn["panels"][0]["ax"]
    drawn_styles = set(_points_by_model(ax))
    for handle in drawn["legend_handles"][:len(models)]:
        colour = to_rgba(handle.get_color())
        assert any(c == colour for c, _ in drawn_styles), handle.get_label()
    # the roof legend: exactly the roofs drawn (one entry each)
    assert sorted(t.get_text() for t in roofs.get_texts()) == sorted(r["label"] for r in drawn["roofs"])


def test_few_runs_keep_the_detailed_numbered_roofline(sweep, tmp_path):
    summary, _, device = sweep
    few = summary[(summary["precision"] == "tf32") & (summary["batch"] == 32)].head(SWEEP_POINTS)
    out = device_roofline(few, device, tmp_path / "few.svg")
    assert "panels" not in out and [p["number"] for p in out["points"]] == list(range(1, SWEEP_POINTS + 1))


def test_the_interactive_roofline_is_one_offline_page_with_every_run(sweep, tmp_path):
    summary, checks, device = sweep
    page = tmp_path / "roofline.html"
    out = interactive_roofline(summary, [device], page, checks=checks)
    html = page.read_text()
    assert out["points"] == 480 and out["options"]["batch"] == [1, 8, 32, 128]
    assert out["options"]["device"] == ["h100-sxm5-80gb"] and len(out["options"]["model"]) == 20
    # plotly.js (its basic bundle) embedded, nothing fetched: no script or stylesheet from the network
    assert not re.search(r"<(script|link)[^>]+(src|href)=\"https?:", html)
    assert "Plotly.newPlot" in html and "plotly.js (basic - minified)" in html
    # under the 2 MB that Chromium shows as a data URL (base64: 4/3 of the page), so the report displays it
    assert len(html.encode()) * 4 / 3 < 2_000_000
    flagged = checks.iloc[0]
    assert f"{flagged['severity']}: {flagged['check']}" in html  # checks in the hover text


# --- the companion figures: legends from the runs each figure draws ---------------------------------

def two_devices() -> pd.DataFrame:
    """A CPU with batches 1 and 4 and two models; a GPU with batches 1, 4, 64 and two more models."""
    rows = []
    for device, models, batches in (("cpu", ("alexnet", "resnet18"), (1, 4)),
                                    ("gpu", ("alexnet", "resnet18", "vgg13", "vgg19"), (1, 4, 64))):
        for i, model in enumerate(models):
            for batch in batches:
                for mode in ("inference", "training"):
                    row = {c: math.nan for c in COLUMNS}
                    seconds = 1e-3 * batch * (i + 1) * (3 if mode == "training" else 1)
                    row.update(device=device, model=model, batch=batch, precision="fp32", mode=mode, status="ok",
                               params=1e7 * (i + 1), estimated_flops=1e9 * batch * (i + 1), measured_seconds=seconds,
                               predicted_seconds=seconds * 1.1, predicted_seconds_low=seconds * 0.8,
                               predicted_seconds_high=seconds * 1.4, seconds_spread=0.01)
                    rows.append(row)
    return pd.DataFrame(rows, columns=COLUMNS)


@pytest.fixture
def kept(monkeypatch):
    """The figures the companion functions draw, kept open instead of closed."""
    figures_kept, close = [], plt.close
    monkeypatch.setattr(figures.plt, "close", lambda fig=None: figures_kept.append(fig))
    yield figures_kept
    for fig in figures_kept:
        close(fig)


@pytest.mark.parametrize("draw", [figures.latency_figure, figures.throughput_figure, figures.predicted_figure])
def test_a_cpu_figure_lists_only_its_own_models_and_batches_in_their_colours(draw, kept, tmp_path):
    draw(two_devices(), "cpu", tmp_path / "f.svg")
    fig = kept[-1]
    legend = fig.legends[0]
    entries = {t.get_text(): h for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert {"vgg13", "vgg19", "batch 64"}.isdisjoint(entries)
    assert {"alexnet", "resnet18", "batch 1", "batch 4"} <= set(entries)
    legend_colours = {to_rgba(entries[f"batch {b}"].get_color()) for b in (1, 4)}
    point_colours = {tuple(c.get_edgecolor()[0]) for ax in fig.axes for c in ax.collections
                     if isinstance(c, PathCollection)}
    assert point_colours == legend_colours
    renderer = fig.canvas.get_renderer()
    title = fig._suptitle.get_window_extent(renderer)
    assert not overlap(title, legend.get_window_extent(renderer)), "the title runs into the legend"


def test_the_time_by_layer_legend_lists_the_categories_with_time_in_their_bar_colours(kept, tmp_path):
    estimated = {"resnet18 b1 fp32 train": {"Conv2d": 0.08, "ReLU": 0.02, "Dropout": 0.0}}
    kernels = {"resnet18 b1 fp32 train": {"convolution": 0.09, "elementwise": 0.01}}
    figures.time_by_layer_figure(estimated, kernels, "cpu", tmp_path / "t.svg")
    fig = kept[-1]
    legend = fig.legends[0]
    entries = {t.get_text(): to_rgba(h.get_facecolor()) for t, h in zip(legend.get_texts(), legend.legend_handles)}
    assert set(entries) == {"Conv2d", "ReLU", "convolution", "elementwise"}  # no Dropout: it took no time
    bars = {to_rgba(p.get_facecolor()) for ax in fig.axes for p in ax.patches if p.get_width() > 0}
    assert set(entries.values()) == bars
