//! Hostile and careless scenarios: each is refused with one line that names the field,
//! the value and what is allowed; the checks stay fast on huge inputs.

mod common;

use common::{assert_refused, refused, toml, within};
use reclaimsim_core::{sim, Error, Scenario};

#[test]
fn sizes_and_counts_beyond_what_the_model_holds_are_refused_with_field_value_and_range() {
    let base = |machine: &str, workload: &str| {
        format!("duration = \"10ms\"\n[machine]\n{machine}\n[[workload]]\n{workload}\n")
    };
    let m = "cpus = 4\nmemory_per_node = \"64M\"";
    // A node of 8 TiB: the PTE holds a 29-bit pfn, 2 TiB in all.
    assert_refused(
        &base(
            "cpus = 4\nmemory_per_node = \"8T\"",
            "type = \"usemem\"\nsize = \"1M\"",
        ),
        "scenario.machine.memory_per_node",
        &["8796093022208", "2T", "29-bit"],
    );
    // 2 TiB is the whole machine: two nodes of 2 TiB are too much, two of 1 TiB fit.
    assert_refused(
        &base(
            "nodes = 2\ncpus = 4\nmemory_per_node = \"2T\"",
            "type = \"usemem\"\nsize = \"1M\"",
        ),
        "scenario.machine.memory_per_node",
        &["1024G per node with 2 node(s)"],
    );
    assert!(Scenario::from_toml(&base(
        "nodes = 2\ncpus = 4\nmemory_per_node = \"1T\"",
        "type = \"usemem\"\nsize = \"1M\""
    ))
    .is_ok());
    // Swap beyond the 30-bit slot.
    assert_refused(
        &base(
            "cpus = 4\nmemory_per_node = \"64M\"\n[machine.swap]\nsize = \"5T\"",
            "type = \"usemem\"\nsize = \"1M\"",
        ),
        "scenario.machine.swap.size",
        &["5497558138880", "4T", "30-bit"],
    );
    // processes * threads overflowing 32 bits (65536 * 65536 wraps to 0).
    assert_refused(
        &base(
            m,
            "type = \"usemem\"\nsize = \"1M\"\nprocesses = 65536\nthreads = 65536",
        ),
        "scenario.workload[0].processes",
        &["65536 * 65536 = 4294967296 tasks", "1..=4096"],
    );
    // A CPU range of billions is refused without being expanded.
    assert_refused(
        &base(
            m,
            "type = \"usemem\"\nsize = \"1M\"\ncpus = \"0-4000000000\"",
        ),
        "scenario.workload[0].cpus",
        &["CPU 4000000000 does not exist", "0..=3"],
    );
    assert_refused(
        &base(
            m,
            "type = \"usemem\"\nsize = \"1M\"\nprocesses = 2\ncpus = \"1,1\"",
        ),
        "scenario.workload[0].cpus",
        &["CPU 1 is listed twice"],
    );
    // An area whose page indices do not fit in 32 bits (16 TiB wraps to 0 pages).
    assert_refused(
        &base(m, "type = \"usemem\"\nsize = \"16T\""),
        "scenario.workload[0].size",
        &["17592186044416", "16T - 4K"],
    );
    // A program's text is whole pages, and fits the page indices with the area.
    assert_refused(
        &base(m, "type = \"usemem\"\nsize = \"16K\"\ntext = 6000"),
        "scenario.workload[0].text",
        &["6000 bytes", "multiple of 4096"],
    );
    assert_refused(
        &base(m, "type = \"usemem\"\nsize = \"8T\"\ntext = \"8T\""),
        "scenario.workload[0].text",
        &["8796093022208 bytes", "16T - 4K"],
    );
    // One page of area and 2^32 - 1 of text is one page too many; 2^32 - 2 of text fit.
    assert_refused(
        &base(m, "type = \"usemem\"\nsize = \"4K\"\ntext = 17592186040320"),
        "scenario.workload[0].text",
        &["17592186040320 bytes"],
    );
    assert!(Scenario::from_toml(&base(
        m,
        "type = \"usemem\"\nsize = \"4K\"\ntext = 17592186036224"
    ))
    .is_ok());
    // A frame names its file in 24 bits: files per workload are bounded so that every
    // workload's files and mms fit.
    let files = |n: usize| {
        format!(
            "type = \"file_read\"\nfiles = [{}]",
            vec!["4096"; n].join(", ")
        )
    };
    assert!(Scenario::from_toml(&base(m, &files(reclaimsim_core::scenario::MAX_FILES))).is_ok());
    assert_refused(
        &base(m, &files(reclaimsim_core::scenario::MAX_FILES + 1)),
        "scenario.workload[0].files",
        &["1025 files", "at most 1024"],
    );
    assert_refused(
        &base(m, "type = \"file_read\"\nfiles = [\"1M\", \"20T\"]"),
        "scenario.workload[0].files[1]",
        &["21990232555520", "16T - 4K"],
    );
    assert_refused(
        &base(
            "cpus = 4096\nmemory_per_node = \"64M\"",
            "type = \"request_churn\"\nthreads = 2048\nrequest_size = \"256M\"",
        ),
        "scenario.workload[0].request_size",
        &["2048 workers", "page indices are 32-bit"],
    );
    // Time: a duration past 2^62 ns, a cost of more than 2^32 ns.
    assert_refused(
        &toml("", "").replace("duration = \"10ms\"", "duration = \"200000000000s\""),
        "scenario.duration",
        &["200000000000s", "too large"],
    );
    assert_refused(
        &toml("", "").replace("duration = \"10ms\"", "duration = \"200y\""),
        "scenario.duration",
        &["200y", "unknown time unit"],
    );
    assert_refused(
        &toml("", "").replace("duration = \"10ms\"", "duration = \"6000000000s\""),
        "scenario.duration",
        &["6000000000000000000 ns", "4611686018427387904"],
    );
    assert_refused(
        &toml("", "").replace("[machine]", "[costs]\npage_alloc = 9000000000\n[machine]"),
        "scenario.costs.page_alloc",
        &["9000000000 ns", "0..=4294967296"],
    );
    // Sizes beyond 64 bits are not silently saturated.
    assert_refused(
        &toml("", "").replace("size = \"1M\"", "size = \"100000000000G\""),
        "scenario.workload[0].size",
        &["100000000000G", "too large"],
    );
    // A million cgroups: refused before any per-cgroup work.
    let mut t = String::from(
        "duration = \"1ms\"\n[machine]\ncpus = 1\nmemory_per_node = \"64M\"\n[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n",
    );
    for i in 0..1_000_000 {
        t += &format!("[[cgroup]]\npath = \"/c{i}\"\n");
    }
    let (p, msg) = within(300, move || refused(&t));
    assert_eq!(p, "scenario.cgroup");
    assert!(
        msg.contains("1000000 cgroups") && msg.contains("4095"),
        "{msg}"
    );
}

#[test]
fn threads_per_core_must_divide_each_nodes_cpus() {
    let sc = |machine: &str| {
        format!("duration = \"10ms\"\n[machine]\n{machine}\nmemory_per_node = \"64M\"\n[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n")
    };
    // 12 CPUs on 2 nodes: 6 a node, cores of 2 or 3 threads fit, of 4 do not.
    for t in [1, 2, 3] {
        let ok = Scenario::from_toml(&sc(&format!(
            "nodes = 2\ncpus = 12\nthreads_per_core = {t}"
        )));
        assert!(ok.is_ok(), "{t}: {ok:?}");
    }
    assert_refused(
        &sc("nodes = 2\ncpus = 12\nthreads_per_core = 4"),
        "scenario.machine.threads_per_core",
        &[
            "4 threads per core with 12 CPUs on 2 node(s)",
            "allowed 1..=8",
            "multiple",
        ],
    );
    for t in [0, 9] {
        assert_refused(
            &sc(&format!("cpus = 72\nthreads_per_core = {t}")),
            "scenario.machine.threads_per_core",
            &[&format!("{t} threads per core"), "allowed 1..=8"],
        );
    }
}

#[test]
fn a_deep_cgroup_tree_is_validated_and_built_in_linear_time() {
    // 4095 levels: the paths alone are 4095 * 4096 / 2 * 3 bytes; a quadratic check of
    // paths against paths would compare far more.
    let mut t =
        String::from("duration = \"1ms\"\n[machine]\ncpus = 1\nmemory_per_node = \"64M\"\n");
    let mut p = String::new();
    for i in 0..4095 {
        p += &format!("/{}", i % 10);
        t += &format!("[[cgroup]]\npath = \"{p}\"\n");
    }
    t += &format!("[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\ncgroup = \"{p}\"\n");
    let r = within(300, move || {
        let sc = Scenario::from_toml(&t).map_err(|e| e.to_string())?;
        sim::Sim::build(&sc)
            .map(|s| s.mm.borrow().memcgs.len())
            .map_err(|e| e.to_string())
    });
    assert_eq!(r, Ok(4096));
    // One more is refused.
    let mut t = String::from(
        "duration = \"1ms\"\n[machine]\ncpus = 1\nmemory_per_node = \"64M\"\n[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n",
    );
    for i in 0..4096 {
        t += &format!("[[cgroup]]\npath = \"/c{i}\"\n");
    }
    assert_refused(&t, "scenario.cgroup", &["4096 cgroups", "4095"]);
}

#[test]
fn malformed_values_are_named_in_the_scenarios_words() {
    // A date where a size is expected (TOML has dates; no scenario field takes one).
    assert_refused(
        &toml("", "").replace("size = \"1M\"", "size = 1979-05-27"),
        "scenario.workload[0].size",
        &["1979-05-27", "date/time"],
    );
    // Not UTF-8.
    let mut bytes = toml("", "").into_bytes();
    bytes.extend_from_slice(b"name = \"\xff\"\n");
    match Scenario::from_toml_bytes(&bytes) {
        Err(Error::Scenario { path, msg, .. }) => {
            assert_eq!(path, "scenario");
            assert!(msg.contains("not UTF-8") && msg.contains("0xff"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
    // Deep nesting in a field nobody reads still ends in an error, not a stack overflow.
    let deep = format!("x = {}1{}\n", "[".repeat(100_000), "]".repeat(100_000));
    let (p, _) = refused(&toml(&deep, ""));
    assert!(p.starts_with("scenario"), "{p}");
    // Types: no Rust type names, no position in the internal JSON, the value shown.
    for (t, path, parts) in [
        (
            toml("", "").replace("cpus = 4", "cpus = 2.5"),
            "scenario.machine.cpus",
            &["2.5", "an integer in 0..=4294967295"][..],
        ),
        (
            toml("", "").replace("cpus = 4", "cpus = -1"),
            "scenario.machine.cpus",
            &["-1", "an integer in 0..=4294967295"][..],
        ),
        (
            toml("", "").replace("[machine]", "[machine]\nnodes = \"two\""),
            "scenario.machine.nodes",
            &["\"two\"", "an integer"][..],
        ),
        (
            toml("seed = true", ""),
            "scenario.seed",
            &["true", "an integer"][..],
        ),
        (
            toml("", "").replace("size = \"1M\"", "size = [1]"),
            "scenario.workload[0].size",
            &["a list", "expected bytes"][..],
        ),
        (
            toml("", "prefault = 3"),
            "scenario.workload[0].prefault",
            &["3", "true or false"][..],
        ),
        (
            toml("", "").replace("[machine]", "machine = 3\n[x]"),
            "scenario.machine",
            &["a table"][..],
        ),
    ] {
        let (p, m) = refused(&t);
        assert_eq!(p, path, "{m}");
        for x in parts {
            assert!(m.contains(x), "{x:?} not in {m:?}");
        }
        for w in ["u32", "u64", "f64", "struct", " at line "] {
            assert!(!m.contains(w), "{w:?} in {m:?}");
        }
    }
    // JSON the front may hand over: NaN is not a number, and the position in the JSON
    // text is not shown.
    let j = r#"{"duration": 1, "machine": {"cpus": 2, "memory_per_node": "1G"}, "workload": [{"type": "request_churn", "load": NaN}]}"#;
    match Scenario::from_json(j) {
        Err(Error::Scenario { path, msg, .. }) => {
            assert_eq!(path, "scenario.workload[0].load", "{msg}");
            assert!(!msg.contains("line"), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_workload_start_at_or_after_the_end_of_the_run_is_refused() {
    // duration = 10 ms; as a [[reclaim]] or [[lru_gen]] `at`, the start must come before.
    for start in ["\"10ms\"", "\"1s\""] {
        let (p, m) = refused(&toml("", &format!("start = {start}")));
        assert_eq!(p, "scenario.workload[0].start", "{m}");
        assert!(
            m.contains("ns: the workload must start before the end of the run (10000000 ns)"),
            "{m}"
        );
    }
    assert!(Scenario::from_toml(&toml("", "start = 9999999")).is_ok());
    // 2^64 - 1 ns (JSON carries it; TOML integers stop at 2^63 - 1).
    let j = r#"{"duration": "10ms", "machine": {"cpus": 2, "memory_per_node": "64M"}, "workload": [{"type": "usemem", "size": "1M", "start": 18446744073709551615}]}"#;
    match Scenario::from_json(j) {
        Err(Error::Scenario { path, msg, .. }) => {
            assert_eq!(path, "scenario.workload[0].start");
            assert!(msg.starts_with("18446744073709551615 ns: "), "{msg}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn usemem_rate_0_is_refused_saying_how_to_ask_for_no_limit() {
    assert_refused(
        &toml("", "rate = 0"),
        "scenario.workload[0].rate",
        &[
            "0 bytes per second",
            "allowed 1 or more",
            "leave `rate` out",
        ],
    );
    assert!(Scenario::from_toml(&toml("", "rate = 1")).is_ok());
}

#[test]
fn usemem_random_writes_needs_random_and_at_least_one() {
    assert_refused(
        &toml("", "random_writes = 10"),
        "scenario.workload[0].random_writes",
        &["10", "needs random = true"],
    );
    assert_refused(
        &toml("", "random = true\nrandom_writes = 0"),
        "scenario.workload[0].random_writes",
        &["0:", "allowed 1 or more", "size/8"],
    );
    assert!(Scenario::from_toml(&toml("", "random = true\nrandom_writes = 1")).is_ok());
}

#[test]
fn sizes_of_areas_files_and_requests_must_be_whole_pages() {
    let base = |workload: &str| {
        format!("duration = \"10ms\"\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n[[workload]]\n{workload}\n")
    };
    for (w, path, value) in [
        ("type = \"usemem\"\nsize = 4097", "size", "4097 bytes"),
        (
            "type = \"file_read\"\nfiles = [\"1M\", 8191]",
            "files[1]",
            "8191 bytes",
        ),
        (
            "type = \"request_churn\"\nrequest_size = 5000",
            "request_size",
            "5000 bytes",
        ),
    ] {
        assert_refused(
            &base(w),
            &format!("scenario.workload[0].{path}"),
            &[value, "allowed a multiple of 4096 in 4K..="],
        );
    }
    for w in [
        "type = \"usemem\"\nsize = 8192",
        "type = \"file_read\"\nfiles = [\"1M\", 8192]",
        "type = \"request_churn\"\nrequest_size = 8192",
    ] {
        assert!(Scenario::from_toml(&base(w)).is_ok(), "{w}");
    }
}

#[test]
fn shared_workload_fields_are_named_and_an_unknown_field_lists_the_allowed_ones() {
    let types = [
        "type = \"usemem\"\nsize = \"1M\"",
        "type = \"file_read\"\nfiles = [\"1M\"]",
        "type = \"request_churn\"",
        "type = \"trace\"\npath = \"/nonexistent\"",
    ];
    let base = |workload: &str| {
        format!("duration = \"10ms\"\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n[[workload]]\n{workload}\n")
    };
    for w in types {
        for (kv, field, parts) in [
            ("cgroup = 5", "cgroup", &["`5`", "expected a string"][..]),
            ("cpus = 5", "cpus", &["`5`", "expected a string"][..]),
            ("name = 5", "name", &["`5`", "expected a string"][..]),
            ("start = -1", "start", &["-1", "expected nanoseconds"][..]),
            (
                "copies = \"x\"",
                "copies",
                &["\"x\"", "expected an integer in 0..=4294967295"][..],
            ),
        ] {
            assert_refused(
                &base(&format!("{w}\n{kv}")),
                &format!("scenario.workload[0].{field}"),
                parts,
            );
        }
        let (p, m) = refused(&base(&format!("{w}\nfoo = 1")));
        assert_eq!(p, "scenario.workload[0].foo", "{m}");
        let listed: std::collections::BTreeSet<String> = m
            .split_once("expected one of ")
            .unwrap_or_else(|| panic!("no list in {m:?}"))
            .1
            .split(", ")
            .map(|f| f.trim_matches('`').to_string())
            .collect();
        // The list is exactly the fields the type has: those of its normalized form.
        let kind = w.split('"').nth(1).unwrap();
        let fields = normalized_fields(kind);
        assert_eq!(listed, fields, "{kind}: {m}");
        assert!(m.starts_with("unknown field `foo`"), "{m}");
    }
}

/// The fields a workload of type `kind` serializes (its normalized form), `copies`
/// included (left out when 1), `type` not.
fn normalized_fields(kind: &str) -> std::collections::BTreeSet<String> {
    let w = match kind {
        // access_model is echoed only when not per_access and random_writes only when
        // set (older results keep their bytes): such a usemem shows every field.
        "usemem" => {
            r#"{"type": "usemem", "size": 4096, "random": true, "random_writes": 8, "access_model": "sampled"}"#
        }
        "file_read" => r#"{"type": "file_read", "files": [4096]}"#,
        "request_churn" => r#"{"type": "request_churn"}"#,
        _ => r#"{"type": "trace", "path": "x"}"#,
    };
    let spec: reclaimsim_core::scenario::WorkloadSpec = serde_json::from_str(w).unwrap();
    let v = serde_json::to_value(&spec).unwrap();
    let mut keys: std::collections::BTreeSet<String> =
        v.as_object().unwrap().keys().cloned().collect();
    keys.remove("type");
    keys.insert("copies".into());
    keys
}

#[test]
fn lru_gen_enabled_against_kernel_lru_names_the_lru_as_the_scenario_spells_it() {
    assert_refused(
        &toml("", "").replace("[machine]", "[kernel.lru_gen]\nenabled = 7\n[machine]"),
        "scenario.kernel.lru_gen.enabled",
        &["0x7 turns on the multi-gen LRU but kernel.lru = \"classic\""],
    );
}

#[test]
fn built_in_scenarios_pass_validation() {
    let all = common::builtin_scenarios();
    for (name, text) in &all {
        if let Err(e) = Scenario::from_toml(text) {
            panic!("{name}: {e}");
        }
    }
    assert!(all.len() > 10, "{} scenarios", all.len());
}

/// Cgroup paths name cgroups inside the run's own tree: a `.` or `..` component (which
/// kernel-run would resolve beside or above its tree) is refused in every position, and
/// so are empty components; names that merely contain dots are cgroup names like any.
#[test]
fn cgroup_paths_that_leave_the_tree_are_refused() {
    let with = |path: &str| {
        format!(
            "duration = \"10ms\"\n[machine]\ncpus = 2\nmemory_per_node = \"64M\"\n\
             [[cgroup]]\npath = \"/a\"\n[[cgroup]]\npath = {path:?}\n\
             [[workload]]\ntype = \"usemem\"\nsize = \"1M\"\ncgroup = \"/a\"\n"
        )
    };
    for (path, part) in [
        ("/../rsim-r2-escape", "\"..\""),
        ("/a/..", "\"..\""),
        ("/a/../b", "\"..\""),
        ("/a/.", "\".\""),
        ("/./a", "\".\""),
    ] {
        assert_refused(
            &with(path),
            "scenario.cgroup[1].path",
            &[&format!("{path:?}"), part, "not a cgroup name"],
        );
    }
    for path in ["/a//b", "/a/"] {
        assert_refused(&with(path), "scenario.cgroup[1].path", &["absolute path"]);
    }
    for path in ["/a/..b", "/a/b.", "/...", "/a/.x"] {
        assert!(Scenario::from_toml(&with(path)).is_ok(), "{path}");
    }
}

/// Every string a scenario holds, keys too, is printable: an escape sequence (ESC, an
/// OSC title, a clear-screen), a line break, NUL, DEL or a C1 control in a name would
/// reach the terminal raw. The message names the field and shows the string escaped.
#[test]
fn control_characters_in_names_and_paths_are_refused_escaped() {
    let base = "duration = \"10ms\"\n[machine]\ncpus = 2\nmemory_per_node = \"64M\"\n";
    for bad in [
        "\u{1b}[2J",
        "\u{1b}]0;owned\u{7}",
        "a\nb",
        "a\u{0}b",
        "x\u{7f}",
        "x\u{9b}31m",
    ] {
        let esc = format!("{bad:?}");
        let esc = &esc[1..esc.len() - 1];
        // TOML's basic strings take \uXXXX escapes.
        let t = |s: &str| {
            s.chars()
                .map(|c| {
                    if c.is_control() {
                        format!("\\u{:04x}", c as u32)
                    } else {
                        c.to_string()
                    }
                })
                .collect::<String>()
        };
        let v = t(bad);
        assert_refused(
            &format!("name = \"{v}\"\n{base}[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n"),
            "scenario.name",
            &[esc, "control characters"],
        );
        assert_refused(
            &format!("{base}[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\nname = \"w{v}\"\n"),
            "scenario.workload[0].name",
            &[esc],
        );
        assert_refused(
            &format!(
                "{base}[[cgroup]]\npath = \"/a{v}\"\n[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n"
            ),
            "scenario.cgroup[0].path",
            &[esc],
        );
        // A key: refused before it is looked up as a field (an unknown field's message
        // would print it).
        assert_refused(
            &format!("{base}[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n\"k{v}\" = 1\n"),
            "scenario.workload[0]",
            &[esc],
        );
        let (_, m) = refused(&format!(
            "name = \"{v}\"\n{base}[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n"
        ));
        assert!(!m.chars().any(char::is_control), "{m:?}");
    }
    // Printable non-ASCII stays allowed.
    assert!(Scenario::from_toml(&format!(
        "name = \"prüfung ✓\"\n{base}[[workload]]\ntype = \"usemem\"\nsize = \"1M\"\n"
    ))
    .is_ok());
}
