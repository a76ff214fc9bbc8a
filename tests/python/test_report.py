"""`reclaimsim report` (and compare/sweep --html): one self-contained HTML page, opened in a
real headless browser (Debian's chromium and chromedriver, driven by Selenium): no console
errors, every plot drawn (its screenshot is not blank), the expected titles in the DOM."""

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from test_sweep import GRID  # the sweep tests' small grid: 16 short runs

SETS = ["--set", "duration=400ms", "--set", "sample_interval=100ms", "--set", "machine.cpus=4",
        "--set", "machine.memory_per_node=1G", "--set", "workload[0].processes=2",
        "--set", "workload[0].size=64M", "--set", "cgroup[1].memory.max=96M"]


def cli(*args, **kw):
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)
    assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def browser():
    chromium = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium and chromedriver are not installed (scripts/test installs them as root)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    o = Options()
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        o.add_argument(a)
    o.binary_location = chromium
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(options=o, service=Service(driver))
    yield d
    d.quit()


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    t = tmp_path_factory.mktemp("report")
    cli("run", "default", *SETS, "--json", str(t / "run.json"), "--no-progress")
    cli("compare", "default", *SETS, "--a", "rotation_cost=false", "--b", "rotation_cost=true", "--seeds", "2",
        "--json", str(t / "cmp.json"), "--html", str(t / "cmp.html"))
    (t / "g.toml").write_text(GRID)
    cli("sweep", str(t / "g.toml"), "--out", str(t / "sw"), "--workers", "2", "--html", str(t / "sw.html"))
    return t


def open_page(browser, path: Path) -> list:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(path.resolve().as_uri())
    # plotly draws asynchronously: wait until every figure's div has become a plot.
    WebDriverWait(browser, 60).until(
        lambda d: d.execute_script(
            "const n = document.querySelectorAll('div[id^=plot]').length;"
            "return n > 0 && document.querySelectorAll('div.js-plotly-plot .main-svg').length >= n;"
        )
    )
    plots = browser.find_elements("css selector", "div.js-plotly-plot")
    errors = [l for l in browser.get_log("browser") if l["level"] == "SEVERE"]
    assert errors == [], errors
    return plots


def assert_drawn(browser, plots) -> None:
    from PIL import Image

    for p in plots:
        browser.execute_script("arguments[0].scrollIntoView()", p)
        img = Image.open(io.BytesIO(p.screenshot_as_png)).convert("RGB")
        w, h = img.size
        # The plot area: inside the margins plotly leaves for titles and axes.
        area = img.crop((int(w * 0.1), int(h * 0.2), int(w * 0.8), int(h * 0.85)))
        px = area.tobytes()
        colored = sum(
            1 for i in range(0, len(px), 3)
            if max(px[i], px[i + 1], px[i + 2]) - min(px[i], px[i + 1], px[i + 2]) > 40
        )
        assert colored > 0.001 * (len(px) // 3), f"plot {p.get_attribute('id')} looks blank"
        traces = browser.execute_script(
            "return arguments[0].querySelectorAll('.scatterlayer .trace, .barlayer .trace, .hm, image').length", p
        )
        assert traces > 0, f"plot {p.get_attribute('id')} has no trace"


def titles(browser) -> list[str]:
    return [e.get_attribute("textContent") for e in browser.find_elements("css selector", "g.g-gtitle text")]


def test_report_of_a_run_a_compare_and_a_sweep_opens_with_every_plot_drawn(inputs, browser):
    out = inputs / "all.html"
    cli("report", str(inputs / "run.json"), str(inputs / "cmp.json"), str(inputs / "sw"), "-o", str(out))
    plots = open_page(browser, out)
    # Self-contained: plotly's JavaScript is in the page; nothing refers to another file.
    refs = browser.execute_script("return document.querySelectorAll('script[src], link[href], img[src]').length")
    assert refs == 0
    got = titles(browser)
    run = [t for t in got if t.startswith("default: ")]
    assert any("LRU list sizes per cgroup" in t for t in run)
    assert any("scan, steal and refault rates per cgroup [pages/s]" in t for t in run)
    assert any("lock contention per call site: total wait [ms]" in t for t in run)
    assert any("per-memcg pgsteal and workingset refaults [pages]" in t for t in run)
    assert any(t.startswith("default: A vs B") for t in got)
    assert any(": pswpout [pages] against machine.cpus" in t for t in got)
    assert any(": pswpout [pages] against kernel.swappiness" in t for t in got)
    assert any("variant set A: rotation_cost=false: mean over seeds by machine.cpus and kernel.swappiness" in t for t in got)
    assert len(plots) == len(got) >= 10
    assert_drawn(browser, plots)


def test_compare_and_sweep_write_their_pages_directly(inputs, browser):
    plots = open_page(browser, inputs / "cmp.html")
    assert len(plots) == 2 and any("lock contention per call site" in t for t in titles(browser))
    assert_drawn(browser, plots)
    plots = open_page(browser, inputs / "sw.html")
    assert plots and all("against" in t or "mean over seeds by" in t for t in titles(browser))
    assert_drawn(browser, plots)


def test_bad_report_inputs_are_one_line_errors(tmp_path):
    (tmp_path / "x.json").write_text(json.dumps({"hello": 1}))
    for arg, named in ((str(tmp_path / "x.json"), "neither a run's JSON"), (str(tmp_path / "nope"), "no such file"),
                       (str(tmp_path), "without results.parquet")):
        r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "report", arg, "-o", str(tmp_path / "o.html")],
                           capture_output=True, text=True)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and len(lines) == 1 and named in lines[0], r.stderr
        assert not (tmp_path / "o.html").exists()


def test_sweep_figures_split_lines_by_free_axes_only():
    pl = pytest.importorskip("polars")
    from reclaimsim.report import sweep_figures

    rows = []
    for cpus, procs in ((4, 4), (8, 8)):
        for swp in (30, 100):
            for vs in ("A", "B"):
                for seed in (1, 2):
                    rows.append({"run_id": f"{cpus}{swp}{vs}{seed}", "scenario": "s", "variant_set": vs, "seed": seed,
                                 "error": None, "machine.cpus": cpus, "workload[0].processes": procs,
                                 "kernel.swappiness": swp, "pswpout": cpus * swp + seed})
    df = pl.DataFrame(rows, schema_overrides={"error": pl.String})
    figs = sweep_figures(df, metrics=["pswpout"])
    by_title = {f.layout.title.text: f for f in figs}
    assert all("against pswpout" not in t for t in by_title)  # a value, not an axis
    # Against machine.cpus: processes is zipped with it, swappiness is free: 2 sets x 2.
    f = by_title["s: pswpout [pages] against machine.cpus, mean and std over seeds"]
    assert len(f.data) == 4
    assert sorted(t.name for t in f.data) == ["A, kernel.swappiness=100", "A, kernel.swappiness=30",
                                                "B, kernel.swappiness=100", "B, kernel.swappiness=30"]
    # Mean and std over the two seeds, by hand: cpus 4, swappiness 30 -> 121, 122.
    t = next(t for t in f.data if t.name == "A, kernel.swappiness=30")
    assert list(t.y) == [121.5, 241.5] and list(t.error_y.array) == pytest.approx([0.5**0.5] * 2)
    # Heat maps pair machine.cpus with the free swappiness, not with its zipped partner.
    heat = [k for k in by_title if "mean over seeds by" in k]
    assert heat and all("by machine.cpus and kernel.swappiness" in k for k in heat)


def test_malformed_report_inputs_name_the_file_and_what_is_wrong(tmp_path):
    pl = pytest.importorskip("polars")
    run = tmp_path / "run.json"
    cli("run", "file-fits", "--json", str(run), "--no-progress")
    good = json.loads(run.read_text())

    def edited(change):
        d = json.loads(json.dumps(good))
        change(d)
        return d

    cases = {
        "keys.json": ({"vmstat": {}, "timeseries": {}}, "scenario: missing"),
        "cmp.json": ({"a": 1, "b": 2, "metrics": 3, "locks": 4}, "a: a number, expected a table of switches"),
        "nolocks.json": (edited(lambda d: d.pop("locks")), "locks: missing"),
        "rows.json": (edited(lambda d: d["timeseries"].update(rows=[[1, 2]])),
                      "timeseries.rows[0]: 2 values, expected a list of 16 values"),
        "interval.json": (edited(lambda d: d["timeseries"].update(interval_ns=0)), "timeseries.interval_ns: 0, expected"),
    }
    inputs = []
    for name, (data, named) in cases.items():
        (tmp_path / name).write_text(json.dumps(data))
        inputs.append((str(tmp_path / name), named))
    for name, content in (("random", bytes(range(256)) * 4), ("empty", b"")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.parquet").write_bytes(content)
        inputs.append((str(tmp_path / name), "results.parquet: not a readable Parquet file"))
    (tmp_path / "onecol").mkdir()
    pl.DataFrame({"x": [1, 2]}).write_parquet(tmp_path / "onecol" / "results.parquet")
    inputs.append((str(tmp_path / "onecol"), "not a sweep's table: no column run_id, scenario, variant_set, seed, error (columns: x)"))
    for arg, named in inputs:
        r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "report", arg, "-o", str(tmp_path / "o.html")],
                           capture_output=True, text=True)
        lines = [l for l in r.stderr.splitlines() if l.strip()]
        assert r.returncode == 2 and "Traceback" not in r.stderr, (arg, r.stderr[-800:])
        assert len(lines) == 1 and arg in lines[0] and named in lines[0], (arg, r.stderr)
        assert not (tmp_path / "o.html").exists()
