"""The generated report.html, opened in headless Chromium as a user would: the page loads without script
errors, the self-checks are at the top, every expected figure and table is in it, and the roofline renders
(a screenshot of it is kept for a person to look at).

Snakemake's report is a React single page that embeds every result as a data URI in a global `results`
object and has no URL routing; the test injects a small script that records script errors and, once the
app has rendered, opens the roofline through the app's own `setView` (what clicking its entry does).
Chromium is Debian's `chromium` package, installed here when missing (root + apt-get, as on a fresh CI
machine); without it the tests are skipped with the reason printed.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from conftest import report_line

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CONFIG = "tests/configs/tiny.yaml"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
# Where the screenshots are kept for a person to look at (the temp dir of the run is removed by pytest).
SCREENSHOTS = Path(os.environ.get("ROOFLOW_SCREENSHOTS", Path(__file__).resolve().parents[2] / ".pytest_cache"
                                  / "report-screenshots"))


def find_chromium() -> str | None:
    for name in CHROMIUM_NAMES:
        path = shutil.which(name)
        if path:
            return path
    return None


def install_chromium() -> str:
    """Install Debian's chromium package; '' on success, else why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "chromium is not installed and installing it needs root (apt-get install chromium)"
    if not shutil.which("apt-get"):
        return "chromium is not installed and this machine has no apt-get"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update"], ["apt-get", "install", "-y", "--no-install-recommends", "chromium"]):
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env)
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` timed out (no network?)"
        if result.returncode != 0:
            return f"`{' '.join(command)}` failed: {(result.stderr or result.stdout).strip()[-400:]}"
    return ""


@pytest.fixture(scope="session")
def chromium() -> str:
    exe = find_chromium()
    if exe is None:
        reason = install_chromium()
        exe = find_chromium()
        if exe is None:
            reason = reason or "apt-get install chromium succeeded but no chromium binary is on PATH"
            report_line(f"SKIPPED browser tests: {reason}")
            pytest.skip(reason)
    return exe


@pytest.fixture(scope="module")
def report(tiny_report) -> Path:
    """The tiny workflow's run (conftest.tiny_run, shared with the workflow tests) and its report.html
    (conftest.tiny_report, the one the workflow test reads)."""
    return tiny_report


PROBE = """
<script>
window.__rooflowErrors = [];
window.addEventListener("error", e => window.__rooflowErrors.push(String(e.message || e)));
window.addEventListener("unhandledrejection", e => window.__rooflowErrors.push("rejection: " + e.reason));
const __origError = console.error;
console.error = function(...args) { window.__rooflowErrors.push("console.error: " + args.join(" ")); __origError(...args); };
</script>
"""

SHOW = """
<script>
window.addEventListener("load", () => setTimeout(() => {
  try {
    const target = Object.keys(results).find(p => p.endsWith("%(result)s"));
    if (target) {
      // one setView (React batches state): the Roofline category in the navbar, the figure in the content
      const subcategory = Object.keys(categories["Roofline"] || {})[0];
      app.setView({navbarMode: "subcategory", category: "Roofline", subcategory: subcategory,
                   content: "img", contentPath: results[target].data_uri, resultPath: target});
    }
  } catch (error) { window.__rooflowErrors.push("probe: " + error); }
  setTimeout(() => {
    const out = document.createElement("pre");
    out.id = "rooflow-probe";
    out.textContent = JSON.stringify({errors: window.__rooflowErrors, results: Object.keys(results),
                                      categories: Object.keys(categories)});
    document.body.appendChild(out);
  }, 500);
}, 500));
</script>
"""


def instrumented(report: Path, result: str | None, name: str) -> Path:
    """A copy of the report with the error probe in <head> and, before </body>, the view switch."""
    page = report.read_text(encoding="utf-8")
    page = page.replace("<head>", "<head>" + PROBE, 1)
    show = SHOW % {"result": result or "\u0000"}
    # the LAST </body>: the report's inlined libraries hold "</body>" inside JavaScript strings
    head, tag, tail = page.rpartition("</body>")
    page = head + show + tag + tail if tag else page + show
    path = report.with_name(name)
    path.write_text(page, encoding="utf-8")
    return path


def run_chromium(chromium: str, page: Path, tmp_path: Path, *args: str, attempts: int = 3
                 ) -> subprocess.CompletedProcess:
    """Headless Chromium on `page`. Headless Chromium intermittently hangs under --virtual-time-budget
    (about 1 run in 3 here, before any output): each attempt gets a minute and a fresh profile."""
    for attempt in range(attempts):
        profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
        command = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                   "--disable-background-networking", "--disable-component-update", "--disable-sync",
                   "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,2000",
                   "--virtual-time-budget=15000", "--enable-logging=stderr", "--v=0", *args, page.as_uri()]
        try:
            return subprocess.run(command, capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            if attempt == attempts - 1:
                raise
    raise AssertionError("unreachable")


def probe(dom: str) -> dict:
    match = re.search(r'<pre id="rooflow-probe">(.*?)</pre>', dom, re.S)
    assert match, "the probe script never ran: the page did not finish loading"
    text = match.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    return json.loads(text)


def expected_results(workdir: Path) -> set[str]:
    config = yaml.safe_load((workdir / CONFIG).read_text())
    imports = config.get("imports") or []
    devices = set(config["devices"]) | {entry["device"] for entry in imports}
    out = {"results/summary.csv", "results/checks/checks.html", "results/plots/flops.svg", "results/plots/roofline.html",
           "results/plots/params.svg", "results/plots/correlation.svg", "results/plots/forward_backward.svg",
           "results/tables/summary.html", "results/tables/environment.html"}
    for device in devices:
        out |= {f"results/plots/{kind}/{device}.svg" for kind in
                ("roofline", "latency", "throughput", "predicted", "time_by_layer")}
    for device in config["devices"]:  # what to try next, from the runs measured there
        out |= {f"results/tables/what_to_try/{device}.csv", f"results/tables/cross_gpu/{device}.csv"}
    for model in config["models"]:
        for batch in config["batch_sizes"]:
            for precision in config["precisions"]:
                for mode in config["modes"]:
                    out.add(f"results/tables/layers/{model}/b{batch}-{precision}-{mode}.html")
    for entry in imports:
        out.add(f"results/tables/layers/{entry['model']}/b{entry['batch']}-{entry['precision']}-{entry['mode']}.html")
    return out


def test_report_loads_without_errors_with_checks_on_top_and_every_figure(report, chromium, tmp_path):
    page = instrumented(report, None, "report-probe.html")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "report-front.png"
    result = run_chromium(chromium, page, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    found = probe(result.stdout)
    assert found["errors"] == [], found["errors"]
    assert "Uncaught" not in result.stderr, result.stderr[-3000:]
    missing = expected_results(report.parent) - set(found["results"])
    assert not missing, f"not in the report: {sorted(missing)}"
    assert {"Roofline", "Cost", "Latency", "Training vs inference", "Profiles", "Checks"} <= set(found["categories"])
    # React rendered the front page: the workflow description with the self-checks first
    text = re.sub(r"<[^>]+>", " ", result.stdout)
    assert "Self-checks:" in text and "rooflow: where the time goes" in text
    assert text.index("Self-checks:") < text.index("Method")
    # the answer first: each device's runs (here the CPU's, then the imported A100's) above the checks
    assert text.index("furthest from the roof first") < text.index("Self-checks:")
    assert text.index("resnet18 b1 fp32 inference") < text.index("Self-checks:")
    run = run_chromium(chromium, page, tmp_path, f"--screenshot={shot}")
    assert run.returncode == 0 and shot.stat().st_size > 10_000, run.stderr[-2000:]


def test_roofline_renders_in_the_report(report, chromium, tmp_path):
    page = instrumented(report, "results/plots/roofline/cpu.svg", "report-roofline.html")
    result = run_chromium(chromium, page, tmp_path, "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    found = probe(result.stdout)
    assert found["errors"] == [], found["errors"]
    # the app now shows the roofline as an image (an SVG data URI) in its content pane
    images = [base64.b64decode(uri.split("base64,", 1)[1]).decode("utf-8", "replace")
              for uri in re.findall(r'<img src="(data:image/svg\+xml[^"]+)"', result.stdout)]
    shown = [svg for svg in images if "Arithmetic intensity [FLOP/byte]" in svg]
    assert shown, f"the roofline image is not displayed ({len(images)} SVG images on the page)"
    svg = shown[0]
    assert "Performance [FLOP/s]" in svg and "ridge" in svg and "resnet18" in svg
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / "report-roofline.png"
    run = run_chromium(chromium, page, tmp_path, f"--screenshot={shot}")
    assert run.returncode == 0 and shot.stat().st_size > 20_000, run.stderr[-2000:]
    report_line(f"screenshots of the report in {SCREENSHOTS}")


# Picks one run with the page's own selectors, moves the mouse onto its point as a user would (a mousemove
# on Plotly's drag layer at the point's pixel position) and records the hover label Plotly shows.
HOVER = """
<script>
window.__rooflowErrors = [];
window.addEventListener("error", e => window.__rooflowErrors.push(String(e.message || e)));
window.addEventListener("load", () => setTimeout(() => {
  const out = {errors: window.__rooflowErrors};
  try {
    const gd = document.getElementById("roofline");
    const run = gd.data.find(t => t.meta.kind === "runs" && t.visible !== false).customdata[0];
    for (const [name, i] of [["model", 4], ["batch", 5], ["precision", 6], ["mode", 7]]) rooflowSelect(name, run[i]);
    const trace = gd.data.find(t => t.meta.kind === "runs" && t.visible !== false);
    out.shown = gd.data.filter(t => t.meta.kind === "runs" && t.visible !== false).map(t => t.x.length);
    out.run = trace.customdata[0][0];
    const full = gd._fullLayout, box = gd.querySelector(".nsewdrag").getBoundingClientRect();
    const x = box.left + full.xaxis.l2p(Math.log10(trace.x[0])), y = box.top + full.yaxis.l2p(Math.log10(trace.y[0]));
    gd.querySelector(".nsewdrag").dispatchEvent(new MouseEvent("mousemove", {clientX: x, clientY: y, bubbles: true}));
  } catch (error) { out.errors.push("probe: " + error); }
  setTimeout(() => {
    out.hover = Array.from(document.querySelectorAll(".hoverlayer .hovertext")).map(n => n.textContent);
    const pre = document.createElement("pre");
    pre.id = "rooflow-probe";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }, 400);
}, 400));
</script>
"""


def test_the_interactive_roofline_opens_offline_and_names_a_run_on_hover(report, chromium, tmp_path):
    page = report.parent / "results" / "plots" / "roofline.html"
    head, tag, tail = page.read_text(encoding="utf-8").rpartition("</body>")
    probed = tmp_path / "roofline-hover.html"
    probed.write_text(head + HOVER + tag + tail, encoding="utf-8")
    # no name resolves: a page that fetched plotly.js (or anything) from the network would fail here
    result = run_chromium(chromium, probed, tmp_path, "--host-resolver-rules=MAP * ~NOTFOUND", "--dump-dom")
    assert result.returncode == 0, result.stderr[-3000:]
    found = probe(result.stdout)
    assert found["errors"] == [], found["errors"]
    assert found["shown"] == [1], found  # the selectors leave exactly the one run picked
    assert len(found["run"].split()) == 5  # device model batch precision mode
    assert len(found["hover"]) == 1 and found["run"] in found["hover"][0], found
    assert "FLOP/s" in found["hover"][0] and "FLOP/byte" in found["hover"][0] and "of the roof" in found["hover"][0]
    assert "checks:" in found["hover"][0]
