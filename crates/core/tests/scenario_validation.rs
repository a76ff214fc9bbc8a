//! Scenario input that used to be accepted by position, silently ignored, or refused
//! without naming the field: each is refused with one line naming the field, the value
//! and what is allowed.

mod common;

use common::{assert_refused, refused, refused_by, toml};
use reclaimsim_core::Scenario;

fn assert_json_refused(j: &str, path: &str, parts: &[&str]) {
    let (p, m) = refused_by(Scenario::from_json(j), j);
    assert_eq!(p, path, "{m}");
    for x in parts {
        assert!(m.contains(x), "{path}: {x:?} not in {m:?}");
    }
}

/// A minimal scenario as JSON with `machine` and `kernel` fields given.
fn json(machine_extra: &str, top_extra: &str) -> String {
    format!(
        r#"{{"duration": 10000000, "machine": {{"cpus": 4, "memory_per_node": "64M"{machine_extra}}}, "workload": [{{"type": "usemem", "size": "1M"}}]{top_extra}}}"#
    )
}

#[test]
fn a_table_given_as_an_array_is_refused() {
    let base = "duration = \"10ms\"\n";
    let wl = "[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n";
    let machine = "[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n";
    for (t, path) in [
        (
            format!("{base}kernel = [100]\n{machine}{wl}"),
            "scenario.kernel",
        ),
        (
            format!("{base}variants = [false]\n{machine}{wl}"),
            "scenario.variants",
        ),
        (
            format!("{base}{machine}swap = [\"1G\"]\n{wl}"),
            "scenario.machine.swap",
        ),
        (
            format!("{base}machine = [4, \"64M\"]\n{wl}"),
            "scenario.machine",
        ),
        (
            format!("{base}{machine}[[cgroup]]\npath = \"/a\"\nmemory = [\"1M\"]\n{wl}"),
            "scenario.cgroup[0].memory",
        ),
        (
            format!("{base}{machine}[[cgroup]]\npath = \"/a\"\nmemory.swap = [\"1M\"]\n{wl}"),
            "scenario.cgroup[0].memory.swap",
        ),
        (
            format!("{base}{machine}[kernel]\nlru_gen = [7]\n{wl}"),
            "scenario.kernel.lru_gen",
        ),
        (
            format!("{base}{machine}[kernel]\nrules = [true]\n{wl}"),
            "scenario.kernel.rules",
        ),
        (
            format!("{base}costs = [1]\n{machine}{wl}"),
            "scenario.costs",
        ),
        (
            format!("{base}reclaim = [[\"1ms\", \"1M\"]]\n{machine}{wl}"),
            "scenario.reclaim[0]",
        ),
        (
            format!("{base}{machine}[[workload]]\ntype = \"trace\"\npath = \"x.csv\"\ncsv = [1]\n"),
            "scenario.workload[0].csv",
        ),
    ] {
        assert_refused(&t, path, &["an array; expected a table"]);
    }
    // Through the JSON the front hands over too; a table is still a table.
    assert_json_refused(
        &json("", r#", "kernel": [100]"#),
        "scenario.kernel",
        &["an array; expected a table"],
    );
    assert!(Scenario::from_json(&json("", r#", "kernel": {"swappiness": 100}"#)).is_ok());
}

#[test]
fn workload_names_are_unique_after_copies_are_expanded() {
    let two = |a: &str, b: &str| {
        format!(
            "duration = \"10ms\"\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n\
             [[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n{a}\n\
             [[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n{b}\n"
        )
    };
    assert_refused(
        &two("name = \"w\"", "name = \"w\""),
        "scenario.workload[1].name",
        &["\"w\"", "workload[0]"],
    );
    // An explicit name that is another workload's generated one (type and position).
    assert_refused(
        &two("name = \"usemem1\"", ""),
        "scenario.workload[0].name",
        &["\"usemem1\"", "workload[1]"],
    );
    assert_refused(
        &two("", "name = \"usemem0\""),
        "scenario.workload[1].name",
        &["\"usemem0\"", "workload[0]"],
    );
    // copies > 1 with a name needs {i}, as a cgroup path does.
    assert_refused(
        &two("name = \"w\"\ncopies = 2", ""),
        "scenario.workload[0].name",
        &["\"w\"", "copies = 2", "{i}"],
    );
    // Numbered copies that collide with another workload's name.
    assert_refused(
        &two("name = \"w{i}\"\ncopies = 2", "name = \"w1\"").replace("cpus = 4", "cpus = 8"),
        "scenario.workload[2].name",
        &["\"w1\"", "workload[1]"],
    );
    // What stays accepted: distinct names, generated names, numbered copies.
    assert!(Scenario::from_toml(&two("name = \"a\"", "name = \"b\"")).is_ok());
    assert!(Scenario::from_toml(&two("", "")).is_ok());
    assert!(Scenario::from_toml(&two("copies = 2", "").replace("cpus = 4", "cpus = 8")).is_ok());
    assert!(Scenario::from_toml(
        &two("name = \"w{i}\"\ncopies = 2", "name = \"w\"").replace("cpus = 4", "cpus = 8")
    )
    .is_ok());
}

#[test]
fn a_kernel_rule_and_a_variant_setting_the_same_switch_must_agree() {
    let with = |rules: &str, variants: &str| {
        toml("", "").replace(
            "[machine]",
            &format!("[kernel.rules]\n{rules}\n[variants]\n{variants}\n[machine]"),
        )
    };
    let (p, m) = refused(&with("rotation_cost = false", "rotation_cost = true"));
    assert!(
        p.contains("variants.rotation_cost") || p.contains("kernel.rules.rotation_cost"),
        "{p}: {m}"
    );
    let line = format!("{p}: {m}");
    assert!(
        line.contains("variants.rotation_cost") && line.contains("kernel.rules.rotation_cost"),
        "{line}"
    );
    assert!(line.contains("true") && line.contains("false"), "{line}");
    assert!(
        refused(&with("vmstat_scan_cost = true", "vmstat_scan_cost = false"))
            .1
            .contains("kernel.rules.vmstat_scan_cost")
    );
    // The same value in both places, or each in one place, is fine.
    for (r, v) in [
        ("rotation_cost = false", "rotation_cost = false"),
        ("rotation_cost = false", ""),
        ("", "rotation_cost = false"),
        ("lru_add_dead_filter = true", "rotation_cost = false"),
    ] {
        let sc = Scenario::from_toml(&with(r, v)).unwrap_or_else(|e| panic!("{r} / {v}: {e}"));
        if !r.contains("lru_add") {
            assert!(!sc.variants.rotation_cost);
        }
    }
}

#[test]
fn file_read_theta_is_checked_whatever_the_pattern() {
    let fr = |pattern: &str, theta: &str| {
        format!(
            "duration = \"10ms\"\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n\
             [[workload]]\ntype = \"file_read\"\nfiles = [\"1M\"]\npattern = \"{pattern}\"\ntheta = {theta}\n"
        )
    };
    for pattern in ["seq", "uniform", "zipf"] {
        for theta in ["-5", "0", "0.0"] {
            assert_refused(
                &fr(pattern, theta),
                "scenario.workload[0].theta",
                &[theta.trim_end_matches(".0"), "a finite number > 0"],
            );
        }
        assert!(
            Scenario::from_toml(&fr(pattern, "1.2")).is_ok(),
            "{pattern}"
        );
    }
}

#[test]
fn a_csv_table_is_refused_unless_the_trace_is_csv() {
    let traces = format!("{}/../../tests/traces", env!("CARGO_MANIFEST_DIR"));
    let tr = |file: &str, extra: &str| {
        format!(
            "duration = \"10ms\"\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n\
             [[workload]]\ntype = \"trace\"\npath = \"{traces}/{file}\"\n{extra}\n"
        )
    };
    let csv = "csv = { obj_id = 1, header = false }";
    // oracleGeneral, by name (auto) or given.
    assert_refused(
        &tr("small.oracleGeneral", csv),
        "scenario.workload[0].csv",
        &["oracle_general", "csv"],
    );
    assert_refused(
        &tr(
            "small.oracleGeneral",
            &format!("format = \"oracle_general\"\n{csv}"),
        ),
        "scenario.workload[0].csv",
        &["oracle_general"],
    );
    assert_refused(
        &tr("small.txt", &format!("format = \"text\"\n{csv}")),
        "scenario.workload[0].csv",
        &["text"],
    );
    // A CSV trace takes it, given or found by name.
    assert!(Scenario::from_toml(&tr("small.csv", "csv = { obj_id = \"obj_id\" }")).is_ok());
    assert!(Scenario::from_toml(&tr(
        "small.csv",
        "format = \"csv\"\ncsv = { obj_id = \"obj_id\" }"
    ))
    .is_ok());
    assert!(Scenario::from_toml(&tr("small.oracleGeneral", "")).is_ok());
}

#[test]
fn a_non_string_for_a_named_value_lists_the_allowed_names() {
    let m = "[machine]";
    for (t, path, parts) in [
        (
            toml("", "").replace(m, "[kernel]\nlru = 5\n[machine]"),
            "scenario.kernel.lru",
            &["5", "allowed: classic, mglru"][..],
        ),
        (
            toml("observe = true", ""),
            "scenario.observe",
            &["true", "allowed: none, perf-lock, perf-lock-bpf"][..],
        ),
        (
            toml("", "").replace(m, "[variants]\nmemcg_stats = 5\n[machine]"),
            "scenario.variants.memcg_stats",
            &["5", "allowed: rstat, percpu_local, batched_local"][..],
        ),
        (
            toml("", "").replace(m, "[variants]\nmemcg_stats = []\n[machine]"),
            "scenario.variants.memcg_stats",
            &["allowed: rstat, percpu_local, batched_local"][..],
        ),
        (
            toml("", "").replace(m, "[variants]\nmemcg_stats = {}\n[machine]"),
            "scenario.variants.memcg_stats",
            &["allowed: rstat, percpu_local, batched_local"][..],
        ),
        (
            toml("", "").replace(m, "[machine.swap]\nsize = \"1M\"\ndevice = 1\n[machine]"),
            "scenario.machine.swap.device",
            &["1", "allowed: zram, ssd"][..],
        ),
        (
            toml("", "")
                .replace(
                    "type = \"usemem\"",
                    "type = \"file_read\"\nfiles = [\"1M\"]\npattern = 2",
                )
                .replace("size = \"1M\"", ""),
            "scenario.workload[0].pattern",
            &["2", "allowed: seq, uniform, zipf, hotscan"][..],
        ),
    ] {
        let (p, msg) = refused(&t);
        assert_eq!(p, path, "{msg}");
        for x in parts {
            assert!(msg.contains(x), "{path}: {x:?} not in {msg:?}");
        }
        assert!(!msg.contains("not a value the scenario can hold"), "{msg}");
    }
    // A string that is no name still lists them.
    assert_refused(
        &toml("", "").replace(m, "[kernel]\nlru = \"x\"\n[machine]"),
        "scenario.kernel.lru",
        &["`classic`", "`mglru`"],
    );
}

#[test]
fn an_integer_too_large_for_its_field_is_out_of_range() {
    // The front's JSON keeps the digits a person wrote (TOML stops at 2^63 - 1).
    assert_json_refused(
        &json("", "").replace("\"cpus\": 4", "\"cpus\": 99999999999999999999"),
        "scenario.machine.cpus",
        &["99999999999999999999 is out of range", "0..=4294967295"],
    );
    assert_json_refused(
        &json("", r#", "seed": 99999999999999999999"#),
        "scenario.seed",
        &[
            "99999999999999999999 is out of range",
            "0..=18446744073709551615",
        ],
    );
    assert_json_refused(
        &json("", r#", "kernel": {"swappiness": -99999999999999999999}"#),
        "scenario.kernel.swappiness",
        &["-99999999999999999999 is out of range"],
    );
    // A size, whose integer is bytes.
    assert_json_refused(
        &json("", "").replace(
            r#""memory_per_node": "64M""#,
            r#""memory_per_node": 99999999999999999999"#,
        ),
        "scenario.machine.memory_per_node",
        &["99999999999999999999 is out of range", "expected bytes"],
    );
    // Within 64 bits but not the field's 32.
    assert_refused(
        &toml("", "").replace("cpus = 4", "cpus = 5000000000"),
        "scenario.machine.cpus",
        &["5000000000 is out of range", "0..=4294967295"],
    );
    assert_refused(
        &toml("", "").replace("cpus = 4", "cpus = -1"),
        "scenario.machine.cpus",
        &["-1 is out of range", "an integer in 0..=4294967295"],
    );
    // Inside a workload table.
    assert_json_refused(
        &json("", "").replace(
            r#""size": "1M""#,
            r#""size": "1M", "threads": 99999999999999999999"#,
        ),
        "scenario.workload[0].threads",
        &["99999999999999999999 is out of range"],
    );
    // A fraction is no integer, whatever its size.
    assert_refused(
        &toml("", "").replace("cpus = 4", "cpus = 2.5"),
        "scenario.machine.cpus",
        &["2.5", "an integer in 0..=4294967295"],
    );
}

#[test]
fn a_cpu_list_with_an_empty_item_is_refused() {
    for list in ["1,,0", "0,1,", ",0", "0, ,1"] {
        assert_refused(
            &toml("", &format!("cpus = {list:?}")),
            "scenario.workload[0].cpus",
            &[&format!("{list:?}"), "empty item"],
        );
    }
    assert!(Scenario::from_toml(&toml("", "cpus = \" 1 , 0 \"")).is_ok());
    assert!(Scenario::from_toml(&toml("", "cpus = \"0-1,3\"")).is_ok());
}

#[test]
fn cgroup_names_a_cgroupfs_refuses_are_refused() {
    let with = |path: &str| {
        format!(
            "duration = \"10ms\"\n[machine]\ncpus = 2\nmemory_per_node = \"64M\"\n\
             [[cgroup]]\npath = \"/a\"\n[[cgroup]]\npath = {path:?}\n\
             [[workload]]\ntype = \"usemem\"\nsize = \"1M\"\ncgroup = \"/a\"\n"
        )
    };
    let long = "x".repeat(256);
    assert_refused(
        &with(&format!("/a/{long}")),
        "scenario.cgroup[1].path",
        &["256 bytes", "255"],
    );
    assert!(Scenario::from_toml(&with(&format!("/a/{}", "x".repeat(255)))).is_ok());
    for name in [
        "memory.max",
        "memory.swap.max",
        "cgroup.procs",
        "cgroup.anything",
        "memory.pressure",
    ] {
        assert_refused(
            &with(&format!("/a/{name}")),
            "scenario.cgroup[1].path",
            &[&format!("\"{name}\""), "interface file"],
        );
    }
    for name in [
        "memoryhog",
        "mem.max",
        "memory",
        "cgroup",
        "web.slice",
        "a.memory.max",
        // Not an interface file: a cgroupfs takes it.
        "memory.foo",
    ] {
        assert!(
            Scenario::from_toml(&with(&format!("/a/{name}"))).is_ok(),
            "{name}"
        );
    }
}

#[test]
fn an_unknown_kernel_version_says_to_name_the_version_to_run_as() {
    let (p, m) =
        refused(&toml("", "").replace("[machine]", "[kernel]\nversion = \"6.6\"\n[machine]"));
    assert_eq!(p, "scenario.kernel.version", "{m}");
    assert!(m.contains("6.1, 6.12, 6.18, 7.3"), "{m}");
    assert!(
        m.contains("for another kernel, name the modeled version it should run as"),
        "{m}"
    );
    assert!(!m.contains("runs as the newest"), "{m}");
}
