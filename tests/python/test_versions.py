"""The model beside a real kernel runs as that kernel's version (versions.model_of_kernel):
kernel-run on the host and in a VM set the model's kernel.version from the kernel's
release string, the nearest lower modeled version when it is not one, and say so."""

import json

from reclaimsim import _core
from reclaimsim.scenario import load_scenario
from reclaimsim.sidebyside import format_report
from reclaimsim.versions import model_of_kernel, names


def validated(sc: dict) -> dict:
    return json.loads(_core.validate_json(json.dumps(sc)))


def test_a_debian_release_string_runs_the_model_as_that_version_and_says_it_is_not_the_scenarios():
    sc = load_scenario("default")
    assert sc["kernel"]["version"] == "6.18"
    notes: list = []
    m = model_of_kernel(sc, "6.12.95+deb12-cloud-amd64", notes)
    assert m["kernel"]["version"] == "6.12"
    assert sc["kernel"]["version"] == "6.18"  # the scenario itself is not changed
    assert notes == ["the model runs as 6.12, the kernel's version (6.12.95+deb12-cloud-amd64), "
                     "not the scenario's kernel.version 6.18"]


def test_a_kernel_between_modeled_versions_runs_the_nearest_lower_one():
    notes: list = []
    # 6.15 has 6.14's aging rework but not 6.17's scan budget: between 6.12 and 6.18.
    m = model_of_kernel({"kernel": {}}, "6.15.2-arch1", notes)
    assert m["kernel"]["version"] == "6.12"
    assert "6.15.2-arch1 is not a modeled version" in notes[0] and "nearest lower" in notes[0]
    notes = []
    m = model_of_kernel({}, "5.10.0-35-amd64", notes)
    assert m["kernel"]["version"] == names()[0] == "6.1"
    assert "older than every modeled version" in notes[0]


def test_the_kernels_own_version_named_in_the_scenario_needs_no_note():
    notes: list = []
    m = model_of_kernel({"kernel": {"version": "7.3"}}, "7.3.4+deb13-amd64", notes)
    assert m["kernel"]["version"] == "7.3" and notes == []


def test_the_version_defaults_of_the_kernel_behavior_switches_follow_the_kernel():
    # Rotations entered lru_note_cost's anon/file balance in v6.2 (0538a82c39e9, "mm:
    # vmscan: make rotations a secondary factor in balancing anon vs file"): a 6.1 kernel
    # has no rotation term, a 6.12 one has it.
    sc = load_scenario("default")
    assert validated(model_of_kernel(sc, "6.1.0-41-amd64", []))["variants"]["rotation_cost"] is False
    assert validated(model_of_kernel(sc, "6.12.95", []))["variants"]["rotation_cost"] is True


def test_a_release_string_with_terminal_escapes_is_shown_escaped():
    notes: list = []
    model_of_kernel({}, "6.12.0\x1b]0;owned\x07", notes)
    assert "\x1b" not in notes[0] and "\\x1b" in notes[0]


def test_the_report_heading_names_the_model_version():
    rep = {"scenario": "s", "seed": 1, "reps": 1, "kernel": "6.12.95", "model_version": "6.12",
           "cgroup_version": 2, "wall_s": [1.0], "notes": [], "counters": []}
    assert "kernel 6.12.95 (model: 6.12)" in format_report(rep).splitlines()[0]


def test_an_ab_of_two_versions_names_the_rules_that_differ():
    # Between 6.12 and 6.18 the model's rules differ by MGLRU's aging rework, the three
    # refault rules, the type selection and the protected folios' placement of the
    # workingset rework (6.14), sort_folio's locked test (gone by 6.15), the scan
    # budget and proportional protection of af827e090489 (6.17), memory.stat's
    # pgscan_proactive split (6.15),
    # memory.reclaim's swappiness=max (6.16), lru_note_cost_unlock_irq (6.17) and 6.12's
    # swap shadow shrinker (gone with 6.18's swap table), shmem's swap readahead on zram
    # (gone with 6.14's swap cache bypass), the multi-memcg charge stock (6.16);
    # MGLRU's tiers and refs (6.14) differ too, which the model does not have as a rule.
    from reclaimsim.compare import compare, format_compare

    c = compare("file-zipf", a="kernel.version=6.12", b="kernel.version=6.18", seeds=1,
                overrides=["duration=20ms"], metrics=["pgscan_file"])
    names = {r["name"]: (r["a"], r["b"], r["kind"]) for r in c["rules"]}
    assert {n for n, (_, _, k) in names.items() if k == "rule"} == {
        "mglru_aging_feedback_rework", "mglru_scan_budget_nr_to_scan", "mglru_proportional_protection",
        "pgscan_proactive", "memory_reclaim_swappiness_max", "mglru_refault_recent_window",
        "mglru_refault_activate_in_fault", "mglru_refault_restore_rework",
        "swap_shadow_nodes_shrinkable", "lru_note_cost_unlock_irq", "mglru_type_selection_rework",
        "mglru_protected_to_head", "mglru_sort_locked_as_writeback", "mglru_placement_from_max_seq",
        "mglru_rejected_active_if_oldest", "mglru_tiers_rework", "mglru_promote_second_sighting",
        "shmem_swapin_skip_swapcache", "memcg_stock_multi"}
    assert names["mglru_aging_feedback_rework"][:2] == (False, True)
    assert names["pgscan_proactive"] == (False, True, "rule")
    assert names["swap_shadow_nodes_shrinkable"] == (True, False, "rule")
    # The slab credit's rule (v6.5) is in both versions, so not between them.
    assert "reclaim_slab_credit_root_only" not in names and not [n for n, r in names.items() if r[2] != "rule"]
    text = format_compare(c)
    assert "## kernel rules that differ between the sides" in text and "798c0330c2ca" in text
    # A rule set by hand on one side is that side's: no longer a difference.
    c = compare("file-zipf", a="kernel.version=6.12", b="kernel.version=6.18,kernel.rules.mglru_aging_feedback_rework=false",
                seeds=1, overrides=["duration=20ms"], metrics=["pgscan_file"])
    assert "mglru_aging_feedback_rework" not in {r["name"] for r in c["rules"]}
    # The same version on both sides differs in no rule, and prints no such section.
    c = compare("file-zipf", a="rotation_cost=false", b="rotation_cost=true", seeds=1,
                overrides=["duration=20ms"], metrics=["pgscan_file"])
    assert [r["name"] for r in c["rules"]] == ["rotation_cost"]


def test_a_side_on_another_version_takes_that_versions_switch_defaults():
    # 7.3 merged seed 003's dead-folio filter and seed 000's vmstat scan cost: a side that
    # names 7.3 runs them, though the scenario (6.18) leaves them off.
    from reclaimsim.scenario import apply_side

    sc = load_scenario("file-zipf")
    assert validated(sc)["variants"]["lru_add_dead_filter"] is False
    side = validated(apply_side(sc, {"kernel.version": "7.3"}))
    assert side["variants"]["lru_add_dead_filter"] is True and side["variants"]["vmstat_scan_cost"] is True
    # A switch the side or the scenario sets stays as set.
    side = validated(apply_side(sc, {"kernel.version": "7.3", "lru_add_dead_filter": False}))
    assert side["variants"]["lru_add_dead_filter"] is False


def test_a_custom_kernel_names_its_version_and_a_bad_one_is_refused_before_anything_runs():
    import subprocess
    import sys

    import pytest

    from reclaimsim._core import ScenarioError

    notes: list = []
    m = model_of_kernel({"kernel": {"version": "6.18"}}, "6.12.0-mybuild", notes, version="6.1")
    assert m["kernel"]["version"] == "6.1"
    assert notes == ["the model runs as 6.1, the kernel's version (6.12.0-mybuild by --kernel-version), "
                     "not the scenario's kernel.version 6.18"]
    with pytest.raises(ScenarioError, match="allowed 6.1, 6.12, 6.18, 7.3"):
        model_of_kernel({}, "6.12.0", [], version="6.13")
    p = subprocess.run([sys.executable, "-m", "reclaimsim.cli", "kernel-run", "default", "--kernel-version", "5.4"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.count("\n") == 1
    assert "--kernel-version '5.4': allowed 6.1, 6.12, 6.18, 7.3" in p.stderr


def test_kernel_compare_runs_each_model_side_as_its_kernels_version():
    from reclaimsim.kernelcompare import model_sides

    notes: list = []
    sc = load_scenario("file-zipf", ["duration=20ms"])
    sc.pop("compare", None)
    out = model_sides(sc, {}, {"rotation_cost": False}, 1, False, None,
                      ("6.12.95+deb12-cloud-amd64", "7.3.4+deb13-amd64"), notes)
    assert set(out) == {"A", "B"}
    assert notes == [
        "model A: the model runs as 6.12, the kernel's version (6.12.95+deb12-cloud-amd64), not the scenario's kernel.version 6.18",
        "model B: the model runs as 7.3, the kernel's version (7.3.4+deb13-amd64), not the scenario's kernel.version 6.18",
    ]
