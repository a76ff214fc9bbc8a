"""Names of result values (reclaimsim.metrics): one scheme for compare's metrics, a sweep's
columns and the report. Every value a sweep stores reads back by its column's name;
version-1 store columns map to today's names; the per-lock and trace forms."""

import json
import re

import pytest

import reclaimsim
from reclaimsim.metrics import from_v1, metric, unit, values

from test_trace import TRACES, _scenario


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """A run with locks (two lock classes: seed 000's cost_lock beside the lru_lock) and
    a trace replay (request-level figures beside the page-level ones)."""
    locks = reclaimsim.run("default", overrides=["duration=300ms", "variants.vmstat_scan_cost=true"])
    trace = reclaimsim.run(_scenario(tmp_path_factory.mktemp("t"), TRACES / "small.oracleGeneral"))
    return [json.loads(locks.to_json()), json.loads(trace.to_json())]


def v1_row(r: dict) -> dict:
    """The value columns a version-1 sweep store wrote (sweep.py before store_version 2)."""
    row = {"end_ns": r["end_ns"]}
    for k, v in r["vmstat"].items():
        row[f"vmstat.{k}"] = v
    for w in r["workloads"]:
        for k, v in w.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                row[f"workload.{w['name']}.{k}"] = v
        for k, v in (w.get("trace") or {}).items():
            row[f"workload.{w['name']}.trace.{k}"] = v
    total = 0
    for lk in r["locks"]:
        key = f"lock.{lk['name']}.{lk['caller']}"
        row[f"{key}.wait_ns"] = row.get(f"{key}.wait_ns", 0) + lk["total_wait_ns"]
        row[f"{key}.acquisitions"] = row.get(f"{key}.acquisitions", 0) + lk["acquisitions"]
        total += lk["total_wait_ns"]
    row["lock_wait_total_ns"] = total
    return row


def test_every_stored_value_reads_back_by_its_name(results):
    for r in results:
        vals = values(r)
        assert len(vals) > 40
        for name, v in vals.items():
            assert metric(r, name) == v, name


def test_version_1_columns_map_to_todays_names(results):
    for r in results:
        old = v1_row(r)
        assert {from_v1(k): v for k, v in old.items()} == values(r)
    for keep in ("run_id", "machine.cpus", "workload[0].size", "end_ns", "lock_wait_total_ns"):
        assert from_v1(keep) == keep


def test_a_lock_at_a_call_site_by_its_name_or_all_locks_there(results):
    r = results[0]
    assert {l["name"] for l in r["locks"]} == {"lru_lock", "cost_lock"}
    for caller in {l["caller"] for l in r["locks"]}:
        at = [l for l in r["locks"] if l["caller"] == caller]
        assert metric(r, f"lock_wait_ns@{caller}") == sum(l["total_wait_ns"] for l in at)
        for name in ("lru_lock", "cost_lock"):
            mine = [l for l in at if l["name"] == name]
            assert metric(r, f"{name}_wait_ns@{caller}") == sum(l["total_wait_ns"] for l in mine)
            assert metric(r, f"{name}_acquisitions@{caller}") == sum(l["acquisitions"] for l in mine)
            assert metric(r, f"{name}_hold_ns@{caller}") == sum(l["total_hold_ns"] for l in mine)


def test_a_trace_workloads_request_figures_beside_its_page_figures(results):
    r = results[1]
    w = r["workloads"][0]
    assert metric(r, "hits@replay") == w["hits"]
    assert metric(r, "trace.hits@replay") == w["trace"]["hits"]
    assert metric(r, "trace.miss_ratio@replay") == metric(r, "miss_ratio@replay") == w["trace"]["miss_ratio"]
    with pytest.raises(reclaimsim.ScenarioError, match=re.escape("has request-level figures: requests")):
        metric(r, "trace.nonsense@replay")
    with pytest.raises(reclaimsim.ScenarioError, match="not a trace workload"):
        metric(results[0], f"trace.hits@{results[0]['workloads'][0]['name']}")


def test_units_of_stored_values():
    assert unit("pgscan_anon") == "pages" and unit("allocstall_normal") == "events"
    assert unit("end_ns") == unit("runtime_ns@web") == unit("lru_lock_wait_ns@shrink_node") == "ns"
    assert unit("throughput@web") == "accesses/s"
    assert unit("accesses@web") == unit("lru_lock_acquisitions@shrink_node") == ""


def test_aggregates_over_flat_per_cgroup_counters():
    from reclaimsim.metrics import across_cgroup_counters

    # pgsteal of three memcgs 100, 200, 300: mean 200, population sd sqrt(20000/3).
    c = {"pgsteal@/m0": 100, "pgsteal@/m1": 200, "pgsteal@/m2": 300, "pgsteal@/other": 9999,
         "pgsteal_anon@/m0": 7, "pgsteal": 600}
    assert across_cgroup_counters(c, "sum:pgsteal@/m*") == 600
    assert across_cgroup_counters(c, "cv:pgsteal@/m*") == pytest.approx(100 * (20000 / 3) ** 0.5 / 200)
    # Not an aggregate over cgroups, or nothing matches: None.
    assert across_cgroup_counters(c, "pgsteal") is None
    assert across_cgroup_counters(c, "cv:pgsteal@job*") is None
    assert across_cgroup_counters(c, "cv:pgscan@/m*") is None
