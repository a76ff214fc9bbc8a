"""The lock-contention observer (`observe`, engine/perf_lock.rs): what perf lock reads of a
run beside the truth, and an observed comparison's unobserved half."""

import subprocess
import sys

import pytest

import reclaimsim
from reclaimsim._core import ScenarioError
from reclaimsim.compare import format_compare
from reclaimsim.metrics import metric


def test_on_two_cpus_perf_lock_reads_no_lru_lock_wait():
    # The host kernel-run compares with has 2 CPUs: a waiter there is always the pending-bit
    # spinner, which qspinlock never traces, so perf lock sees no lru_lock wait however
    # contended the lock is. The model observed the same way must read the same.
    r = reclaimsim.run("calib-anon-zram", overrides=["observe=perf-lock"])
    assert sum(l["contended"] for l in r.locks) > 100, r.locks  # the lock is contended
    assert [l["observed"]["contended"] for l in r.locks] == [0] * len(r.locks)
    assert metric(r.data, "perf.lru_lock_wait_total_ns") == 0.0


def _result(observe="perf-lock"):
    row = lambda caller, n, w, on, ow: {
        "name": "lru_lock", "caller": caller, "acquisitions": 10, "contended": n, "total_wait_ns": w,
        "max_wait_ns": w, "total_hold_ns": 1, "observed": {"contended": on, "total_wait_ns": ow, "max_wait_ns": ow},
    }
    return {"end_ns": 2_000_000_000, "scenario": {"observe": observe},
            "locks": [row("shrink_node", 5, 700, 2, 300), row("move_folios_to_lru", 3, 90, 1, 40)]}


def test_perf_metrics_read_the_traced_waiters_only():
    r = _result()
    assert metric(r, "perf.lock_wait_ns@shrink_node") == 300.0
    assert metric(r, "lock_wait_ns@shrink_node") == 700.0
    assert metric(r, "perf.lock_contended@move_folios_to_lru") == 1.0
    assert metric(r, "perf.lru_lock_wait_total_ns") == 340.0
    assert metric(r, "perf.lru_lock_wait_total_ns/s") == 170.0
    with pytest.raises(ScenarioError, match="reads waits and contentions only"):
        metric(r, "perf.lock_hold_ns@shrink_node")
    with pytest.raises(ScenarioError, match="not observed"):
        metric({**_result(), "scenario": {}}, "perf.lock_wait_ns@shrink_node")


def test_an_observed_comparison_also_runs_the_pair_unobserved():
    args = dict(a="rotation_cost=true", b="rotation_cost=false", seeds=1,
                metrics=["perf.lru_lock_wait_total_ns", "lru_lock_wait_total_ns", "pgscan_direct"])
    short = ["duration=300ms"]
    c = reclaimsim.compare("default", overrides=short + ["observe=perf-lock"], **args)
    plain = reclaimsim.compare("default", overrides=short, **{**args, "metrics": ["lru_lock_wait_total_ns", "pgscan_direct"]})
    assert c["observe"] == "perf-lock" and "unobserved" not in plain
    u = {m["name"]: m for m in c["unobserved"]["metrics"]}
    assert list(u) == ["lru_lock_wait_total_ns", "pgscan_direct"]  # perf.X is X there, once
    # The unobserved half is the plain comparison, run for run.
    for m in plain["metrics"]:
        assert (u[m["name"]]["a_mean"], u[m["name"]]["b_mean"]) == (m["a_mean"], m["b_mean"])
    # Observing costs the kernel: every traced event's samples lengthen waits and holds.
    obs = {m["name"]: m for m in c["metrics"]}
    assert obs["lru_lock_wait_total_ns"]["a_mean"] > u["lru_lock_wait_total_ns"]["a_mean"]
    assert 0 < obs["perf.lru_lock_wait_total_ns"]["a_mean"] <= obs["lru_lock_wait_total_ns"]["a_mean"]
    text = format_compare(c)
    assert "## the same pair unobserved (observe = none)" in text and "as perf-lock reads it" in text


@pytest.mark.parametrize("args, field", [
    (["run", "default", "--observe", "perf"], "--observe"),
    (["run", "default", "--set", "observe=perf"], "scenario.observe"),
])
def test_an_unknown_observer_is_refused_in_one_line(args, field):
    p = subprocess.run([sys.executable, "-m", "reclaimsim.cli", *args, "--no-progress"], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert field in p.stderr and "perf-lock-bpf" in p.stderr and "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


def test_a_kvm_guest_with_paravirt_spinlocks_is_recognised_from_its_boot_log():
    from reclaimsim.perflock import paravirt_spinlocks

    assert paravirt_spinlocks("[    0.107248] kvm-guest: PV spinlocks enabled\n")
    assert not paravirt_spinlocks("[    0.10] kvm-guest: PV spinlocks disabled, no host support\n")
    assert not paravirt_spinlocks("")


def test_on_paravirt_spinlocks_the_first_waiter_is_traced_too():
    # A guest's __pv_queued_spin_lock_slowpath has no pending spinner, so the 2-CPU case
    # that perf lock reads as empty on bare metal is read in full: every acquisition that
    # waited from another CPU than the holder's (the model's kswapd shares a CPU with a
    # thread, which the kernel's cannot inside a spinlock) fired the tracepoints.
    r = reclaimsim.run("calib-anon-zram", overrides=["observe=perf-lock", "machine.paravirt_spinlocks=true"])
    contended = sum(l["contended"] for l in r.locks)
    traced = sum(l["observed"]["contended"] for l in r.locks)
    assert contended > 100 and 0.9 * contended <= traced <= contended, (traced, contended)


@pytest.mark.parametrize("version, putback", [("6.18", "shrink_lruvec"), ("7.3", "move_folios_to_lru")])
def test_perf_names_the_inlined_callers_by_version(version, putback):
    # shrink_inactive_list is inlined into shrink_lruvec: its isolation is shrink_lruvec's,
    # and so is its putback until 7.x's move_folios_to_lru takes lru_lock for itself.
    import json

    from reclaimsim import _core
    from reclaimsim.perflock import perf_caller
    from reclaimsim.scenario import load_scenario
    from reclaimsim.versions import rules_in_force

    norm = json.loads(_core.validate_json(json.dumps(load_scenario("default", [f"kernel.version={version}"]))))
    rules = rules_in_force(norm)
    assert perf_caller("shrink_inactive_list", rules) == "shrink_lruvec"
    assert perf_caller("move_folios_to_lru", rules) == putback
    assert perf_caller("shrink_node", rules) == "shrink_node"
    # The rule alone moves it, whatever the version.
    assert perf_caller("move_folios_to_lru", {**rules, "move_folios_to_lru_self_locking": version == "6.18"}) != putback
