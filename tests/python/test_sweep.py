"""Sweeps (reclaimsim.sweep, `reclaimsim sweep`): the run list a grid makes, the same table
from a local pool and a Dask cluster, resumption after kill -9 without redoing finished
runs, failed runs kept until asked, and bad grids refused before any run."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

import reclaimsim
import reclaimsim.batch
from reclaimsim.sweep import Store, _points, execute, load_grid, plan

# Four short points x two variant sets x two seeds = 16 runs of a small machine.
GRID = """
scenario = "default"
seeds = 2
overrides = ["duration=500ms", "sample_interval=100ms", "machine.memory_per_node=1G", "workload[0].processes=2", "workload[0].size=64M", "cgroup[1].memory.max=96M"]
[axes]
"machine.cpus" = [4, 8]
"kernel.swappiness" = [30, 100]
[variant_sets]
A = { rotation_cost = false }
B = { rotation_cost = true }
"""


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)


def grid_file(tmp_path, text=GRID, name="g.toml"):
    f = tmp_path / name
    f.write_text(text)
    return str(f)


def table(out) -> pl.DataFrame:
    # wall_s is the host's time: everything else must agree between executors and runs.
    return pl.read_parquet(Path(out) / "results.parquet").drop("wall_s")


def test_points_are_the_cross_product_less_excluded_with_zipped_axes_together():
    g = load_grid(
        {
            "scenario": "default",
            "axes": {"a": [1, 2, 3], "b": ["x", "y", "z"], "c": [True, False]},
            "zip": [["a", "b"]],
            "exclude": [{"a": 2, "c": False}],
        }
    )
    pts = _points(g)
    # 3 zipped (a, b) pairs x 2 values of c, less one: 5.
    assert len(pts) == 5
    assert {(p["a"], p["b"]) for p in pts} == {(1, "x"), (2, "y"), (3, "z")}
    assert {"a": 2, "b": "y", "c": False} not in pts


def test_plan_is_points_times_variant_sets_times_seeds_with_distinct_identities(tmp_path):
    runs = plan(load_grid(grid_file(tmp_path)))
    assert len(runs) == 4 * 2 * 2
    assert len({r.run_id for r in runs}) == 16
    # The identity is the normalized scenario: the same run planned twice is the same id.
    again = plan(load_grid(grid_file(tmp_path)))
    assert [r.run_id for r in runs] == [r.run_id for r in again]
    # The variant set and the seed are part of the scenario the id hashes.
    r = runs[0]
    d = json.loads(r.scenario)
    assert d["seed"] == r.seed and d["variants"]["rotation_cost"] is (r.variant_set == "B")
    assert d["machine"]["cpus"] == r.point["machine.cpus"]


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        yield client


def test_a_local_pool_and_a_dask_cluster_give_the_same_table(tmp_path, dask_client):
    g = grid_file(tmp_path)
    local = reclaimsim.sweep(g, out=tmp_path / "local", workers=2)
    dask = reclaimsim.sweep(g, out=tmp_path / "dask", scheduler=dask_client)
    assert isinstance(local, pl.DataFrame) and local.height == 16
    assert table(tmp_path / "local").equals(table(tmp_path / "dask"))
    assert local["error"].null_count() == 16
    # The per-cgroup and time-series datasets are keyed by run.
    for name in ("cgroups", "timeseries"):
        a = pl.read_parquet(tmp_path / "local" / f"{name}.parquet")
        b = pl.read_parquet(tmp_path / "dask" / f"{name}.parquet")
        assert a.equals(b) and set(a["run_id"]) == set(local["run_id"])
    # And the dataset is plain Parquet: DuckDB and pandas read it without reclaimsim.
    duckdb = pytest.importorskip("duckdb")
    f = tmp_path / "local" / "results.parquet"
    rows = duckdb.sql(f"select variant_set, count(*) from '{f}' group by all order by all").fetchall()
    assert rows == [("A", 8), ("B", 8)]
    pd = pytest.importorskip("pandas")
    assert pd.read_parquet(f)["pswpout"].tolist() == local["pswpout"].to_list()


def test_a_sweep_killed_with_sigkill_resumes_without_redoing_finished_runs(tmp_path):
    g = grid_file(tmp_path)
    out = tmp_path / "killed"
    p = subprocess.Popen(
        [sys.executable, "-m", "reclaimsim.cli", "sweep", g, "--out", str(out), "--workers", "1"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    runs = out / "runs"
    deadline = time.time() + 120
    while time.time() < deadline:
        if runs.exists() and len(list(runs.glob("*.parquet"))) >= 3:
            break
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    done = {f.name: f.stat().st_mtime_ns for f in runs.glob("*.parquet")}
    assert 3 <= len(done) < 16, f"killed after {len(done)} runs"
    r = cli("sweep", g, "--out", str(out), "--workers", "2")
    assert r.returncode == 0, r.stderr
    assert f"({len(done)} stored before, {16 - len(done)} run now, 0 failed)" in r.stdout, r.stdout
    # The finished runs' files were not written again.
    for name, mtime in done.items():
        assert (runs / name).stat().st_mtime_ns == mtime
    whole = reclaimsim.sweep(g, out=tmp_path / "whole", workers=2)
    assert table(out).equals(table(tmp_path / "whole")) and whole.height == 16


def test_a_failed_run_is_kept_and_retried_only_on_request(tmp_path):
    runs = plan(load_grid(grid_file(tmp_path)))[:2]
    out = tmp_path / "s"
    Store(out).put(runs[0], "SimulationError", "boom", 0.1, reclaimsim.__version__)
    p = execute(runs, out, workers=1)
    assert (p.reused, p.failed) == (1, 1)
    df = pl.read_parquet(out / "results.parquet")
    assert df.filter(pl.col("run_id") == runs[0].run_id)["error"].to_list() == ["SimulationError: boom"]
    p = execute(runs, out, workers=1, retry_failed=True)
    assert (p.reused, p.failed) == (1, 0)
    assert pl.read_parquet(out / "results.parquet")["error"].null_count() == 2


def test_runs_of_another_version_are_reused_only_when_asked(tmp_path):
    runs = plan(load_grid(grid_file(tmp_path)))[:1]
    out = tmp_path / "v"
    execute(runs, out, workers=1)
    f = out / "runs" / f"{runs[0].run_id}.parquet"
    pl.read_parquet(f).with_columns(pl.lit("0.0.0-old").alias("reclaimsim_version")).write_parquet(f)
    assert execute(runs, out, workers=1, reuse_other_versions=True).reused == 1
    assert execute(runs, out, workers=1).reused == 0


@pytest.mark.parametrize(
    "axes, named",
    [
        ('"machine.nope" = [1]', "'machine.nope' value 1"),
        ('"machine.cpus" = []', "'machine.cpus': []"),
        ('"machine.cpus" = [32, 0]', "'machine.cpus' value 0"),
        ('"workload[7].size" = ["1G"]', "'workload[7].size' value '1G'"),
    ],
)
def test_bad_grids_exit_2_naming_the_axis_and_value_before_any_run(tmp_path, axes, named):
    g = grid_file(tmp_path, f'scenario = "default"\n[axes]\n{axes}\n')
    r = cli("sweep", g, "--out", str(tmp_path / "o"))
    assert r.returncode == 2, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: grid axis") and named in lines[0], r.stderr
    assert not (tmp_path / "o").exists()


def test_unknown_grid_fields_and_names_are_refused(tmp_path):
    r = cli("sweep", grid_file(tmp_path, 'scenario = "default"\nsedes = 3\n'))
    assert r.returncode == 2 and "grid field 'sedes': unknown" in r.stderr, r.stderr
    r = cli("sweep", "no-such-grid")
    assert r.returncode == 2 and "built-ins: seed-000-cpus, seed-001-rate, seed-002-mix" in r.stderr, r.stderr


def test_the_built_in_grids_plan(tmp_path):
    for name in ("seed-000-cpus", "seed-001-rate", "seed-002-mix"):
        runs = plan(load_grid(name))
        assert len(runs) >= 12, name
    r = cli("sweep", "seed-001-rate", "--dry-run")
    assert r.returncode == 0 and r.stdout.startswith("18 runs;"), r.stdout + r.stderr


def test_an_unusable_scheduler_address_is_one_line_and_nothing_is_written(tmp_path):
    pytest.importorskip("distributed")
    r = cli("sweep", grid_file(tmp_path), "--out", str(tmp_path / "o"), "--scheduler", "nonsense")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--scheduler 'nonsense'" in lines[0], r.stderr
    assert not (tmp_path / "o").exists()


def test_two_variant_sets_with_the_same_switches_are_two_runs_of_one_scenario(tmp_path):
    g = GRID.split("[variant_sets]")[0] + "[variant_sets]\nX = { rotation_cost = true }\nY = { rotation_cost = true }\n"
    runs = plan(load_grid(grid_file(tmp_path, g)))
    x = [r for r in runs if r.variant_set == "X"]
    y = [r for r in runs if r.variant_set == "Y"]
    assert [r.scenario for r in x] == [r.scenario for r in y]
    assert not {r.run_id for r in x} & {r.run_id for r in y}


def test_bench_sweep_goes_alone():
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "bench", "--sweep", "--scenario", "default"],
                       capture_output=True, text=True)
    assert r.returncode == 2 and "--sweep goes alone" in r.stderr, r.stderr


def test_an_output_directory_that_cannot_be_written_is_one_line_before_any_run(tmp_path):
    r = cli("sweep", grid_file(tmp_path), "--out", "/proc/no-such-store", "--workers", "1")
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert r.returncode == 2 and len(lines) == 1 and "--out /proc/no-such-store: cannot write" in lines[0], r.stderr


@pytest.mark.parametrize(
    "text, named",
    [
        # A TOML date: no scenario field takes one, and JSON cannot carry it.
        ('scenario = "file-fits"\n[axes]\n"seed" = [1979-05-27]\n', "grid axis 'seed' value 1979-05-27: a TOML date or time"),
        ('scenario = "file-fits"\n[axes]\n"seed" = [1, [1979-05-27]]\n', "grid axis 'seed' value [\"1979-05-27\"] (its [0] = 1979-05-27): a TOML date"),
        ('scenario = "file-fits"\n[variant_sets]\nA = { rotation_cost = 1979-05-27 }\n',
         "grid field 'variant_sets'['A']['rotation_cost'] = 1979-05-27: a TOML date"),
        # Nesting: too deep for tomllib, and too deep for a scenario.
        ('scenario = "file-fits"\n[axes]\nx = ' + "[" * 5000 + "]" * 5000 + "\n", "g.toml: not a TOML file: nested too deeply"),
        ('scenario = "file-fits"\n[axes]\nx = ' + "[" * 300 + "]" * 300 + "\n", "[[[[...: nested too deeply (more than 64 levels"),
        # An axis key is parsed as a --set key: only ASCII digits index.
        ('scenario = "file-fits"\n[axes]\n"cgroup[²].path" = ["/x"]\n', "grid axis 'cgroup[²].path': index '²' is not a number (digits 0-9)"),
        # Every point excluded: nothing to run (the dry run's probe had no first run).
        ('scenario = "file-fits"\n[axes]\n"seed" = [1]\n[[exclude]]\nseed = 1\n', "grid field 'exclude': [{\"seed\": 1}]: excludes every point"),
    ],
)
def test_grids_no_scenario_can_take_are_one_line_naming_the_axis(tmp_path, text, named):
    r = cli("sweep", "--dry-run", grid_file(tmp_path, text))
    assert r.returncode == 2, r.stderr[-800:]
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert "Traceback" not in r.stderr and len(lines) == 1 and named in lines[0], r.stderr[-800:]


def _as_version_1(df: pl.DataFrame, axes) -> pl.DataFrame:
    """A table as a version-1 store wrote it: no store_version, the values named
    vmstat.NAME, workload.W.FIELD, workload.W.trace.FIELD, lock.LOCK.CALLER.FIELD."""
    import re

    keep = {"run_id", "scenario", "variant_set", "seed", "scenario_hash", "reclaimsim_version", "store_version",
            "wall_s", "error", "end_ns", "lock_wait_total_ns", *axes}
    names = {}
    for c in df.columns:
        key, _, where = c.partition("@")
        lock = re.fullmatch(r"(\w+_lock)_(wait_ns|acquisitions)", key)
        if c in keep:
            continue
        if not where:
            names[c] = f"vmstat.{c}"
        elif lock:
            names[c] = f"lock.{lock[1]}.{where}.{lock[2]}"
        elif key.startswith("trace."):
            names[c] = f"workload.{where}.trace.{key[len('trace.'):]}"
        else:
            names[c] = f"workload.{where}.{key}"
    return df.drop("store_version").rename(names)


def test_a_store_of_version_1_is_read_and_resumed_under_todays_names(tmp_path):
    from reclaimsim.report import load_input
    from reclaimsim.sweep import results

    g = load_grid(grid_file(tmp_path))
    runs = plan(g)[:3]
    out = tmp_path / "old"
    execute(runs, out, workers=1)
    now = pl.read_parquet(out / "results.parquet")
    assert set(now["store_version"]) == {2}
    assert {"pswpout", "throughput@usemem", "lock_wait_total_ns"} <= set(now.columns)
    assert any(c.startswith("lru_lock_wait_ns@") for c in now.columns)
    # What version 1 left: its per-run files and its gathered table.
    for f in [*(out / "runs").glob("*.parquet"), out / "results.parquet"]:
        _as_version_1(pl.read_parquet(f), g.axes).write_parquet(f)
    assert "vmstat.pswpout" in pl.read_parquet(out / "results.parquet").columns
    assert results(out).equals(now)
    kind, df = load_input(str(out))
    assert kind == "sweep" and df.equals(now)
    # Resumed: the stored runs are reused and gathered under today's names, beside a new one.
    p = execute(plan(g)[:4], out, workers=1)
    assert p.reused == 3
    again = pl.read_parquet(out / "results.parquet")
    assert set(again["store_version"]) == {2} and again.height == 4
    assert again.head(3).select(now.columns).equals(now)


# --- no silently wrong result -------------------------------------------------------

SMALL = {
    "scenario": "default", "seeds": 1,
    "overrides": ["duration=200ms", "sample_interval=100ms", "machine.memory_per_node=1G",
                  "workload[0].processes=2", "workload[0].size=64M", "cgroup[1].memory.max=96M"],
    "variant_sets": {"A": {}},
}


def test_axis_paths_are_one_spelling_and_two_spellings_of_one_field_are_refused():
    g = load_grid({**SMALL, "axes": {" machine . cpus ": [4, 8], "cgroup[01].memory.max": ["96M"]},
                   "zip": [], "exclude": [{"machine.cpus": 8}]})
    assert list(g.axes) == ["machine.cpus", "cgroup[1].memory.max"]
    assert g.exclude == [{"machine.cpus": 8}]
    with pytest.raises(reclaimsim.ScenarioError, match=r"the same field as axis 'machine.cpus'"):
        load_grid({**SMALL, "axes": {"machine.cpus": [4], " machine.cpus": [8]}})


@pytest.mark.parametrize("values", [["16M", 16777216], ["16384K", "16M"], [4096, "4K"]])
def test_one_value_written_two_ways_is_refused(values):
    g = load_grid({**SMALL, "axes": {"cgroup[1].memory.max": ["96M", *values]}})
    with pytest.raises(reclaimsim.ScenarioError, match=r"give the same scenario \(one value written two ways\)"):
        plan(g)


def test_a_grid_too_large_to_plan_is_refused_before_planning():
    # Its size is computed from the axes' lengths, before any point is listed or validated
    # (listing 2x10^11 points took minutes and gigabytes).
    g = load_grid({**SMALL, "axes": {"seed": list(range(100_000)), "kernel.swappiness": list(range(100)),
                                     "machine.cpus": list(range(1, 21))}})
    with pytest.raises(reclaimsim.ScenarioError, match=r"grid of 200,000,000 runs .*allowed at most 100,000"):
        plan(g)


def test_a_store_of_another_grid_is_refused_unless_asked_and_reused_rows_are_relabelled(tmp_path):
    out = tmp_path / "s"
    g1 = load_grid({**SMALL, "axes": {"kernel.swappiness": [30, 100]}})
    execute(plan(g1), out, workers=1, grid=g1.describe())
    # The same runs under another axis: swappiness 30 is also "low" in the new grid's words.
    g2 = load_grid({**SMALL, "overrides": SMALL["overrides"] + ["kernel.swappiness=30"],
                    "axes": {"kernel.watermark_scale_factor": [10, 20]}})
    with pytest.raises(reclaimsim.ScenarioError, match=r"the store holds another grid's runs .*--reuse-other-grid"):
        execute(plan(g2), out, workers=1, grid=g2.describe())
    p = execute(plan(g2), out, workers=1, grid=g2.describe(), reuse_other_grid=True)
    assert p.reused == 1  # swappiness 30 at watermark_scale_factor 10 is the same scenario
    df = pl.read_parquet(out / "results.parquet")
    assert "kernel.swappiness" not in df.columns
    assert df["kernel.watermark_scale_factor"].to_list() == [10, 20]
    r = cli("sweep", grid_file(tmp_path, "\n".join([
        'scenario = "default"', "seeds = 1", f"overrides = {json.dumps(SMALL['overrides'])}",
        '[axes]', '"kernel.swappiness" = [60]', '[variant_sets]', 'A = {}'])), "--out", str(out))
    assert r.returncode == 2 and "another grid's runs" in r.stderr and "Traceback" not in r.stderr


def test_sweep_out_empty_is_refused():
    r = cli("sweep", "seed-002-mix", "--out", "")
    assert r.returncode == 2 and "--out" in r.stderr and "empty" in r.stderr


def test_a_damaged_run_file_is_redone_and_a_fifo_refused(tmp_path):
    g = load_grid({**SMALL, "axes": {"kernel.swappiness": [30, 100]}})
    runs = plan(g)
    out = tmp_path / "d"
    execute(runs, out, workers=1, grid=g.describe())
    f = out / "runs" / f"{runs[0].run_id}.parquet"
    f.write_bytes(f.read_bytes()[:100])  # truncated
    p = execute(runs, out, workers=1, grid=g.describe())
    assert p.redone == [runs[0].run_id] and p.reused == 1
    assert pl.read_parquet(out / "results.parquet").height == 2
    fifo = out / "runs" / "zzzz.parquet"
    os.mkfifo(fifo)
    r = cli("sweep", grid_file(tmp_path, "\n".join([
        'scenario = "default"', "seeds = 1", f"overrides = {json.dumps(SMALL['overrides'])}",
        '[axes]', '"kernel.swappiness" = [30, 100]', '[variant_sets]', 'A = {}'])), "--out", str(out), timeout=120)
    assert r.returncode == 2 and str(fifo) in r.stderr and "not a regular file" in r.stderr


def test_a_plain_script_without_a_main_guard_sweeps_once(tmp_path):
    # Workers are started without the caller's script (spawn would import it again in
    # each, running the sweep there and printing its result several times).
    script = tmp_path / "plain.py"
    script.write_text(
        "import reclaimsim\n"
        f"df = reclaimsim.sweep({SMALL | {'seeds': 2}!r}, out={str(tmp_path / 'o')!r}, workers=2)\n"
        "print('rows', df.height)\n"
    )
    p = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("rows 2") == 1, p.stdout


def test_a_sweep_stores_the_scenarios_own_metrics_and_names_its_variant_sets(tmp_path):
    # seed 001's grid exists for fairness (cv of pgsteal and refaults over its memcgs): the
    # store keeps the scenario's [compare] metrics beside the values, each as compare
    # computes it, and says what each variant set is; the report plots them.
    from reclaimsim.metrics import metric
    from reclaimsim.report import sweep_figures

    g = load_grid({"scenario": "seed-001", "seeds": 1, "overrides": ["duration=7s", "reclaim[0].times=2"],
                   "axes": {"workload[0].rate": ["40M"]}})
    runs = plan(g)
    execute(runs, tmp_path / "s", workers=2, grid=g.describe())
    df = pl.read_parquet(tmp_path / "s" / "results.parquet")
    assert df["variant_switches"].to_list() == ["mglru_memcg_iter=false", "mglru_memcg_iter=true"]
    r = json.loads(reclaimsim.batch.run_one(runs[0].scenario)[1])
    for m in ("cv:pgsteal@/memcg*", "cv:workingset_refault_anon@/memcg*", "proactive_accuracy"):
        assert df[m][0] == pytest.approx(metric(r, m)), m
    titles = [f.layout.title.text for f in sweep_figures(df)]
    assert titles[0].startswith("seed-001: cv:pgsteal@/memcg* [% (stddev over mean across cgroups)]")
    names = [t.name for f in sweep_figures(df) for t in f.data]
    assert "A: mglru_memcg_iter=false" in names and "B: mglru_memcg_iter=true" in names
