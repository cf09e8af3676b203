"""The report's home page: the answer first — per device, its runs (furthest from the roof first) beside its
roofline — from the real H100 summary (tests/data/real/h100-rooflow/summary-tf32.csv)."""

from __future__ import annotations

import base64
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from rooflow.report.findings import checks_frame, for_run
from rooflow.report.home import ANSWER_COLUMNS, answer_table, home_page

SUMMARY = Path(__file__).resolve().parents[1] / "data" / "real" / "h100-rooflow" / "summary-tf32.csv"
DEVICE = "h100-sxm5-80gb"


class Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows, self.tags = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "tr":
            self.rows.append([])

    def handle_data(self, data):
        if self.tags and self.tags[-1] in ("td", "th") and self.rows:
            self.rows[-1].append(data)

    def handle_endtag(self, tag):
        if self.tags and self.tags[-1] == tag:
            self.tags.pop()


def test_the_answer_table_lists_the_runs_furthest_from_the_roof_first():
    summary = pd.read_csv(SUMMARY)
    noisy = for_run(summary.iloc[1], "warning", "noisy", "spread 9%", "≤ 5%", "load")
    table = answer_table(summary, DEVICE, checks_frame([noisy]))
    # % of roof as recorded: vgg16 training 48.9, resnet50 training 50.9, resnet50 inference 54.9, vgg16 inf 55.7
    assert list(table["run"]) == ["vgg16 b64 tf32 training", "resnet50 b64 tf32 training",
                                  "resnet50 b64 tf32 inference", "vgg16 b64 tf32 inference"]
    first = table.iloc[0]
    assert (first["GFLOP/s"], first["% of roof"], first["bound"]) == ("111,802", "49", "memory-bound")
    assert (first["measured ms"], first["predicted ms"]) == ("52.7", "21.9")
    assert table.set_index("run").loc["resnet50 b64 tf32 training", "checks"] == "1 (warning)"
    assert answer_table(summary, "cpu").empty


def test_the_home_page_puts_each_devices_table_beside_its_roofline(tmp_path):
    summary = pd.read_csv(SUMMARY)
    svg = tmp_path / f"{DEVICE}.svg"
    svg.write_text('<?xml version="1.0"?>\n<svg xmlns="http://www.w3.org/2000/svg" width="460pt" height="345pt">'
                   "<text>Arithmetic intensity [FLOP/byte]</text></svg>")
    page = home_page(summary, {DEVICE: svg}, shown=3)
    parser = Cells()
    parser.feed(page)
    header, *rows = [r for r in parser.rows if r]
    assert header == ANSWER_COLUMNS
    assert len(rows) == 4 + 1  # 3 shown, the header of the folded table, and the one folded run
    assert page.index(DEVICE) < page.index("<details><summary>1 more runs") < page.index("<img")
    # the figure as an image of its own (its ids apart from the other figures'), scaled to its column
    uri = page.split('src="data:image/svg+xml;base64,', 1)[1].split('"', 1)[0]
    assert base64.b64decode(uri) == svg.read_bytes() and 'style="width:100%;height:auto"' in page
    assert "No run was measured" in home_page(summary, {"cpu": svg})


def test_a_run_whose_counters_missed_its_tensor_core_work_claims_no_share_of_its_roof():
    """The default config's imported A100 VGG11 profile (tests/data/real/anoushka21-cloudml, ncu 2020.2 without a
    tensor-core metric): its counters saw 0.016x the estimated FLOPs, and the answer said 562 GFLOP/s, "30" % of
    roof, "memory-bound" — read from an intensity of 1.2 FLOP/B that holds 2% of the work. Now the counted FLOP/s
    are shown as the floor they are, no share of the roof, and the bound as not known; it sorts after the runs
    whose points place them."""
    from support import ANOUSHKA, cached_estimate, real

    from rooflow.estimate.calibration import for_device
    from rooflow.hardware.devices import default_catalogue_path, load_devices
    from rooflow.profilers.ncu import aggregate_ncu
    from rooflow.profilers.nsys import aggregate_nsys
    from rooflow.report.summary import UNSEEN_BOUND, build_row

    device = load_devices(default_catalogue_path())["a100-sxm4-40gb"]
    result = cached_estimate("vgg11", 16, "fp32", "training")
    folder = f"{ANOUSHKA}/a100/vgg11"
    ncu = aggregate_ncu([real(f"{folder}/ncu-log-vgg11.txt")])
    row = build_row(device, dict(result.totals), None,
                    ncu={**ncu.totals, "kernel_names": sorted(set(ncu.kernels["name"]))},
                    nsys=aggregate_nsys([real(f"{folder}/tmp_nsys_gputrace.csv")]).totals, ops=result.ops,
                    calibration=for_device(device))
    assert row["percent_of_roofline"] is None and row["attainable_flops_per_second"] is None  # summary.csv too
    # as it was shown: 30% of the roof at that intensity (1.2 FLOP/B x 1.555 TB/s)
    attainable = row["arithmetic_intensity"] * device.dram_bytes_per_second
    placed = {**row, "model": "vgg13", "tensor_flops_unseen": False, "bound": "memory-bound",
              "attainable_flops_per_second": attainable,
              "percent_of_roofline": 100 * row["achieved_flops_per_second"] / attainable}
    table = answer_table(pd.DataFrame([row, placed]), device.key).set_index("run")
    assert list(table.index) == ["vgg13 b16 fp32 training", "vgg11 b16 fp32 training"]
    unseen = table.loc["vgg11 b16 fp32 training"]
    assert (unseen["GFLOP/s"], unseen["% of roof"], unseen["bound"]) == ("≥ 562", "–", UNSEEN_BOUND)
    assert (table.loc["vgg13 b16 fp32 training", "GFLOP/s"], table.loc["vgg13 b16 fp32 training", "% of roof"]) \
        == ("562", "30")


def test_the_interactive_rooflines_hover_gives_no_share_of_the_roof_where_the_flops_were_not_counted():
    """Its hover said "30% of the roof, unknown: tensor-core FLOPs not counted" for the imported A100 VGG11: the
    share read from the counted FLOPs, beside the bound that says they are not the step's."""
    from rooflow.hardware.devices import default_catalogue_path, load_devices
    from rooflow.report.interactive import roofline_traces
    from rooflow.report.summary import COLUMNS, UNSEEN_BOUND

    device = load_devices(default_catalogue_path())["a100-sxm4-40gb"]
    base = {c: None for c in COLUMNS}
    base.update(device=device.key, batch=16, precision="fp32", mode="training", variant="eager", status="ok",
                arithmetic_intensity=1.2, achieved_flops_per_second=5.6e11, percent_of_roofline=30.1)
    summary = pd.DataFrame([{**base, "model": "vgg11", "bound": UNSEEN_BOUND},
                            {**base, "model": "vgg13", "bound": "memory-bound"}], columns=COLUMNS)
    hovers = {row[0]: row for trace in roofline_traces(summary, [device]) if trace.get("meta", {}).get("kind") == "runs"
              for row in trace["customdata"]}
    unseen, placed = hovers[f"{device.key} vgg11 b16 fp32 training"], hovers[f"{device.key} vgg13 b16 fp32 training"]
    assert (unseen[1], unseen[2]) == ("n/a", UNSEEN_BOUND) and (placed[1], placed[2]) == ("30%", "memory-bound")
