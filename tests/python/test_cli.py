"""End-to-end tests of the Python API and the CLI."""

import json
import re
import subprocess
import sys

import pytest

import reclaimsim


def cli(*args):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True)


def test_scenarios_lists_every_builtin():
    p = cli("scenarios")
    assert p.returncode == 0
    for name in ["default", "file-fits", "file-zipf", "hotscan", "global-kswapd", "large"]:
        assert name in p.stdout


@pytest.mark.parametrize(
    "args, needle",
    [
        (["run", "no-such-scenario"], "built-ins: calib-anon-cpu, calib-anon-random"),
        (["run", "file-fits", "--set", "machine.memory_per_node=12X"], "scenario.machine.memory_per_node"),
        (["run", "file-fits", "--set", "kernel.swappiness=300"], "scenario.kernel.swappiness"),
        (["run", "file-fits", "--set", "cgroup[0].path=/a/b"], "scenario.cgroup[0].path"),
        (["run", "file-fits", "--set", "workload[0].bogus=1"], "bogus"),
        (["run", "file-fits", "--set", "workload[5].size=1M"], "scenario.workload[5]"),
        (["run", "file-fits", "--set", "nonsense"], "KEY=VALUE"),
        (["run", "--seed", "abc"], "abc"),
    ],
)
def test_bad_input_exits_2_naming_the_problem(args, needle):
    p = cli(*args)
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr
    assert "Traceback" not in p.stderr


def test_malformed_toml_file(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("duration = \n")
    p = cli("run", str(f))
    assert p.returncode == 2 and "invalid TOML" in p.stderr and "Traceback" not in p.stderr


def test_default_scenario_reclaims_in_the_leaf(tmp_path):
    out = tmp_path / "r.json"
    p = cli("run", "default", "--set", "duration=8s", "--set", "sample_interval=500ms", "--json", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    r = json.loads(out.read_text())
    assert set(["scenario", "vmstat", "cgroups", "locks", "workloads", "timeseries"]) <= set(r)
    leaf = next(c for c in r["cgroups"] if c["path"] == "/usemem/leaf")
    assert leaf["memory.stat"]["pgscan"] > 0 and leaf["memory.stat"]["pgsteal"] > 0
    assert r["vmstat"]["pswpout"] > 0 and r["vmstat"]["workingset_refault_anon"] > 0
    cols = r["timeseries"]["columns"]
    cur = cols.index("memory.current")
    rows = [row for row in r["timeseries"]["rows"] if row[1] == "/usemem/leaf"]
    assert len(rows) >= 15
    assert all(row[cur] <= 512 << 20 for row in rows)
    callers = {l["caller"] for l in r["locks"]}
    assert {"shrink_inactive_list", "lru_add_drain_cpu", "shrink_node"} <= callers
    assert "lock contention" in p.stdout and "memory.stat" in p.stdout


def test_determinism_same_seed_same_json_other_seed_differs():
    a = reclaimsim.run("default", overrides=["duration=200ms"]).to_json()
    b = reclaimsim.run("default", overrides=["duration=200ms"]).to_json()
    c = reclaimsim.run("default", seed=2, overrides=["duration=200ms"]).to_json()
    assert a == b
    assert a != c


def test_file_fits_misses_only_first_pass():
    r = reclaimsim.run("file-fits")
    w = r.workloads[0]
    pages = 2 * (64 << 20) // 4096
    assert w["misses"] == pages
    assert w["accesses"] == 3 * pages


def test_run_dict_and_dataframes():
    d = reclaimsim.load_scenario("file-fits")
    d["workload"][0]["passes"] = 1
    r = reclaimsim.run(d)
    assert r.workloads[0]["accesses"] == 2 * (64 << 20) // 4096
    df = r.timeseries_df()
    assert "memory.current" in df.columns and df.height > 0
    ldf = r.locks_df()
    assert {"caller", "total_wait_ns", "contended"} <= set(ldf.columns)
    with pytest.raises(KeyError):
        r.cgroup("/nope")


def test_validate_prints_a_scenario_that_run_and_validate_take_back(tmp_path):
    for name in ["default", "seed-003", "calib-zipf"]:
        p = cli("validate", name)
        assert p.returncode == 0, p.stderr
        f = tmp_path / f"{name}.json"
        f.write_text(p.stdout)
        again = cli("validate", str(f))
        assert again.returncode == 0, again.stderr
        assert json.loads(again.stdout) == json.loads(p.stdout)
    # The normalized scenario runs to the same bytes as the built-in it came from.
    from_json = cli("run", str(tmp_path / "default.json"), "--set", "duration=100ms", "--json", "-")
    direct = cli("run", "default", "--set", "duration=100ms", "--json", "-")
    assert from_json.returncode == 0, from_json.stderr
    assert from_json.stdout == direct.stdout
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    p = cli("run", str(bad))
    assert p.returncode == 2 and p.stderr.strip() == f"error: {bad}: a JSON scenario is an object, not list"


def test_validate_full_scale_prints_what_run_full_scale_runs(tmp_path):
    import tomllib
    from importlib import resources

    # seed-001's own [compare].full_scale list, applied by hand to the scaled-down print.
    toml = tomllib.loads(resources.files("reclaimsim").joinpath("scenarios/seed-001.toml").read_text())
    small = cli("validate", "seed-001")
    full = cli("validate", "seed-001", "--full-scale")
    assert small.returncode == 0 and full.returncode == 0, full.stderr
    by_hand = cli("validate", "seed-001", *[a for o in toml["compare"]["full_scale"] for a in ("--set", o)])
    assert by_hand.returncode == 0, by_hand.stderr
    assert json.loads(full.stdout) == json.loads(by_hand.stdout) != json.loads(small.stdout)
    # --set comes after the full-scale overrides, as in run.
    later = cli("validate", "seed-001", "--full-scale", "--set", "duration=5000s")
    assert later.returncode == 0, later.stderr
    assert json.loads(later.stdout)["duration"] == 5000 * 10**9
    # A scenario without a full scale is refused, in one line.
    p = cli("validate", "default", "--full-scale")
    assert p.returncode == 2
    assert p.stderr.strip() == "error: --full-scale: this scenario runs at its full scale already (no [compare].full_scale)"


def test_run_prints_each_thread_of_a_workload_with_several(tmp_path):
    # usemem_span gives 2 threads 5 pages each of 40K; 2 sequential passes: each thread's
    # first pass faults its pages in (neither hit nor miss), the second hits them all.
    sc = tmp_path / "t.toml"
    sc.write_text(
        'duration = "1s"\n[machine]\ncpus = 4\nmemory_per_node = "64M"\n'
        '[[workload]]\ntype = "usemem"\nname = "two"\nthreads = 2\nsize = "40K"\nrepeat = 2\n'
        '[[workload]]\ntype = "usemem"\nname = "one"\nsize = "40K"\nrepeat = 2\n'
    )
    p = cli("run", str(sc), "--no-progress")
    assert p.returncode == 0, p.stderr
    lines = [l for l in p.stdout.splitlines() if " thread " in l]
    assert [l.split(":")[0].strip() for l in lines] == ["two thread 0", "two thread 1"]
    assert all("10 accesses, 5 hits, 0 misses" in l for l in lines), lines


def test_small_texts_say_what_they_mean(tmp_path):
    # kswapd's CPU time is a figure, not a Python list; trace-gen names compression only
    # when it compressed; bare `reclaimsim` is the usual help.
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "run", "default", "--set", "duration=300ms",
                        "--no-progress"], capture_output=True, text=True)
    assert r.returncode == 0 and re.search(r"kswapd CPU \d+(\.\d+)? \w+, direct reclaim", r.stdout), r.stdout
    for name, said in (("t.oracleGeneral", False), ("t.oracleGeneral.zst", True)):
        r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "trace-gen", str(tmp_path / name),
                            "--requests", "1000", "--objects", "100"], capture_output=True, text=True)
        assert r.returncode == 0 and ("compression" in r.stdout) == said, r.stdout
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("Usage: ") and "Commands:" in r.stdout and r.stderr == ""


def test_versions_lists_the_kernels_and_a_versions_rules_with_their_commits():
    import subprocess
    import sys

    def cli(*a):
        return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *a], capture_output=True, text=True)

    p = cli("versions")
    assert p.returncode == 0, p.stderr
    for v in ("6.1", "6.12", "6.18", "7.3"):
        assert f"\n  {v} " in p.stdout, p.stdout
    # 6.12 lacks the aging-feedback rework (v6.14) and has the 31-folio batches (v6.10).
    p = cli("versions", "6.12")
    assert p.returncode == 0, p.stderr
    has, lacks = p.stdout.split("rules it lacks")
    assert "folio_batch_size_31" in has and "798c0330c2ca" in lacks and "798c0330c2ca" not in has
    bad = cli("versions", "5.4")
    assert bad.returncode == 2 and "allowed: 6.1, 6.12, 6.18, 7.3" in bad.stderr
    # A rule the registry does not list is refused by name.
    r = cli("validate", "default", "--set", "kernel.rules.reclaim_slab_credit=true")
    assert r.returncode == 2 and "kernel.rules.reclaim_slab_credit: no such rule" in r.stderr and len(r.stderr.splitlines()) == 1
    # validate prints the resolved version.
    v = cli("validate", "default", "--set", "kernel.version=6.12")
    assert v.returncode == 0 and '"version": "6.12"' in v.stdout, v.stderr
