"""Trace replay from the CLI: the trace workload, trace-gen, and bench --vs libcachesim."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reclaimsim import _core

TRACES = Path(__file__).resolve().parents[1] / "traces"


def cli(*args):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True)


def _scenario(tmp_path, trace, extra=""):
    p = tmp_path / "t.toml"
    p.write_text(
        f"""
name = "t"
duration = "60s"
[machine]
cpus = 2
memory_per_node = "1G"
[[cgroup]]
path = "/t"
memory.max = "256K"
[[workload]]
type = "trace"
name = "replay"
cgroup = "/t"
path = "{trace}"
{extra}
"""
    )
    return str(p)


def test_run_replays_a_trace_and_reports_its_miss_ratio(tmp_path):
    sc = _scenario(tmp_path, TRACES / "small.oracleGeneral.zst")
    p = cli("run", sc, "--json", str(tmp_path / "out.json"))
    assert p.returncode == 0, p.stderr
    assert "trace replay: 2000 requests" in p.stdout
    t = json.loads((tmp_path / "out.json").read_text())["workloads"][0]["trace"]
    assert t["requests"] == 2000 and t["hits"] + t["misses"] == 2000
    assert t["miss_ratio"] == pytest.approx(t["misses"] / 2000)


@pytest.mark.parametrize(
    "trace, extra, needle",
    [
        ("bad.txt", "", "bad.txt: record 3"),
        ("truncated.oracleGeneral", "", "record 51: truncated"),
        ("small.csv", 'csv = { obj_id = "key" }', 'no column "key"'),
        ("small.csv", 'format = "parquet"', "unknown variant `parquet`, expected one of `auto`"),
    ],
)
def test_bad_traces_exit_2_naming_the_record(tmp_path, trace, extra, needle):
    p = cli("run", _scenario(tmp_path, TRACES / trace, extra))
    assert p.returncode == 2, p.stderr
    assert needle in p.stderr
    assert "Traceback" not in p.stderr


def test_trace_gen_writes_a_zipf_trace_both_sides_can_read(tmp_path):
    out = tmp_path / "z.oracleGeneral.zst"
    p = cli("trace-gen", str(out), "--objects", "2000", "--requests", "30000", "--zipf", "0.9")
    assert p.returncode == 0, p.stderr
    requests, objects, pages = _core.trace_count(str(out))
    assert requests == 30000 and 1000 < objects <= 2000 and pages == objects

    b = cli("bench", "--vs", "libcachesim", str(out), "--json", "-", "--policies")
    assert b.returncode == 0, b.stderr
    r = json.loads(b.stdout)
    for k in ["trace", "requests", "capacity_pages", "reclaimsim_rps", "libcachesim_rps", "ratio",
              "reclaimsim_miss_ratio", "libcachesim_miss_ratio"]:
        assert k in r
    assert r["requests"] == 30000 and r["capacity_pages"] == objects // 10
    assert r["ratio"] == pytest.approx(r["reclaimsim_rps"] / r["libcachesim_rps"])
    # Both are caches of a tenth of the objects on a skewed trace: far from 0 and from 1.
    assert 0.1 < r["reclaimsim_miss_ratio"] < 0.9 and 0.1 < r["libcachesim_miss_ratio"] < 0.9
    assert set(r["libcachesim_other_miss_ratios"]) == {"Clock", "SLRU", "TwoQ", "ARC", "S3FIFO"}
    assert all(0 < v < 1 for v in r["libcachesim_other_miss_ratios"].values())

    # --repeat alternates the sides and keeps each one's fastest run; the replay is the same.
    b = cli("bench", "--vs", "libcachesim", str(out), "--json", "-", "--repeat", "3")
    assert b.returncode == 0, b.stderr
    r3 = json.loads(b.stdout)
    assert r3["repeat"] == 3
    assert len(r3["reclaimsim_walls_s"]) == 3 and len(r3["libcachesim_walls_s"]) == 3
    assert r3["reclaimsim_wall_s"] == min(r3["reclaimsim_walls_s"])
    assert r3["libcachesim_wall_s"] == min(r3["libcachesim_walls_s"])
    assert r3["reclaimsim_rps"] == pytest.approx(30000 / r3["reclaimsim_wall_s"])
    assert r3["reclaimsim_miss_ratio"] == r["reclaimsim_miss_ratio"]
    bad = cli("bench", "--vs", "libcachesim", str(out), "--repeat", "0")
    assert bad.returncode == 2 and "--repeat" in bad.stderr and "Traceback" not in bad.stderr


def test_bench_vs_needs_a_trace():
    p = cli("bench", "--vs", "libcachesim")
    assert p.returncode == 2 and "needs a TRACE" in p.stderr


def test_compare_reads_a_trace_workloads_miss_ratio(tmp_path):
    import reclaimsim
    from reclaimsim.metrics import metric

    sc = _scenario(tmp_path, TRACES / "small.oracleGeneral")
    r = json.loads(reclaimsim.run(sc).to_json())
    assert metric(r, "miss_ratio@replay") == r["workloads"][0]["trace"]["miss_ratio"]
    with pytest.raises(reclaimsim.ScenarioError, match="fields: .*miss_ratio"):
        metric(r, "nonsense@replay")


def test_relative_trace_paths_are_relative_to_the_scenario_file(tmp_path):
    d = tmp_path / "exp"
    d.mkdir()
    (d / "t.txt").write_text((TRACES / "small.txt").read_text())
    sc = Path(_scenario(d, "t.txt"))
    p = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "run", str(sc)], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "trace replay: 7 requests" in p.stdout


def _oracle_ids(path):
    """The object ids of an uncompressed oracleGeneral trace (24-byte records)."""
    import struct

    data = Path(path).read_bytes()
    return [struct.unpack_from("<IQIq", data, i)[1] for i in range(0, len(data), 24)]


def test_bench_vs_libcachesim_sees_the_same_objects_in_text_and_oracle_general(tmp_path):
    # The same ids as 4 KiB oracleGeneral objects and as text lines (1-byte objects in
    # libCacheSim's text reader): both sides must miss exactly as often either way.
    oracle = tmp_path / "z.oracleGeneral"
    _core.trace_gen(str(oracle), 2000, 30000, 0.9, 5)
    text = tmp_path / "z.txt"
    text.write_text("\n".join(map(str, _oracle_ids(oracle))) + "\n")
    runs = []
    for path in (oracle, text):
        b = cli("bench", "--vs", "libcachesim", str(path), "--json", "-")
        assert b.returncode == 0, b.stderr
        runs.append(json.loads(b.stdout))
    o, t = runs
    assert (o["requests"], o["objects"], o["capacity_pages"]) == (t["requests"], t["objects"], t["capacity_pages"])
    assert t["libcachesim_miss_ratio"] == o["libcachesim_miss_ratio"]
    assert t["reclaimsim_miss_ratio"] == o["reclaimsim_miss_ratio"]
    # An LRU of a tenth of the objects on zipf 0.9 misses far less than always.
    assert t["libcachesim_miss_ratio"] < 0.7


def test_bench_vs_libcachesim_text_capacity_counts_objects(tmp_path):
    # 1 2 3 1 in an LRU of 2 objects: 1, 2 and 3 miss, 3 evicts 1, which misses again.
    f = tmp_path / "t.txt"
    f.write_text("1\n2\n3\n1\n")
    b = cli("bench", "--vs", "libcachesim", str(f), "--capacity-pages", "2", "--json", "-")
    assert b.returncode == 0, b.stderr
    assert json.loads(b.stdout)["libcachesim_miss_ratio"] == 1.0
    b = cli("bench", "--vs", "libcachesim", str(f), "--capacity-pages", "3", "--json", "-")
    assert json.loads(b.stdout)["libcachesim_miss_ratio"] == 0.75


def test_bench_vs_libcachesim_refuses_what_the_two_would_read_differently(tmp_path):
    # A comment line: reclaimsim skips it, libCacheSim's reader stops the process.
    p = cli("bench", "--vs", "libcachesim", str(TRACES / "small.txt"))
    assert p.returncode == 2
    assert p.stderr.strip().splitlines() == [
        f"error: {TRACES / 'small.txt'}: line 1 is a '#' comment, which libCacheSim's text reader cannot read "
        "(it stops the process); remove the comment lines to compare"
    ]
    # Objects that are not whole pages: reclaimsim rounds them up to pages, libCacheSim not.
    import struct

    odd = tmp_path / "odd.oracleGeneral"
    odd.write_bytes(b"".join(struct.pack("<IQIq", i, i % 7, 1000, -1) for i in range(100)))
    p = cli("bench", "--vs", "libcachesim", str(odd))
    assert p.returncode == 2, p.stderr
    assert "objects are not whole 4 KiB pages (7 objects of 7000 bytes in all, 7 pages in reclaimsim)" in p.stderr
    assert "Traceback" not in p.stderr


def _damon_file(path: Path, snapshots: int) -> None:
    regions = [{"start": (1 << 40) + i * (1 << 20), "end": (1 << 40) + i * (1 << 20) + (1 << 16),
                "nr_accesses": {"samples": 1 + i % 20}, "age": i % 7} for i in range(40)]
    snaps = [{"start_time": k * 100_000_000, "end_time": (k + 1) * 100_000_000, "regions": regions}
             for k in range(snapshots)]
    path.write_text(json.dumps([{"kdamond_idx": 0, "context_idx": 0, "scheme_idx": 0, "target_id": 0,
                                 "intervals": {"sample_us": 5000, "aggr_us": 100000, "ops_update_us": 1000000},
                                 "snapshots": snaps}]))


def _peak_rss_of(args) -> int:
    """The peak resident set of a CLI child [bytes], as the kernel counted it."""
    proc = subprocess.Popen([sys.executable, "-m", "reclaimsim.cli", *args],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    assert proc.returncode == 0, err
    return usage.ru_maxrss * 1024


def test_a_damon_file_takes_what_the_budget_counts_for_it(tmp_path):
    # The regions are kept for the replay; the estimate covers what the kernel measures
    # (peak RSS above the same run with a tiny file; parsing the file whole as one JSON
    # value took 14 bytes per byte of it) and is bounded by the file's size.
    small, big = tmp_path / "small.json", tmp_path / "big.json"
    _damon_file(small, 2)
    _damon_file(big, 4000)
    base = _peak_rss_of(["run", _scenario(tmp_path, small), "--set", "duration=100ms"])
    grown = _peak_rss_of(["run", _scenario(tmp_path, big), "--set", "duration=100ms"]) - base
    v = cli("validate", _scenario(tmp_path, big))
    assert v.returncode == 0, v.stderr
    line = next(l for l in v.stderr.splitlines() if l.startswith("estimated memory"))
    mib = float(line.split("DAMON regions of workload[0], ")[1].split(" MiB")[0])
    assert grown <= mib * (1 << 20) <= 4 * big.stat().st_size, (grown, line, big.stat().st_size)
