"""The roofline figure's data: roof geometry, points, flags, hierarchical and estimate points — from a
device and a summary built by hand, including a deliberately wrong run above its roof."""

from __future__ import annotations

import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
import pytest
from support import DRAM, L2, PEAK_FP16, PEAK_FP32, PEAK_TF32, gpu, marker_boxes, overlap, text_box

from rooflow.hardware.devices import Device
from rooflow.report.checks import build_checks, flagged_runs
from rooflow.report.plots import (
    compute_roofs_to_draw,
    flops_figure,
    params_figure,
    roof_lines,
    roofline_figure,
    theoretical_roofs,
)
from rooflow.report.summary import COLUMNS


def run(model, batch, mode, flops, nbytes, seconds, precision="fp32", device="gpu", **extra) -> dict:
    """A summary row computed by hand: AI = flops / bytes, achieved = flops / seconds, attainable =
    min(peak, bandwidth × AI) on the datasheet fp32 roof."""
    row = {c: math.nan for c in COLUMNS}
    peak = {"fp32": PEAK_FP32, "tf32": PEAK_TF32, "fp16": PEAK_FP16, "bf16": PEAK_FP16}[precision]
    ai = flops / nbytes
    attainable = min(peak, DRAM * ai)
    achieved = flops / seconds
    row.update(device=device, model=model, batch=batch, precision=precision, mode=mode, status="ok",
               device_kind="cuda", flops=flops, bytes=nbytes, arithmetic_intensity=ai, measured_seconds=seconds,
               achieved_flops_per_second=achieved, attainable_flops_per_second=attainable,
               percent_of_roofline=100 * achieved / attainable, roof_source="datasheet", params=1e7,
               estimated_flops=flops, flops_source="estimate", bytes_source="estimate-fused", checks="",
               seconds_spread=0.01)
    row.update(extra)
    return row


def hand_summary() -> pd.DataFrame:
    rows = [
        # AI 10 (memory-bound: ridge 10 = 20e12 / 2e12 is the kink), 5 TFLOP/s = 25% of the 20 TFLOP/s roof
        run("resnet18", 8, "inference", 10e9, 1e9, 2e-3),
        # AI 50, compute-bound, 10 TFLOP/s = 50%
        run("vgg11", 8, "training", 100e9, 2e9, 10e-3),
        # deliberately wrong: AI 1 → roof 2 TFLOP/s, but 4 TFLOP/s achieved (200%)
        run("alexnet", 1, "inference", 4e9, 4e9, 1e-3),
    ]
    return pd.DataFrame(rows, columns=COLUMNS)


def test_hand_summary_is_what_the_test_thinks():
    s = hand_summary().set_index("model")
    assert s.loc["resnet18", "attainable_flops_per_second"] == pytest.approx(20e12)
    assert s.loc["resnet18", "percent_of_roofline"] == pytest.approx(25)
    assert s.loc["alexnet", "percent_of_roofline"] == pytest.approx(200)


def test_compute_roofs_merge_fp16_and_bf16_and_leave_fp64_out_unless_asked():
    names = [(r.source, name) for r, name in compute_roofs_to_draw(gpu())]
    assert names == [("datasheet", "FP32"), ("datasheet", "TF32 tensor"), ("datasheet", "FP16/BF16 tensor"),
                     ("measured", "FP32")]
    with_fp64 = [name for _, name in compute_roofs_to_draw(gpu(), show_fp64=True)]
    assert "FP64" in with_fp64


def slope(xs, ys, i):
    return (math.log10(ys[i + 1]) - math.log10(ys[i])) / (math.log10(xs[i + 1]) - math.log10(xs[i]))


def test_roof_geometry_ridge_at_peak_over_bandwidth_slope_one_then_flat():
    lines = roof_lines(gpu(), 0.01, 1e4)
    by = {(line["compute"], line["memory_level"], line["source"]): line for line in lines}
    fp32 = by[("FP32", "dram", "datasheet")]
    assert fp32["ridge"] == pytest.approx(PEAK_FP32 / DRAM) == pytest.approx(10.0)
    # ONE connected polyline: start, the ridge as a vertex, end
    assert fp32["xs"].tolist() == pytest.approx([0.01, 10.0, 1e4])
    assert slope(fp32["xs"], fp32["ys"], 0) == pytest.approx(1.0)
    assert slope(fp32["xs"], fp32["ys"], 1) == pytest.approx(0.0)
    assert fp32["ys"][-1] == pytest.approx(PEAK_FP32) and fp32["linestyle"] == "-"
    assert by[("TF32 tensor", "dram", "datasheet")]["ridge"] == pytest.approx(75.0)
    # measured roofs: dashed, joined to the measured DRAM roof, ridge 18e12 / 1.8e12
    measured = by[("FP32", "dram", "measured")]
    assert measured["linestyle"] == "--" and measured["ridge"] == pytest.approx(10.0)
    assert "90% of datasheet" in measured["label"]
    # the L2 roof under the top datasheet compute roof (FP16/BF16 300 TFLOP/s): ridge 50
    l2 = by[("FP16/BF16 tensor", "l2", "datasheet")] if ("FP16/BF16 tensor", "l2", "datasheet") in by else \
        next(line for line in lines if line["memory_level"] == "l2")
    assert l2["ridge"] == pytest.approx(PEAK_FP16 / L2)
    assert slope(l2["xs"], l2["ys"], 0) == pytest.approx(1.0)


def test_points_ai_lines_and_the_wrong_point_flagged(tmp_path):
    summary = hand_summary()
    checks, _ = build_checks(summary)
    assert list(checks["model"]) == ["alexnet"] and checks.iloc[0]["check"] == "above the roof"
    path = tmp_path / "roofline.svg"
    drawn = roofline_figure(summary, gpu(), path, flags=flagged_runs(checks))
    points = {p["label"]: p for p in drawn["points"]}
    assert set(points) == {"resnet18 b8 fp32 inf", "vgg11 b8 fp32 train", "alexnet b1 fp32 inf"}
    resnet = points["resnet18 b8 fp32 inf"]
    assert (resnet["x"], resnet["y"], resnet["attainable"]) == pytest.approx((10.0, 5e12, 20e12))
    wrong = points["alexnet b1 fp32 inf"]
    assert wrong["y"] > wrong["attainable"] and wrong["severity"] == "error"  # plotted, and ringed
    assert drawn["flagged"] == [{"label": "alexnet b1 fp32 inf", "severity": "error"}]
    assert points["vgg11 b8 fp32 train"]["filled"] and not resnet["filled"]
    assert len({p["marker"] for p in points.values()}) == 3  # one marker per model
    svg = path.read_text()
    assert "Arithmetic intensity [FLOP/byte]" in svg and "Performance [FLOP/s]" in svg
    assert "ring: failed a self-check (error)" in svg and "ridge 10 FLOP/B" in svg
    assert path.stat().st_size < 400_000


def test_a_point_whose_counters_missed_the_tensor_core_work_draws_no_headroom(tmp_path):
    """A run whose FLOP counters were blind to its tensor-core work (the default config's imported A100 VGGs: 1-2%
    of the estimated FLOPs counted) sits at an intensity of the FLOPs they saw: its dotted line up to the roof read
    as headroom at an intensity the step never had. The point stays (what was counted), without that line, and its
    key says why."""
    from rooflow.report.summary import UNSEEN_BOUND

    summary = hand_summary()
    summary["bound"] = summary["bound"].astype(object)
    summary.loc[summary["model"] == "vgg11", "bound"] = UNSEEN_BOUND
    path = tmp_path / "roofline.svg"
    drawn = roofline_figure(summary, gpu(), path)
    points = {p["label"]: p for p in drawn["points"]}
    assert points["vgg11 b8 fp32 train"]["attainable"] is None
    assert points["resnet18 b8 fp32 inf"]["attainable"] == pytest.approx(20e12)
    svg = path.read_text()
    assert svg.count("(tensor-core FLOPs not counted)") == 1 and "vgg11 b8 train (tensor-core FLOPs" in svg


def test_every_kind_of_ring_drawn_is_in_the_roofline_legend(tmp_path):
    """A warning's ring beside an error's: each kind drawn has its legend entry (the roofline's legend read the
    rings from a generator once per kind, so a warning's ring went unexplained: the default run's CPU roofline
    ringed 14 of its 16 points orange with no entry saying what orange meant)."""
    summary = hand_summary()
    checks, _ = build_checks(summary)
    warning = checks.iloc[[0]].assign(model="resnet18", batch=8, severity="warning", check="noisy timing")
    path = tmp_path / "roofline.svg"
    drawn = roofline_figure(summary, gpu(), path, flags=flagged_runs(pd.concat([checks, warning])))
    assert sorted(f["severity"] for f in drawn["flagged"]) == ["error", "warning"]
    svg = path.read_text()
    assert "ring: failed a self-check (error)" in svg and "ring: self-check warning" in svg
    # warnings alone: the entry is there too
    roofline_figure(summary, gpu(), path, flags=flagged_runs(warning))
    svg = path.read_text()
    assert "ring: self-check warning" in svg and "ring: failed a self-check (error)" not in svg


def test_hierarchical_and_estimate_points_beside_a_measured_one(tmp_path):
    row = run("resnet50", 64, "training", 1e12, 40e9, 0.2, flops_source="ncu", bytes_source="ncu-dram",
              estimated_flops=0.9e12, estimated_fused_bytes=60e9)
    summary = pd.DataFrame([row], columns=COLUMNS)
    hierarchy = pd.DataFrame([{"device": "gpu", "model": "resnet50", "batch": 64, "precision": "fp32",
                               "mode": "training", "flops_total": 1e12, "dram_bytes": 40e9, "l2_bytes": 200e9,
                               "l1_bytes": 1e12}])
    drawn = roofline_figure(summary, gpu(), tmp_path / "r.svg", hierarchy=hierarchy)
    levels = {lvl["level"]: lvl for lvl in drawn["levels"]}
    # same kernels, same FLOP/s (5 TFLOP/s), at AI 1e12/200e9 = 5 (L2) and 1 (L1)
    assert levels["l2"]["x"] == pytest.approx(5.0) and levels["l1"]["x"] == pytest.approx(1.0)
    assert levels["l2"]["y"] == pytest.approx(5e12) == drawn["points"][0]["y"]
    # the estimate: 0.9e12 / 60e9 = 15 FLOP/B at 0.9e12 / 0.2 s = 4.5 TFLOP/s
    assert drawn["estimates"] == [{"label": "resnet50 b64 fp32 train", "x": pytest.approx(15.0),
                                   "y": pytest.approx(4.5e12)}]
    assert "same kernels at L2 / L1 intensity" in (tmp_path / "r.svg").read_text()


def test_a_compiled_point_beside_its_eager_one_keeps_its_own_estimate_cache_points_and_flag(tmp_path):
    """One run profiled as eager and as compiled: each point's estimate sits at the bytes of the way it ran
    (eager 1e12 / 100e9 unfused = 10, compiled 1e12 / 40e9 fused = 25 FLOP/B), each keeps its own L2 point, and
    a check on the compiled row rings the compiled point only."""
    eager = run("resnet50", 64, "training", 1e12, 80e9, 0.2, flops_source="ncu", bytes_source="ncu-dram",
                estimated_flops=1e12, estimated_bytes=100e9, estimated_fused_bytes=40e9, variant="eager")
    compiled = run("resnet50", 64, "training", 1e12, 50e9, 0.02, flops_source="ncu", bytes_source="ncu-dram",
                   estimated_flops=1e12, estimated_bytes=40e9, estimated_fused_bytes=40e9, variant="compile")
    assert compiled["percent_of_roofline"] > 100  # 50 TFLOP/s over a 20 TFLOP/s roof: a bug to flag
    summary = pd.DataFrame([eager, compiled], columns=COLUMNS)
    checks, _ = build_checks(summary)
    assert list(checks["variant"]) == ["compile"] and checks.iloc[0]["check"] == "above the roof"
    hierarchy = pd.DataFrame([{"device": "gpu", "model": "resnet50", "batch": 64, "precision": "fp32",
                               "mode": "training", "variant": variant, "flops_total": 1e12, "dram_bytes": dram,
                               "l2_bytes": l2} for variant, dram, l2 in (("eager", 80e9, 400e9),
                                                                         ("compile", 50e9, 200e9))])
    drawn = roofline_figure(summary, gpu(), tmp_path / "r.svg", flags=flagged_runs(checks), hierarchy=hierarchy)
    estimates = {e["label"]: e["x"] for e in drawn["estimates"]}
    assert estimates == {"resnet50 b64 fp32 train": pytest.approx(10.0),
                         "resnet50 b64 fp32 train compile": pytest.approx(25.0)}
    assert {lvl["label"]: lvl["x"] for lvl in drawn["levels"]} == {"resnet50 b64 fp32 train": pytest.approx(2.5),
                                                                   "resnet50 b64 fp32 train compile": pytest.approx(5.0)}
    assert drawn["flagged"] == [{"label": "resnet50 b64 fp32 train compile", "severity": "error"}]


def test_several_precisions_are_coloured_by_their_roof(tmp_path):
    summary = pd.DataFrame([run("resnet18", 8, "inference", 10e9, 1e9, 2e-3),
                            run("resnet18", 8, "inference", 10e9, 0.5e9, 0.5e-3, precision="fp16")], columns=COLUMNS)
    roofline_figure(summary, gpu(), tmp_path / "r.svg")
    svg = (tmp_path / "r.svg").read_text()
    assert "fp16 run" in svg and "colour = precision" in svg


def test_flops_per_image_is_of_one_batch_and_says_which(tmp_path):
    """AlexNet training per image: 4.51 GFLOP at batch 1, 4.24 at batch 4 (the SGD update is per step); the
    figure showed their median, 4.38, which is neither. It shows the largest batch's and names it."""
    rows = [run("alexnet", 1, "training", 4.51e9, 1e9, 1e-3), run("alexnet", 4, "training", 4 * 4.24e9, 1e9, 1e-3),
            run("alexnet", 1, "inference", 1.43e9, 1e9, 1e-3), run("alexnet", 4, "inference", 4 * 1.43e9, 1e9, 1e-3)]
    data = flops_figure(pd.DataFrame(rows, columns=COLUMNS), tmp_path / "f.svg")
    assert data.loc["alexnet", "training"] == pytest.approx(4.24e9)
    assert data.loc["alexnet", "inference"] == pytest.approx(1.43e9)
    assert data.loc["alexnet", "batch"] == 4
    assert "alexnet (batch 4)" in (tmp_path / "f.svg").read_text()


def test_a_device_without_runs_still_draws_its_roofs(tmp_path):
    empty = pd.DataFrame(columns=COLUMNS)
    drawn = roofline_figure(empty, gpu(), tmp_path / "r.svg")
    assert drawn["points"] == [] and len(drawn["roofs"]) >= 4
    assert "no measured runs" in (tmp_path / "r.svg").read_text()


def test_cost_bars_are_linear_for_a_small_range_and_log_with_a_reason_for_a_wide_one(tmp_path):
    rows = [run(m, 1, mode, f, 1e9, 1e-3, params=p) for m, f, p in
            (("resnet18", 3.6e9, 11.7e6), ("alexnet", 1.4e9, 61e6)) for mode in ("inference", "training")]
    flops_figure(pd.DataFrame(rows, columns=COLUMNS), tmp_path / "f.svg")
    assert "log scale" not in (tmp_path / "f.svg").read_text()
    rows += [run("tiny", 1, "inference", 1e6, 1e9, 1e-3, params=1e3)]
    params_figure(pd.DataFrame(rows, columns=COLUMNS), tmp_path / "p.svg")
    assert re.search(r"log scale: data span [\d.]+ decades", (tmp_path / "p.svg").read_text())


def test_a_cpu_draws_its_theoretical_peak_solid_beside_the_measured_roofs(tmp_path):
    cpu = Device(key="cpu", kind="cpu", name="Test CPU", measured_peak_flops_per_second={"fp32": 100e9},
                 measured_dram_bytes_per_second=10e9)
    extra = theoretical_roofs({"theoretical_peak_flops_per_second": {"fp32": 400e9}})
    lines = roof_lines(cpu, 0.1, 1000, extra_roofs=extra)
    by_source = {line["source"]: line for line in lines}
    assert by_source["theoretical"]["linestyle"] == "-" and by_source["measured"]["linestyle"] == "--"
    # the theoretical roof has no memory roof of its own: it joins the measured DRAM roof, ridge 40
    assert by_source["theoretical"]["ridge"] == pytest.approx(40.0)
    assert by_source["measured"]["ridge"] == pytest.approx(10.0)
    assert "25% of theoretical" in by_source["measured"]["label"]
    # ...and its legend entry says whose bandwidth that is (it read as a theoretical DRAM roof)
    assert by_source["theoretical"]["label"].endswith("| DRAM 10 GB/s (measured) | ridge 40 FLOP/B")
    assert "(measured)" not in by_source["measured"]["label"]
    summary = pd.DataFrame([run("resnet18", 1, "inference", 1e9, 1e8, 0.1, device="cpu")], columns=COLUMNS)
    roofline_figure(summary, cpu, tmp_path / "cpu.svg", extra_roofs=extra)
    assert "theoretical roofs solid, measured dashed" in (tmp_path / "cpu.svg").read_text()


def test_a_cpus_16_bit_roofs_are_its_matrix_instructions_not_tensor_cores():
    """This Zen 4 VM's ceilings measure a bf16 matmul roof (AVX512-BF16): its legend said "BF16 tensor"."""
    cpu = Device(key="cpu", kind="cpu", name="Test CPU", measured_peak_flops_per_second={"fp32": 100e9,
                 "fp16": 200e9, "bf16": 200e9}, measured_dram_bytes_per_second=10e9)
    assert [name for _, name in compute_roofs_to_draw(cpu)] == ["FP32", "FP16/BF16 matmul"]
    alone = Device(key="cpu", kind="cpu", name="Test CPU", measured_peak_flops_per_second={"fp32": 100e9,
                   "bf16": 200e9}, measured_dram_bytes_per_second=10e9)
    assert [roof.label for roof in alone.roofs() if roof.kind == "compute"] == ["FP32 (measured)",
                                                                               "BF16 matmul (measured)"]
    assert [r.name for r in theoretical_roofs({"device_kind": "cpu", "theoretical_peak_flops_per_second": {
        "fp32": 400e9, "bf16": 800e9}})] == ["FP32", "BF16 matmul"]
    assert [name for _, name in compute_roofs_to_draw(gpu())][2] == "FP16/BF16 tensor"  # a GPU's stay tensor


# --- readable at report size: labels never collide, everything inside the figure ----------------------

REAL = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow"


def h100_rooflow_inputs():
    """The real H100 tf32 summary, its cache-level totals from the recorded ncu files, and the H100 with its
    real measured ceilings (whose L2 roof, under HBM, is a failed measurement)."""
    from rooflow.hardware.devices import default_catalogue_path, load_device
    from rooflow.profilers.ncu import aggregate_ncu

    summary = pd.read_csv(REAL / "summary-tf32.csv")
    hierarchy = []
    for _, row in summary.iterrows():
        totals = aggregate_ncu([REAL / f"{row['model']}-b64-tf32-{row['mode']}-ncu.csv.gz"]).totals
        hierarchy.append({**{k: row[k] for k in ("device", "model", "batch", "precision", "mode")},
                          **{k: totals[k] for k in ("flops_total", "dram_bytes", "l2_bytes", "l1_bytes")}})
    device = load_device(default_catalogue_path(), "h100-sxm5-80gb", REAL / "ceilings-h100.json")
    return summary, pd.DataFrame(hierarchy), device


def crowded_rows(device_key: str, count: int) -> list[dict]:
    """`count` runs packed into the same two decades as the real ones (AI 10-100, 20-200 TFLOP/s); none at
    batch 64, so the cache-level points stay the real runs' own."""
    models = ["resnet18", "resnet50", "vgg16", "alexnet", "mobilenet_v2", "densenet121", "efficientnet_b0"]
    rows = []
    for i in range(count):
        ai = 10 * 10 ** ((i * 0.37) % 1.0)
        tflops = 20 * 10 ** ((i * 0.61) % 1.0)
        flops = 1e12
        row = run(models[i % len(models)], [8, 16, 32, 128, 256][i % 5], ["inference", "training"][i % 2],
                  flops, flops / ai, flops / (tflops * 1e12), precision="tf32", device=device_key)
        row.update(attainable_flops_per_second=min(494.7e12, 3.35e12 * ai), roof_source="datasheet")
        rows.append(row)
    return rows








def test_the_h100_roofline_labels_do_not_collide_and_every_artist_is_inside_the_figure(tmp_path):
    summary, hierarchy, device = h100_rooflow_inputs()
    summary = pd.concat([summary, pd.DataFrame(crowded_rows(device.key, 30), columns=COLUMNS)], ignore_index=True)
    drawn = roofline_figure(summary, device, tmp_path / "h100.png", hierarchy=hierarchy, keep_open=True)
    fig = drawn.pop("figure")
    try:
        renderer = fig.canvas.get_renderer()
        ax = fig.axes[0]
        labels = drawn["label_artists"]
        # every run numbered (34), and the 4 real runs' L2 and L1 points tagged "N·L2", "N·L1"
        assert len(drawn["points"]) == 34 and len(labels) == 34 + 8
        assert not any(label["crowded"] for label in drawn["labels"])
        boxes = [text_box(t, renderer) for t in labels]
        for i, a in enumerate(boxes):
            for j in range(i):
                assert not overlap(a, boxes[j]), (labels[i].get_text(), labels[j].get_text())
        markers = marker_boxes(ax)
        assert len(markers) >= 34 + 8  # points, their L2/L1 points, estimates, roof ticks
        for label, box in zip(labels, boxes):
            assert not any(overlap(box, m) for m in markers), label.get_text()
            assert ax.get_window_extent(renderer).contains(box.x0, box.y0)
            assert ax.get_window_extent(renderer).contains(box.x1, box.y1)
        # every artist inside the figure: the axes with everything it draws (tick labels, title, axis
        # labels, the key beside it, the point labels) and the roof legend under it
        figure_box = fig.bbox
        boxes = [("axes and its artists", ax.get_tightbbox(renderer)), ("title", ax.title.get_window_extent(renderer)),
                 ("key", ax.get_legend().get_window_extent(renderer)),
                 *[("roof legend", legend.get_window_extent(renderer)) for legend in fig.legends]]
        for name, box in boxes:
            assert box.x0 >= 0 and box.y0 >= 0, name
            assert box.x1 <= figure_box.width and box.y1 <= figure_box.height, name
        assert len(fig.legends) == 1 and len(fig.legends[0].get_texts()) == len(drawn["roofs"])
        # the key names every numbered point
        key = [t.get_text() for t in ax.get_legend().get_texts()]
        for point in drawn["points"]:
            assert any(entry.startswith(f"{point['number']}  ") for entry in key), point
        # the failed L2 roof (2.97 TB/s under HBM's 3.03) is not drawn
        assert not any(r["memory_level"] == "l2" for r in drawn["roofs"])
    finally:
        plt.close(fig)


def test_a_cache_roof_at_or_below_dram_is_never_drawn():
    """Even on a Device built by hand (no invalid_cache_roofs in between): an L2 roof under DRAM is not drawn."""
    device = gpu()
    device.measured_l2_bytes_per_second = 0.8 * DRAM  # under the measured DRAM roof (0.9 × DRAM)
    levels = [(line["memory_level"], line["source"]) for line in roof_lines(device, 0.01, 1e4)]
    assert ("l2", "measured") not in levels and ("l2", "datasheet") in levels  # the datasheet's 6 TB/s stays
    device.l2_bytes_per_second = DRAM  # equal to the datasheet DRAM roof: not a cache roof either
    assert not any(line["memory_level"] == "l2" for line in roof_lines(device, 0.01, 1e4))
