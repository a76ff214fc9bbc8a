//! Cost profiles: the precedence of the four layers, each value's origin, the built-in
//! hardware profiles, and the errors of bad profiles.

mod common;

use common::{tmp, toml};
use reclaimsim_core::engine::cost::CostTable;
use reclaimsim_core::engine::cost_profile::{builtin_names, builtins, resolve, CostProfile};
use reclaimsim_core::{Error, Scenario};

fn profile_file(name: &str, body: &str) -> String {
    tmp(
        name,
        format!("name = \"{name}\"\n[costs]\n{body}").as_bytes(),
    )
}

fn refused(t: &str) -> (String, String) {
    match Scenario::from_toml(t) {
        Err(Error::Scenario { path, msg, .. }) => (path, msg),
        other => panic!("expected a scenario error, got {other:?}"),
    }
}

#[test]
fn layers_apply_in_order_and_each_value_keeps_its_origin() {
    let d = CostTable::default();
    let p = profile_file(
        "p1.toml",
        "fault_entry = { ns = 1111, source = \"timed\" }\naccess_seq = { ns = 7, source = \"timed\" }\ncacheline_transfer = { ns = 33, source = \"ping-pong\" }\n",
    );
    // machine.profile sets cacheline_transfer and zram_write (laptop); the file overrides it; the
    // scenario's [costs] overrides the file's access_seq.
    let t = toml(&format!("costs_profile = {p:?}"), "")
        .replace("cpus = 4", "cpus = 4\nprofile = \"laptop\"")
        + "\n[costs]\naccess_seq = 9\n";
    let sc = Scenario::from_toml(&t).unwrap();
    let r = resolve(&sc).unwrap();
    assert_eq!(r.table.fault_entry, 1111);
    assert_eq!(r.table.access_seq, 9);
    assert_eq!(r.table.cacheline_transfer, 33);
    let laptop = CostProfile::builtin("laptop").unwrap();
    assert_eq!(r.table.zram_write, laptop.costs["zram_write"].ns);
    assert_ne!(laptop.costs["cacheline_transfer"].ns, 33);
    assert_eq!(r.table.page_zero, d.page_zero);
    let o = |k: &str| (r.origins[k].layer, r.origins[k].from.clone());
    assert_eq!(o("fault_entry"), ("costs_profile", p.clone()));
    assert_eq!(r.origins["fault_entry"].source, "timed");
    assert_eq!(o("access_seq"), ("costs", String::new()));
    assert_eq!(o("cacheline_transfer"), ("costs_profile", p.clone()));
    assert_eq!(o("zram_write"), ("machine.profile", "laptop".to_string()));
    assert_eq!(o("page_zero"), ("default", String::new()));
    // Every entry has an origin.
    assert_eq!(r.origins.len(), CostTable::names().len());
}

#[test]
fn the_run_is_charged_with_the_resolved_table() {
    // One thread writing 256 fresh pages: each first write is a fault whose zeroing is
    // page_zero. Raising page_zero by 10 us through a profile lengthens the run by
    // 256 * 10 us of virtual time (nothing else changes: no reclaim at this size).
    let base = toml("", "");
    let p = profile_file(
        "p2.toml",
        &format!(
            "page_zero = {{ ns = {}, source = \"x\" }}\n",
            CostTable::default().page_zero + 10_000
        ),
    );
    let with = base.replacen("duration", &format!("costs_profile = {p:?}\nduration"), 1);
    let run = |t: &str| common::run_json(&t.replace("duration = \"10ms\"", "duration = \"1s\""));
    let (a, b) = (run(&base), run(&with));
    let ns = |v: &serde_json::Value| v["workloads"][0]["runtime_ns"].as_u64().unwrap();
    assert_eq!(ns(&b) - ns(&a), 256 * 10_000);
    assert_eq!(
        b["costs"]["page_zero"]["origin"],
        format!("costs_profile {p}")
    );
    assert_eq!(a["costs"]["page_zero"]["origin"], "default");
}

#[test]
fn builtin_hardware_profiles_parse_and_cite_a_source_for_every_figure() {
    let names = builtin_names();
    for n in ["laptop", "server-2s-176c", "server-4n-1t", "skylake-sp-4s"] {
        assert!(names.contains(&n), "{n} not built in: {names:?}");
    }
    let all = builtins().expect("every built-in profile parses");
    assert_eq!(all.len(), names.len());
    for p in all {
        assert!(!p.costs.is_empty(), "{}: no figures", p.name);
        for (k, e) in &p.costs {
            assert!(e.source.len() > 40, "{}: {k}: no real source", p.name);
            assert!(e.ns > 0, "{}: {k} = 0", p.name);
        }
    }
}

#[test]
fn bad_profiles_are_refused_naming_the_field_and_the_value() {
    let (path, msg) = refused(&toml("", "").replace("cpus = 4", "cpus = 4\nprofile = \"cray\""));
    assert_eq!(path, "scenario.machine.profile");
    assert!(msg.contains("\"cray\"") && msg.contains("laptop"), "{msg}");

    let p = profile_file("bad1.toml", "fault_entr = { ns = 5, source = \"x\" }\n");
    let (path, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert_eq!(path, "scenario.costs_profile");
    assert!(
        msg.contains("costs.fault_entr") && msg.contains("fault_entry"),
        "{msg}"
    );

    let p = profile_file("bad2.toml", "fault_entry = { ns = 5 }\n");
    let (path, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert_eq!(path, "scenario.costs_profile");
    assert!(msg.contains("source"), "{msg}");

    let p = profile_file(
        "bad3.toml",
        "fault_entry = { ns = 99999999999999, source = \"x\" }\n",
    );
    let (_, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert!(
        msg.contains("costs.fault_entry = 99999999999999 ns"),
        "{msg}"
    );

    let (path, msg) = refused(&toml("costs_profile = \"/nonexistent/p.toml\"", ""));
    assert_eq!(path, "scenario.costs_profile");
    assert!(msg.contains("no such file"), "{msg}");

    let (_, msg) = refused(&toml("costs_profile = \"/dev/zero\"", ""));
    assert!(msg.contains("regular file"), "{msg}");
}

#[test]
fn profile_limits_are_inclusive_at_their_bound() {
    use reclaimsim_core::scenario::MAX_COST;
    // The largest cost a scenario allows is allowed in a profile too; one more is not.
    let p = profile_file(
        "max.toml",
        &format!("fault_entry = {{ ns = {MAX_COST}, source = \"x\" }}\n"),
    );
    let sc = Scenario::from_toml(&toml(&format!("costs_profile = {p:?}"), "")).unwrap();
    assert_eq!(resolve(&sc).unwrap().table.fault_entry, MAX_COST);
    let p = profile_file(
        "over.toml",
        &format!(
            "fault_entry = {{ ns = {}, source = \"x\" }}\n",
            MAX_COST + 1
        ),
    );
    let (_, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert!(msg.contains(&format!("allowed 0..={MAX_COST}")), "{msg}");

    // A profile file of exactly 1 MiB is read; one byte more is refused unread.
    let body = "name = \"big\"\n[costs]\nfault_entry = { ns = 5, source = \"x\" }\n";
    let pad = (1 << 20) - body.len() - 2;
    let exact = format!("{body}#{}\n", "x".repeat(pad));
    assert_eq!(exact.len(), 1 << 20);
    let p = tmp("exact.toml", exact.as_bytes());
    let sc = Scenario::from_toml(&toml(&format!("costs_profile = {p:?}"), "")).unwrap();
    assert_eq!(resolve(&sc).unwrap().table.fault_entry, 5);
    let p = tmp("big.toml", format!("{exact}#\n").as_bytes());
    let (path, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert_eq!(path, "scenario.costs_profile");
    assert!(msg.contains("at most 1048576 bytes"), "{msg}");

    // Not UTF-8.
    let p = tmp("latin1.toml", b"name = \"caf\xe9\"\n[costs]\n");
    let (_, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
    assert!(msg.contains("not UTF-8 text"), "{msg}");
}

#[test]
fn malformed_profile_entries_are_named_with_their_field_in_plain_words() {
    for (i, (entry, at, parts)) in [
        (
            "fault_entry = { ns = -5, source = \"x\" }",
            "costs.fault_entry.ns: ",
            &[
                "-5: allowed a whole number of nanoseconds >= 0",
                "0..=4294967296",
            ][..],
        ),
        (
            "fault_entry = { ns = 1.5, source = \"x\" }",
            "costs.fault_entry.ns: ",
            &["1.5: allowed a whole number of nanoseconds"][..],
        ),
        (
            "fault_entry = { ns = \"610\", source = \"x\" }",
            "costs.fault_entry.ns: ",
            &["\"610\": allowed a whole number of nanoseconds"][..],
        ),
        (
            "fault_entry = { ns = true, source = \"x\" }",
            "costs.fault_entry.ns: ",
            &["true: allowed a whole number of nanoseconds"][..],
        ),
        (
            "fault_entry = { ns = [5], source = \"x\" }",
            "costs.fault_entry.ns: ",
            &["expected a whole number of nanoseconds >= 0"][..],
        ),
        (
            "fault_entry = 610",
            "costs.fault_entry: ",
            &["`610`", "expected a table like { ns = 610, source = "][..],
        ),
        (
            "fault_entry = { ns = 5, source = 7 }",
            "costs.fault_entry.source: ",
            &["`7`", "expected a string"][..],
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let p = profile_file(&format!("entry{i}.toml"), &format!("{entry}\n"));
        let (path, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
        assert_eq!(path, "scenario.costs_profile");
        // The entry is the file's third line.
        assert!(
            msg.starts_with(&format!("{p}:3: not a cost profile: {at}")),
            "{entry}: {msg}"
        );
        for x in parts {
            assert!(msg.contains(x), "{entry}: {x:?} not in {msg:?}");
        }
        for w in ["u64", "ProfileEntry", "struct", "i64"] {
            assert!(!msg.contains(w), "{entry}: {w:?} in {msg:?}");
        }
    }
}

/// A profile that is not TOML, or holds a TOML date where a string goes, is refused in
/// one line that names the file's line and says what was written.
#[test]
fn a_profiles_syntax_error_and_a_date_name_their_line_in_one_line() {
    for (i, (body, want)) in [
        (
            "[costs\nfoo = 1\n",
            ":3: not a cost profile: invalid table header; expected",
        ),
        (
            "description = 1979-05-27\n",
            ":3: not a cost profile: description: a TOML date or time, expected a string",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let p = tmp(
            &format!("syntax{i}.toml"),
            format!("name = \"x\"\n\n{body}").as_bytes(),
        );
        let (path, msg) = refused(&toml(&format!("costs_profile = {p:?}"), ""));
        assert_eq!(path, "scenario.costs_profile");
        assert!(msg.starts_with(&format!("{p}{want}")), "{msg}");
        assert!(!msg.contains('\n'), "{msg:?}");
    }
}
