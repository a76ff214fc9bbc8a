"""kernel-run --vm's event histograms (tracehist.py): the options checked before anything
boots, the guest plan's entries, and the kernel's hist tables read into rows. The tables
below are written by hand in the format of kernel/trace/trace_events_hist.c's
hist_trigger_entry_print and hist_trigger_show (a .sym key prints its address in brackets
and then the symbol, a string key padded, a number right-aligned; then the totals)."""

import subprocess
import sys

import pytest

from reclaimsim import vm
from reclaimsim.sidebyside import KernelRunError
from reclaimsim.tracehist import hist_entries, hist_rows, kprobe_lines, model_rows, model_support, parse_hist, union_rows

WORKQUEUE_TABLE = """\
# event histogram
#
# trigger info: hist:keys=function.sym:vals=hitcount:sort=hitcount:size=2048 [active]
#

{ function: [ffffffff8a2f1e30] kernfs_notify_workfn                          } hitcount:          2
{ function: [ffffffff8a1c0a50] vmstat_update                                 } hitcount:          3
{ function: [ffffffff8a2a4c10] vmpressure_work_fn                            } hitcount:         31

Totals:
    Hits: 36
    Entries: 3
    Dropped: 0
"""

SWITCH_TABLE = """\
# event histogram
#
# trigger info: hist:keys=prev_comm,prev_state,next_comm:vals=hitcount:sort=hitcount:size=2048 if prev_comm == "init" [active]
#

{ prev_comm: init            , prev_state:          0, next_comm: kworker/1:0     } hitcount:          4
{ prev_comm: init            , prev_state:        256, next_comm: rcu_preempt     } hitcount:        150

Totals:
    Hits: 154
    Entries: 2
    Dropped: 7
"""


def test_a_hist_table_is_read_per_key_without_the_symbols_addresses():
    per_key, hits, dropped = parse_hist(WORKQUEUE_TABLE)
    assert per_key == {
        "function=kernfs_notify_workfn": {"hitcount": 2},
        "function=vmstat_update": {"hitcount": 3},
        "function=vmpressure_work_fn": {"hitcount": 31},
    }
    assert (hits, dropped) == (36, 0)


def test_a_table_of_several_keys_names_each_in_order():
    per_key, hits, dropped = parse_hist(SWITCH_TABLE)
    assert per_key == {
        "prev_comm=init,prev_state=0,next_comm=kworker/1:0": {"hitcount": 4},
        "prev_comm=init,prev_state=256,next_comm=rcu_preempt": {"hitcount": 150},
    }
    assert (hits, dropped) == (154, 7)


SHRINK_TABLE = """\
# event histogram
#
# trigger info: hist:keys=priority:vals=hitcount,nr_scanned,nr_reclaimed:sort=hitcount:size=2048 [active]
#

{ priority:         11 } hitcount:          2  nr_scanned:         64  nr_reclaimed:         60
{ priority:         12 } hitcount:         10  nr_scanned:        320  nr_reclaimed:        300

Totals:
    Hits: 12
    Entries: 2
    Dropped: 0
"""


def test_vals_are_summed_per_key_and_over_keys():
    entries = hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:priority:nr_scanned,nr_reclaimed"])
    assert entries[0]["trigger"] == "hist:keys=priority:vals=nr_scanned,nr_reclaimed"
    rows, _ = hist_rows(entries, [SHRINK_TABLE])
    assert list(rows.items()) == [
        ("hist:mm_vmscan_lru_shrink_inactive", 12),
        ("hist:mm_vmscan_lru_shrink_inactive.nr_reclaimed", 360),
        ("hist:mm_vmscan_lru_shrink_inactive.nr_scanned", 384),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=12}", 10),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=12}.nr_reclaimed", 300),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=12}.nr_scanned", 320),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=11}", 2),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=11}.nr_reclaimed", 60),
        ("hist:mm_vmscan_lru_shrink_inactive{priority=11}.nr_scanned", 64),
    ]


def test_rows_are_the_total_then_each_key_most_hits_first():
    entries = hist_entries(["workqueue:workqueue_execute_start:function.sym"])
    rows, dropped = hist_rows(entries, [WORKQUEUE_TABLE])
    assert list(rows.items()) == [
        ("hist:workqueue_execute_start", 36),
        ("hist:workqueue_execute_start{function=vmpressure_work_fn}", 31),
        ("hist:workqueue_execute_start{function=vmstat_update}", 3),
        ("hist:workqueue_execute_start{function=kernfs_notify_workfn}", 2),
    ]
    assert dropped == 0
    assert "does not fire this event" in model_support(entries[0])


def test_a_key_one_rep_did_not_hit_is_zero_in_the_others():
    reps = [{"pgscan_anon": 5, "hist:e": 3, "hist:e{k=1}": 3}, {"pgscan_anon": 6, "hist:e": 2, "hist:e{k=2}": 2}]
    union_rows(reps)
    assert reps[0] == {"pgscan_anon": 5, "hist:e": 3, "hist:e{k=1}": 3, "hist:e{k=2}": 0}
    assert reps[1] == {"pgscan_anon": 6, "hist:e": 2, "hist:e{k=2}": 2, "hist:e{k=1}": 0}


def test_specs_become_triggers_on_their_event_directories():
    got = hist_entries([
        "kprobes:prio:prio",
        "sched:sched_switch:prev_comm,next_comm if prev_state == 256",
    ])
    assert [(g["event"], g["trigger"], g["name"]) for g in got] == [
        ("kprobes/prio", "hist:keys=prio", "prio"),
        ("sched/sched_switch", "hist:keys=prev_comm,next_comm if prev_state == 256", "sched_switch"),
    ]
    assert (got[1]["keys"], got[1]["vals"], got[1]["filter"]) == (["prev_comm", "next_comm"], [], "prev_state == 256")
    assert kprobe_lines(["prio  vmpressure_prio   prio=%dx:s32"]) == ["p:prio vmpressure_prio prio=%dx:s32"]
    plan = vm.guest_plan(
        {"kernel": {"swappiness": 60, "watermark_scale_factor": 10}, "machine": {}, "workload": []},
        1, [], [], False, None, got, ["p:prio vmpressure_prio prio=%dx:s32"],
    )
    assert plan["hists"] == [{"event": g["event"], "trigger": g["trigger"]} for g in got]
    assert plan["kprobes"] == ["p:prio vmpressure_prio prio=%dx:s32"]


BUCKET_TABLE = """\
# event histogram
#
# trigger info: hist:keys=common_timestamp.buckets=100000000:vals=hitcount:sort=hitcount:size=2048 [active]
#

{ common_timestamp: ~ 2700000000-2799999999 } hitcount:          4
{ common_timestamp: ~ 12800000000-12899999999 } hitcount:         17

Totals:
    Hits: 21
    Entries: 2
    Dropped: 0
"""


def test_a_bucketed_key_is_its_range():
    entries = hist_entries(["kprobes:age:common_timestamp.buckets=100000000"])
    assert entries[0]["trigger"] == "hist:keys=common_timestamp.buckets=100000000"
    assert entries[0]["keys"] == ["common_timestamp.buckets=100000000"]
    rows, _ = hist_rows(entries, [BUCKET_TABLE])
    assert list(rows.items()) == [
        ("hist:age", 21),
        ("hist:age{common_timestamp=12800000000-12899999999}", 17),
        ("hist:age{common_timestamp=2700000000-2799999999}", 4),
    ]


@pytest.mark.parametrize("spec", [
    "sched_switch:prev_comm",             # no subsystem
    "kprobes:age:common_timestamp.buckets=0",        # an empty bucket
    "kprobes:age:common_timestamp.usecs.buckets=10",  # two modifiers (the kernel takes one)
    "sched:sched_switch",                 # no keys
    "sched/x:sched_switch:prev_comm",     # a path, not a name
    "sched:sched_switch:prev comm",       # a space in the keys
    "sched:sched_switch:prev_comm:a.b",   # a modifier on a value
    "sched:sched_switch:prev_comm\nx",    # two lines
])
def test_a_malformed_spec_is_refused_with_the_format(spec):
    with pytest.raises(KernelRunError, match="--trace-hist .*allowed SUBSYSTEM:EVENT:KEYS"):
        hist_entries([spec])


def test_one_histogram_per_event():
    with pytest.raises(KernelRunError, match="sched_switch has a histogram already"):
        hist_entries(["sched:sched_switch:prev_comm", "sched:sched_switch:next_comm"])


@pytest.mark.parametrize("d", ["vmpressure_prio", "p:prio vmpressure_prio", "prio ../x", "prio f\nx"])
def test_a_malformed_kprobe_is_refused_with_the_format(d):
    with pytest.raises(KernelRunError, match="--kprobe .*allowed 'NAME SYMBOL"):
        kprobe_lines([d])


def _refused(*args):
    r = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "kernel-run", *args], capture_output=True, text=True)
    assert r.returncode == 2, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    return r.stderr


def test_the_options_need_vm_and_a_bad_one_is_refused_before_anything_boots():
    assert "--trace-hist kprobes:prio:prio: only with --vm" in _refused("calib-zipf", "--trace-hist", "kprobes:prio:prio")
    assert "--kprobe" in _refused("calib-zipf", "--kprobe", "prio vmpressure_prio")
    err = _refused("calib-zipf", "--vm", "--kernel", "/nonexistent/bzImage", "--trace-hist", "nonsense")
    assert "--trace-hist 'nonsense': allowed" in err


def _guest_rep(*tables):
    """A calib-zipf rep of the guest's document whose event histograms are `tables`."""
    return {
        "wall_s": 1.0, "vmstat": {"pgscan_file": 10},
        "cgroups": {"/reader": {"memory.stat": {"file": 0}, "memory.events": {}}},
        "processes": [{"workload": 0, "threads": [{"accesses": 5, "hits": 1, "misses": 4, "major_faults": 4,
                                                   "minor_faults": 0, "elapsed_ns": 10**9}]}],
        "reclaim_writes": [], "hists": list(tables),
    }


def _fake_kernel(monkeypatch, tmp_path):
    """kernel-run --vm with no kernel to fetch and no prerequisites to check."""
    k = vm.Kernel(tmp_path / "vmlinuz", "6.12.95+deb12-cloud-amd64")
    monkeypatch.setattr(vm, "resolve_kernel", lambda spec, progress=None: k)
    monkeypatch.setattr(vm, "check_prerequisites", lambda: None)


def test_kernel_run_vm_sends_the_triggers_and_reports_every_reps_keys(monkeypatch, tmp_path):
    from reclaimsim.scenario import load_scenario

    _fake_kernel(monkeypatch, tmp_path)
    other = WORKQUEUE_TABLE.replace("vmstat_update", "psi_avgs_work").replace("Dropped: 0", "Dropped: 4")
    sent = {}

    def fake_run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None, hists=None, kprobes=None):
        sent.update(plan=vm.guest_plan(norm, reps, nprocs, [], False, after, hists, kprobes))
        return {"reps": [_guest_rep(WORKQUEUE_TABLE), _guest_rep(other)], "accel_how": "tcg (asked)", "accel": accel,
                "kernel": kernel.release}

    monkeypatch.setattr(vm, "run_in_vm", fake_run_in_vm)
    monkeypatch.setattr(vm, "simulate", lambda norm, runs, progress=None, per_cgroup=False, locks=None, tracepoints=None: [{"pgscan_file": 10}] * runs)
    data = load_scenario("calib-zipf", ["workload[0].accesses=5"])
    rep = vm.kernel_run_vm(
        data, 2, None, "tcg", 60, model_costs="table",
        trace_hist=("workqueue:workqueue_execute_start:function.sym",), kprobes=("prio vmpressure_prio prio=%dx:s32",),
    )
    assert sent["plan"]["hists"] == [{"event": "workqueue/workqueue_execute_start", "trigger": "hist:keys=function.sym"}]
    assert sent["plan"]["kprobes"] == ["p:prio vmpressure_prio prio=%dx:s32"]
    rows = {r["name"]: r for r in rep["counters"]}
    assert rows["hist:workqueue_execute_start"]["kernel_values"] == [36, 36]
    assert rows["hist:workqueue_execute_start{function=vmstat_update}"]["kernel_values"] == [3, 0]
    assert rows["hist:workqueue_execute_start{function=psi_avgs_work}"]["kernel_values"] == [0, 3]
    assert not rows["hist:workqueue_execute_start"]["comparable"]
    assert rows["pgscan_file"]["comparable"]
    assert any("dropped 4 hits" in n for n in rep["notes"])


def test_model_support_names_what_the_model_cannot_key_or_sum():
    inactive = hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:nid,priority:nr_scanned,nr_reclaimed"])[0]
    assert model_support(inactive) is None
    pid = hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:common_pid"])[0]
    assert "no field common_pid" in model_support(pid)
    dirty = hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:priority:nr_dirty"])[0]
    assert "no field nr_dirty" in model_support(dirty)
    filtered = hist_entries(["vmscan:mm_vmscan_lru_shrink_active:priority if nr_taken > 4"])[0]
    assert "filter" in model_support(filtered)
    assert "does not fire" in model_support(hist_entries(["sched:sched_switch:next_comm"])[0])
    isolate = hist_entries(["vmscan:mm_vmscan_lru_isolate:lru,order:nr_requested,nr_scanned,nr_skipped,nr_taken"])[0]
    assert model_support(isolate) is None
    # Each event has its own keys: the isolation is not per priority, the shrink not per list.
    assert "no field priority" in model_support(hist_entries(["vmscan:mm_vmscan_lru_isolate:priority"])[0])
    assert "no field lru" in model_support(hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:lru"])[0])
    assert "no field highest_zoneidx" in model_support(hist_entries(["vmscan:mm_vmscan_lru_isolate:highest_zoneidx"])[0])


def test_the_models_table_is_summed_over_the_keys_the_trigger_names():
    table = [
        {"event": "mm_vmscan_lru_shrink_inactive", "nid": 0, "priority": 12, "hitcount": 3, "nr_scanned": 6, "nr_reclaimed": 5},
        {"event": "mm_vmscan_lru_shrink_inactive", "nid": 1, "priority": 12, "hitcount": 1, "nr_scanned": 2, "nr_reclaimed": 2},
        {"event": "mm_vmscan_lru_shrink_inactive", "nid": 1, "priority": 11, "hitcount": 5, "nr_scanned": 20, "nr_reclaimed": 9},
        {"event": "mm_vmscan_lru_shrink_active", "nid": 0, "priority": 12, "hitcount": 7, "nr_taken": 9,
         "nr_active": 0, "nr_deactivated": 9, "nr_referenced": 0},
    ]
    e = hist_entries(["vmscan:mm_vmscan_lru_shrink_inactive:priority:nr_reclaimed"])
    assert model_rows(e, table) == {
        "hist:mm_vmscan_lru_shrink_inactive": 9,
        "hist:mm_vmscan_lru_shrink_inactive.nr_reclaimed": 16,
        "hist:mm_vmscan_lru_shrink_inactive{priority=11}": 5,
        "hist:mm_vmscan_lru_shrink_inactive{priority=11}.nr_reclaimed": 9,
        "hist:mm_vmscan_lru_shrink_inactive{priority=12}": 4,
        "hist:mm_vmscan_lru_shrink_inactive{priority=12}.nr_reclaimed": 7,
    }


SHRINKER_TABLE = """\
# event histogram
#
# trigger info: hist:keys=shrink.sym,priority:vals=hitcount,cache_items,total_scan:sort=hitcount:size=2048 [active]
#

{ shrink: [ffffffff9a2b61d0] scan_shadow_nodes                             , priority:          0 } hitcount:          4  cache_items:       1528  total_scan:       1064
{ shrink: [ffffffff9a2b61d0] scan_shadow_nodes                             , priority:          1 } hitcount:          9  cache_items:       2008  total_scan:       1271

Totals:
    Hits: 13
    Entries: 2
    Dropped: 0
"""


def test_the_shrinker_rows_of_both_sides_are_named_alike():
    # The kernel's .sym key prints the address and the symbol; the model's table names its
    # one shrinker by the symbol: the rows line up.
    e = hist_entries(["vmscan:mm_shrink_slab_start:shrink.sym,priority:cache_items,total_scan"])
    assert model_support(e[0]) is None
    kernel, _ = hist_rows(e, [SHRINKER_TABLE])
    table = [
        {"event": "mm_shrink_slab_start", "shrink": "scan_shadow_nodes", "nid": 0, "priority": 1, "hitcount": 9,
         "nr_objects_to_shrink": 500, "cache_items": 1939, "delta": 960, "total_scan": 1290},
        {"event": "mm_shrink_slab_start", "shrink": "scan_shadow_nodes", "nid": 0, "priority": 0, "hitcount": 5,
         "nr_objects_to_shrink": 300, "cache_items": 1583, "delta": 780, "total_scan": 1117},
        {"event": "mm_shrink_slab_end", "shrink": "scan_shadow_nodes", "nid": 0, "hitcount": 9,
         "unused_scan": 500, "new_scan": 100, "retval": 700, "total_scan": 30},
    ]
    model = model_rows(e, table)
    assert list(model) == list(kernel)
    assert model["hist:mm_shrink_slab_start{shrink=scan_shadow_nodes,priority=1}.cache_items"] == 1939
    assert kernel["hist:mm_shrink_slab_start{shrink=scan_shadow_nodes,priority=1}.cache_items"] == 2008
    # The end event has no priority; a shrinker keyed by address is the kernel's alone.
    assert "no field priority" in model_support(hist_entries(["vmscan:mm_shrink_slab_end:priority"])[0])
    end = hist_entries(["vmscan:mm_shrink_slab_end:shrink.sym:retval"])
    assert model_rows(end, table) == {
        "hist:mm_shrink_slab_end": 9,
        "hist:mm_shrink_slab_end.retval": 700,
        "hist:mm_shrink_slab_end{shrink=scan_shadow_nodes}": 9,
        "hist:mm_shrink_slab_end{shrink=scan_shadow_nodes}.retval": 700,
    }
    assert "no field shrink" in model_support(hist_entries(["vmscan:mm_shrink_slab_start:shrink"])[0])


@pytest.mark.parametrize("lru", ["classic", "mglru"])
def test_kernel_run_vm_sets_the_models_table_beside_the_kernels(monkeypatch, tmp_path, lru):
    """The model side runs for real (calib-zipf cut short; the guest is 6.12, whose MGLRU
    fires shrink_inactive from evict_folios as its classic LRU does from
    shrink_inactive_list): its rows are compared, and their sums are its own pgsteal_file
    (the kernel counts it from the traced variable); an event the model does not fire
    stays the kernel's."""
    from reclaimsim.scenario import load_scenario

    _fake_kernel(monkeypatch, tmp_path)

    def fake_run_in_vm(norm, nprocs, reps, kernel, accel, timeout, progress=None, after=None, hists=None, kprobes=None):
        rep = _guest_rep(SHRINK_TABLE, WORKQUEUE_TABLE)
        return {"reps": [rep], "accel_how": "tcg (asked)", "accel": accel, "kernel": kernel.release}

    monkeypatch.setattr(vm, "run_in_vm", fake_run_in_vm)
    data = load_scenario("calib-zipf", ["workload[0].accesses=100000", f"kernel.lru={lru}"])
    rep = vm.kernel_run_vm(
        data, 1, None, "tcg", 60, model_costs="table",
        trace_hist=("vmscan:mm_vmscan_lru_shrink_inactive:priority:nr_scanned,nr_reclaimed",
                    "workqueue:workqueue_execute_start:function.sym"),
    )
    rows = {r["name"]: r for r in rep["counters"]}
    total = rows["hist:mm_vmscan_lru_shrink_inactive.nr_reclaimed"]
    assert total["comparable"] and total["kernel_mean"] == 360
    assert total["sim"] == rows["pgsteal_file"]["sim"] > 0
    per_prio = [r for n, r in rows.items() if n.startswith("hist:mm_vmscan_lru_shrink_inactive{") and n.endswith(".nr_reclaimed")]
    assert sum(r["sim"] for r in per_prio) == total["sim"]
    assert all(r["comparable"] for r in per_prio)
    assert not rows["hist:workqueue_execute_start"]["comparable"]
    assert rows["hist:workqueue_execute_start"]["diff_pct"] is None  # no model value to differ
    assert total["diff_pct"] is not None
    assert "does not fire" in rows["hist:workqueue_execute_start{function=vmpressure_work_fn}"]["why_not"]


def test_the_report_fits_long_names_and_gives_a_shared_reason_once():
    from reclaimsim.sidebyside import format_report

    def row(name, comparable, why=None):
        r = {"name": name, "kernel_mean": 5.0, "kernel_cv": 0.0, "kernel_values": [5], "sim": 4.0, "sim_cv": 0.0,
             "diff_pct": -20.0, "comparable": comparable}
        if why:
            r["why_not"] = why
        return r

    long = "hist:workqueue_execute_start{function=vmpressure_work_fn}"
    rep = {"scenario": "s", "seed": 1, "reps": 1, "kernel": "k", "cgroup_version": 2, "wall_s": [1.0], "notes": [],
           "counters": [row("pgscan_file", True), row("hist:workqueue_execute_start", False, "no events"),
                        row(long, False, "no events")]}
    lines = format_report(rep).splitlines()
    body = [line for line in lines if line.startswith(("counter", "pgscan_file", "hist:"))]
    # the name column is as wide as the longest name, on every line
    w = len(long)
    names = ["counter", "pgscan_file", "hist:workqueue_execute_start", long]
    assert [line[:w].rstrip() for line in body] == names
    assert all(line[w] == " " and line[w + 1:].lstrip()[0] in "k5" for line in body)
    assert body[2].endswith("(not comparable: no events)")
    assert body[3].endswith("(not comparable: as above)")
