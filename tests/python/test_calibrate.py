"""`reclaimsim calibrate`: the decomposition of path timings into cost-table entries
(known figures in, hand-computed entries out), the profile it writes read back by a run,
and bad arguments refused before anything is measured."""

import json
import subprocess
import sys
import tomllib

import pytest

from reclaimsim.calibrate import derive, oom_verdict, solve_linear


def cli(*args, **kw):
    return subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args], capture_output=True, text=True, **kw)


def fig(ns, ops=1000, spread=0.01, how="timed"):
    return {"ns": ns, "ops": ops, "spread": spread, "how": how}


BASE = {"page_zero": 250, "page_alloc": 120, "pte_map": 40, "file_read_hit": 600, "isolate_folio": 15,
        "pte_referenced": 40, "pte_unmap": 150, "page_free": 80, "list_op": 6, "swap_cache_op": 200,
        "fault_entry": 500, "lock_uncontended": 20, "cacheline_transfer": 80, "access_seq": 10,
        "access_random": 90, "atomic_rmw": 8}


def test_derive_subtracts_measured_entries_first_then_the_table():
    figs = {
        "page_zero": fig(300.4), "file_read_hit": fig(700), "cacheline_transfer": fig(50),
        "lock_uncontended": fig(6),
        "anon_fault_path": fig(2000), "cow_fault_path": fig(2600), "file_read_miss_path": fig(50_000),
        "reclaim_clean_file_path": fig(1000), "swap_out_path": fig(5000), "swap_in_path": fig(4000),
        "lock_handoff": fig(70),
        "zap_page_path": fig(1400.4), "zap_page_shared_path": fig(10_000),
    }
    costs, checks = derive(figs, BASE)
    ns = {k: v["ns"] for k, v in costs.items()}
    # Measured, rounded.
    assert ns["page_zero"] == 300 and ns["file_read_hit"] == 700
    # 2000 - (300 measured + 120 + 40) = 1540
    assert ns["fault_entry"] == 1540
    # 2600 - (fault_entry as derived 1540 + 120 + 40) = 900
    assert ns["page_copy"] == 900
    # 50000 - (700 measured + 120) = 49180
    assert ns["ssd_read_latency"] == 49180
    # 1000 - (15 + 150 + 80 + 6) = 749: MADV_PAGEOUT checks no references.
    assert ns["shrink_folio"] == 749
    # 5000 - (the clean reclaim path 1000 + 200) = 3800
    assert ns["zram_write"] == 3800
    # 4000 - (fault_entry as derived 1540 + 120 + 40 + 200) = 2100
    assert ns["zram_read"] == 2100
    # One shootdown: the zap with a thread of the process on the other CPU, minus without.
    # 10000 - 1400.4 = 8599.6 -> 8600
    assert ns["tlb_flush_ipi"] == 8600
    assert costs["tlb_flush_ipi"]["source"].startswith("derived: zap_page_shared_path 10000 ns minus zap_page_path 1400")
    assert costs["fault_entry"]["source"].startswith("derived: anon_fault_path 2000 ns minus page_zero 300 + page_alloc 120 (table)")
    assert costs["page_zero"]["source"].startswith("measured: timed")
    # Checks carry the path figure and the model's sum with the measured entries.
    assert checks["lock_handoff"]["ns"] == 70 and "is 56 ns" in checks["lock_handoff"]["source"]
    assert checks["anon_fault_path"]["ns"] == 2000
    assert set(costs) == {"page_zero", "file_read_hit", "cacheline_transfer", "lock_uncontended", "fault_entry",
                          "page_copy", "ssd_read_latency", "shrink_folio", "zram_write", "zram_read", "tlb_flush_ipi"}


def test_the_remote_wakeup_is_the_difference_of_the_reads_pinned_to_each_cpu():
    figs = {"direct_read_cpu_a": fig(160_400.4, how="pinned to CPU 0"), "direct_read_cpu_b": fig(99_600)}
    costs, checks = derive(figs, BASE)
    # 160400.4 - 99600 = 60800.4, far above the spread (1% of 99600 = 996 ns).
    assert costs == {"ssd_remote_wakeup": {"ns": 60_800, "source": costs["ssd_remote_wakeup"]["source"]}}
    assert costs["ssd_remote_wakeup"]["source"].startswith(
        "derived: direct_read_cpu_a 160400 ns minus direct_read_cpu_b 99600 ns")
    # The faster CPU may be either one.
    figs = {"direct_read_cpu_a": fig(99_600), "direct_read_cpu_b": fig(160_400)}
    assert derive(figs, BASE)[0]["ssd_remote_wakeup"]["ns"] == 60_800
    # Both figures stay, as checks.
    assert (checks["direct_read_cpu_a"]["ns"], checks["direct_read_cpu_b"]["ns"]) == (160_400, 99_600)
    assert checks["direct_read_cpu_a"]["source"].startswith("measured: pinned to CPU 0")


def test_a_difference_within_the_reads_spread_is_no_remote_wakeup():
    # 30% spread of the faster 80000 ns is 24000: a 20000 ns difference is noise.
    figs = {"direct_read_cpu_a": fig(100_000, spread=0.05), "direct_read_cpu_b": fig(80_000, spread=0.3)}
    costs, _ = derive(figs, BASE)
    assert costs["ssd_remote_wakeup"]["ns"] == 0
    assert "within the reads' spread (24000 ns)" in costs["ssd_remote_wakeup"]["source"]
    # Only one of the two: no entry.
    assert "ssd_remote_wakeup" not in derive({"direct_read_cpu_a": fig(100_000)}, BASE)[0]


def test_the_shootdowns_target_time_is_written_as_measured_beside_the_initiators():
    # The initiator's wait is the shared zap less the local one; the target's lost time
    # is its own figure, taken as it is (rounded), not subtracted from anything.
    figs = {"zap_page_path": fig(2_000), "zap_page_shared_path": fig(17_500),
            "tlb_flush_ipi_target": fig(10_574.6, how="gaps of a spinning thread")}
    costs, _ = derive(figs, BASE)
    assert costs["tlb_flush_ipi"]["ns"] == 15_500
    assert costs["tlb_flush_ipi_target"]["ns"] == 10_575
    assert costs["tlb_flush_ipi_target"]["source"].startswith("measured: gaps of a spinning thread")
    # Without the benchmark's figure the entry is left to the table.
    assert "tlb_flush_ipi_target" not in derive({"zap_page_path": fig(2_000)}, BASE)[0]


def test_the_sibling_transfer_is_an_entry_and_what_a_busy_sibling_costs_a_check():
    # A host with SMT: the ping-pong between two threads of a core is the entry a scenario
    # with threads_per_core > 1 charges; the loops alone and beside a sibling stay checks.
    figs = {"cacheline_transfer_smt": fig(7.6, how="ping-pong between CPUs 0 and 8"),
            "smt_chase_alone": fig(90), "smt_chase_shared": fig(120)}
    costs, checks = derive(figs, BASE)
    assert costs["cacheline_transfer_smt"]["ns"] == 8
    assert costs["cacheline_transfer_smt"]["source"].startswith("measured: ping-pong between CPUs 0 and 8")
    assert "cacheline_transfer_smt" not in checks
    assert (checks["smt_chase_alone"]["ns"], checks["smt_chase_shared"]["ns"]) == (90, 120)
    assert "smt_chase_shared" not in costs
    # A host without siblings gives neither.
    assert "cacheline_transfer_smt" not in derive({}, BASE)[0]


def test_derive_floors_a_negative_difference_and_says_so():
    costs, _ = derive({"page_zero": fig(3000), "anon_fault_path": fig(2000)}, BASE)
    assert costs["fault_entry"]["ns"] == 1
    assert "the difference was -1160 ns, floored at 1" in costs["fault_entry"]["source"]


def test_derive_without_the_clean_reclaim_path_leaves_zram_write_out():
    costs, _ = derive({"swap_out_path": fig(5000)}, BASE)
    assert "zram_write" not in costs


def test_quick_calibration_writes_a_profile_that_runs_use(tmp_path):
    out = tmp_path / "cal.toml"
    p = cli("calibrate", "--quick", "-o", str(out), "--workdir", str(tmp_path))
    if p.returncode == 2 and "tmpfs" in p.stderr:
        pytest.skip("the test directory is on tmpfs")
    assert p.returncode == 0, p.stderr
    prof = tomllib.loads(out.read_text())
    # Every derived entry is its path figure minus the terms its source names.
    for name, e in prof["costs"].items():
        kind, _, rest = e["source"].partition(": ")
        assert kind in ("measured", "derived", "derived from a timed reclaim-bound run"), e["source"]
        if kind == "derived":
            path = rest.split(" ", 1)[0]
            assert path in prof["checks"], (name, rest)
        if kind.startswith("derived from a timed"):
            assert name == "pte_referenced" and "kernel elapsed" in rest, rest
    t = {c["name"]: c for c in json.loads(cli("costs", "default", "--costs", str(out), "--json", "-").stdout)}
    for name, e in prof["costs"].items():
        assert t[name]["ns"] == e["ns"] and t[name]["origin"]["layer"] == "costs_profile", name


@pytest.mark.parametrize("args, needles", [
    (["--cpus", "0,4096"], ["--cpus 0,4096", "CPU 4096 does not exist"]),
    (["--cpus", "zero,1"], ["--cpus", "'zero,1'", "two CPU numbers"]),
    (["--workdir", "/nonexistent"], ["--workdir /nonexistent", "not a directory"]),
    (["--workdir", "/dev/shm"], ["--workdir /dev/shm", "disk filesystem"]),
])
def test_bad_arguments_are_one_line_exit_2(tmp_path, args, needles):
    p = cli("calibrate", "-o", str(tmp_path / "x.toml"), *args)
    assert p.returncode == 2, p.stderr
    lines = [l for l in p.stderr.splitlines() if l.strip()]
    assert len(lines) == 1 and "Traceback" not in p.stderr, p.stderr
    for n in needles:
        assert n in lines[0], lines[0]
    assert not (tmp_path / "x.toml").exists()


def test_output_into_a_missing_directory_is_refused_first(tmp_path):
    p = cli("calibrate", "-o", str(tmp_path / "no" / "x.toml"))
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert f"{tmp_path / 'no'}' does not exist" in p.stderr, p.stderr


def test_solve_linear_reads_the_entry_off_two_model_runs():
    # T(40) = 380 ms, T(1040) = 460 ms: 0.08 ms per ns; T(x) = 574 ms at x = 40 + 194 / 0.08.
    assert solve_linear(40, 380.0, 460.0, 1000, 574.0) == pytest.approx(2465.0)
    assert solve_linear(40, 380.0, 460.0, 1000, 380.0) == 40
    # Below the model's time at v0: a smaller value, possibly negative (the caller floors it).
    assert solve_linear(40, 380.0, 460.0, 1000, 300.0) == pytest.approx(-960.0)
    # A time that does not grow with the entry gives no answer.
    assert solve_linear(40, 380.0, 380.0, 1000, 574.0) is None
    assert solve_linear(40, 380.0, 370.0, 1000, 574.0) is None


def test_a_run_that_ends_in_an_oom_kill_calibrates_nothing():
    assert oom_verdict([0, 0, 0], 0.0) is None
    why = oom_verdict([0, 1, 0], 0.0)
    assert why is not None and "1 of 3 kernel reps" in why
    why = oom_verdict([0, 0, 0], 0.5)
    assert why is not None and "killed 0.5 processes per run" in why
    assert oom_verdict([], 1.0) is not None


def test_the_reclaim_bound_case_runs_to_its_end_where_populating_it_is_oom_killed():
    # Populating an area beyond the memcg limit activates every folio at its first check
    # and ends in an OOM kill (on this machine's kernel too, docs/fidelity.md); the case
    # faults its area in by writing it and reclaims to the end. Its three passes write
    # every one of the 16,384 pages three times (two threads, 8,192 pages each).
    import json

    from reclaimsim import _core
    from reclaimsim.calibrate import RECLAIM_CASE
    from reclaimsim.result import Result

    def run(**w):
        sc = json.loads(json.dumps(RECLAIM_CASE))
        sc["workload"][0].update(w)
        return Result(_core.run_json(_core.validate_json(json.dumps(sc)), None))

    faulted = run()
    assert len(faulted.oom_kills) == 0
    assert faulted.workloads[0]["accesses"] == 3 * (64 << 20) // 4096
    assert len(run(prefault=True).oom_kills) == 1


def test_cross_node_share_is_the_chance_two_random_threads_sit_on_different_nodes():
    from reclaimsim.calibrate import cross_node_share

    assert cross_node_share([0, 0, 0, 0]) == 0.0
    assert cross_node_share([0, 0, 1, 1]) == 0.5
    assert cross_node_share([0, 1, 2, 3]) == 0.75
    # 3 of 4 on node 0: 1 - (9/16 + 1/16)
    assert cross_node_share([0, 0, 0, 1]) == pytest.approx(6 / 16)


def test_home_agent_occupancy_is_one_homes_round_past_two_homes_per_cross_node_transfer():
    from reclaimsim.calibrate import home_agent

    def figs(one, two, lone=50):
        # One line's own figure is no control (an owner batches operations): it must not
        # enter the derivation, so it is set far below both.
        return {"contended_line_1": fig(lone), "contended_lines_2_one_home": fig(one),
                "contended_lines_2_two_homes": fig(two)}

    # Two nodes, half the handoffs cross (r = 0.5): both lines on one home at 1000 ns a
    # round against 500 on two homes is the one agent's 2 r h: h = 1000 / (2 * 0.5).
    entry, note = home_agent(figs(1000, 500), [0, 0, 1, 1])
    assert entry["ns"] == 1000 and note is None
    assert "r = 0.500" in entry["source"]
    # Four nodes (r = 0.75): 900 / 1.5.
    entry, _ = home_agent(figs(900, 450), [0, 1, 2, 3])
    assert entry["ns"] == 600
    # One home within 10% of two homes: the agent does not limit, whatever one line did.
    entry, _ = home_agent(figs(219, 200, lone=20), [0, 0, 1, 1])
    assert entry["ns"] == 0
    entry, _ = home_agent(figs(221, 200), [0, 0, 1, 1])
    assert entry["ns"] == 221  # just past: 221 / (2 * 0.5)
    # One node: nothing crosses, nothing measured, and the profile is told why.
    entry, note = home_agent(figs(1000, 500), [0, 0])
    assert entry is None and "one node" in note
    # Without the homed checks (a host whose CPUs are on one node gives none), nothing:
    # the unhomed pair alone is not read.
    assert home_agent({"contended_line_1": fig(200), "contended_lines_2": fig(1000)}, [0, 1]) == (None, None)
    assert home_agent({}, [0, 1]) == (None, None)
