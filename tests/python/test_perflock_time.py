"""kernel-run's time rows and `perf lock contention` rows: parsing perf's table, the per-caller
side-by-side with the model's lock table, and the elapsed/rate arithmetic (known inputs,
hand-computed outputs)."""

import shutil

import pytest

from reclaimsim import perflock
from reclaimsim.sidebyside import kernel_time_counters, time_rows, workload_names

PERF_TEXT = """ contended   total wait     max wait     avg wait         type   caller

      5518     15.44 ms    151.55 us      2.80 us     spinlock   zram_submit_bio+0x5c9
      1392      4.37 ms     12.81 us      3.14 us     spinlock   shrink_node+0x2ff
       270    994.40 us    122.51 us      3.68 us     spinlock   lru_note_cost_refault+0xe
        12      1.5 s         1 s       125 ms        mutex    shrink_node+0x400
         3       900 ns       400 ns       300 ns     rwsem:R   folio_lock_anon_vma_read+0x1
=== output for debug ===
"""


def test_parse_reads_every_row_with_its_unit():
    rows = perflock.parse(PERF_TEXT)
    assert [r["caller"] for r in rows] == [
        "zram_submit_bio+0x5c9", "shrink_node+0x2ff", "lru_note_cost_refault+0xe", "shrink_node+0x400",
        "folio_lock_anon_vma_read+0x1",
    ]
    assert rows[0] == {"caller": "zram_submit_bio+0x5c9", "symbol": "zram_submit_bio", "type": "spinlock",
                       "contended": 5518, "total_wait_ns": 15_440_000, "max_wait_ns": 151_550}
    assert rows[2]["total_wait_ns"] == 994_400
    assert rows[3]["total_wait_ns"] == 1_500_000_000 and rows[3]["type"] == "mutex"
    assert rows[4]["total_wait_ns"] == 900 and rows[4]["type"] == "rwsem:R"


def test_side_by_side_sums_a_symbol_and_averages_reps():
    k1 = perflock.parse(PERF_TEXT)
    k2 = [{"symbol": "shrink_node", "contended": 8, "total_wait_ns": 1_000}]
    sim1 = [{"caller": "shrink_node", "contended": 10, "total_wait_ns": 500},
            {"caller": "shrink_node", "contended": 2, "total_wait_ns": 100},
            {"caller": "lru_add_drain_cpu", "contended": 4, "total_wait_ns": 40_000}]
    sim2 = [{"caller": "shrink_node", "contended": 0, "total_wait_ns": 0}]
    rows = {r["caller"]: r for r in perflock.side_by_side([k1, k2], [sim1, sim2])}
    # shrink_node: rep 1 = 1392 + 12 contended, 4.37 ms + 1.5 s; rep 2 = 8, 1 us.
    assert rows["shrink_node"]["kernel_contended"] == (1404 + 8) / 2
    assert rows["shrink_node"]["kernel_wait_ns"] == (4_370_000 + 1_500_000_000 + 1_000) / 2
    # The model's two lock classes at one site are summed, then averaged over runs.
    assert rows["shrink_node"]["sim_contended"] == 6 and rows["shrink_node"]["sim_wait_ns"] == 300
    assert rows["shrink_node"]["mapped"]
    assert not rows["zram_submit_bio"]["mapped"] and rows["zram_submit_bio"]["sim_wait_ns"] == 0
    # A model site the kernel never reported.
    assert rows["lru_add_drain_cpu"]["kernel_wait_ns"] == 0 and rows["lru_add_drain_cpu"]["sim_wait_ns"] == 20_000
    # Sorted by the larger wait: shrink_node's 752 ms first.
    assert perflock.side_by_side([k1, k2], [sim1, sim2])[0]["caller"] == "shrink_node"


def test_a_site_reported_under_the_function_taking_its_lock_joins_that_row():
    # This kernel's perf names folio_batch_move_lru, never lru_add_drain_cpu: the model's
    # drains (lru_add_drain_cpu) join its full-batch moves (folio_batch_move_lru) there.
    kernel = [{"symbol": "folio_batch_move_lru", "contended": 100, "total_wait_ns": 9_000}]
    sim = [{"caller": "lru_add_drain_cpu", "contended": 30, "total_wait_ns": 3_000},
           {"caller": "folio_batch_move_lru", "contended": 5, "total_wait_ns": 500},
           {"caller": "shrink_node", "contended": 1, "total_wait_ns": 10}]
    rows = {r["caller"]: r for r in perflock.side_by_side([kernel], [sim])}
    assert "lru_add_drain_cpu" not in rows
    row = rows["folio_batch_move_lru"]
    assert (row["sim_contended"], row["sim_wait_ns"]) == (35, 3_500)
    assert row["model_sites"] == ["folio_batch_move_lru", "lru_add_drain_cpu"] and row["mapped"]
    assert "(model: folio_batch_move_lru + lru_add_drain_cpu)" in "\n".join(perflock.format_rows(list(rows.values())))
    # A build that reports lru_add_drain_cpu itself keeps the two rows apart.
    kernel2 = kernel + [{"symbol": "lru_add_drain_cpu", "contended": 7, "total_wait_ns": 70}]
    rows2 = {r["caller"]: r for r in perflock.side_by_side([kernel2], [sim])}
    assert rows2["lru_add_drain_cpu"]["sim_wait_ns"] == 3_000 and rows2["folio_batch_move_lru"]["sim_wait_ns"] == 500


def test_an_observed_model_run_shows_what_its_perf_lock_read():
    # kernel-run --perf-lock runs the model observed: its rows carry the truth and, under
    # `observed`, the traced waiters only, which is what the kernel's side is.
    kernel = [{"symbol": "shrink_node", "contended": 3, "total_wait_ns": 90}]
    sim = [{"caller": "shrink_node", "contended": 40, "total_wait_ns": 4_000,
            "observed": {"contended": 2, "total_wait_ns": 70, "max_wait_ns": 50}}]
    row = perflock.side_by_side([kernel], [sim])[0]
    assert (row["sim_contended"], row["sim_wait_ns"]) == (2, 70)


def test_sites_inlined_into_shrink_lruvec_join_its_row():
    # shrink_inactive_list is inlined into shrink_lruvec: perf names shrink_lruvec for its
    # isolation and putback (and for the cost lock, the model's own shrink_lruvec site).
    kernel = [{"symbol": "shrink_lruvec", "contended": 37, "total_wait_ns": 115_000}]
    sim = [{"caller": "shrink_inactive_list", "contended": 730, "total_wait_ns": 1_198_000},
           {"caller": "move_folios_to_lru", "contended": 328, "total_wait_ns": 548_000}]
    rows = {r["caller"]: r for r in perflock.side_by_side([kernel], [sim])}
    assert set(rows) == {"shrink_lruvec"}
    assert (rows["shrink_lruvec"]["sim_contended"], rows["shrink_lruvec"]["sim_wait_ns"]) == (1058, 1_746_000)


def test_time_rows_of_a_workload_come_from_its_longest_thread():
    procs = [
        {"workload": 0, "threads": [{"accesses": 1000, "major_faults": 10, "minor_faults": 5, "elapsed_ns": 2_000_000_000},
                                    {"accesses": 3000, "major_faults": 20, "minor_faults": 5, "elapsed_ns": 4_000_000_000}]},
        {"workload": 1, "killed": 9, "threads": [{"accesses": 500, "major_faults": 0, "minor_faults": 0, "elapsed_ns": 500_000_000}]},
    ]
    c = kernel_time_counters(procs, ["a", "file_read1"])
    assert c["elapsed_ms@a"] == 4000
    assert c["accesses_per_s@a"] == 1000 and c["faults_per_s@a"] == 10
    assert c["elapsed_ms@file_read1"] == 500 and c["accesses_per_s@file_read1"] == 1000
    assert time_rows(0, 5, 5, "x") == {"elapsed_ms@x": 0, "accesses_per_s@x": 0.0, "faults_per_s@x": 0.0}
    # An unnamed workload is named as the simulator's reports name it: type and index.
    assert workload_names({"workload": [{"name": "a"}, {"type": "file_read"}]}) == ["a", "file_read1"]


def test_kernel_run_names_an_unnamed_workload_as_the_simulator_does():
    import json

    from reclaimsim import _core
    from reclaimsim.result import Result

    scenario = {
        "duration": "20ms",
        "machine": {"cpus": 2, "memory_per_node": "64M"},
        "workload": [{"type": "usemem", "size": "1M"}, {"type": "usemem", "name": "b", "size": "1M"}],
    }
    norm = json.loads(_core.validate_json(json.dumps(scenario), None))
    result = Result(_core.run_json(json.dumps(norm), None))
    assert workload_names(norm) == [w["name"] for w in result.workloads] == ["usemem0", "b"]
