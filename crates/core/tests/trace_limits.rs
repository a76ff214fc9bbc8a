//! Trace inputs: empty traces are refused by validation and run alike; huge objects and
//! DAMON regions are errors naming the record, not allocations; trace-gen's shuffle
//! respects the memory limit and stops on request.

mod common;

use common::{tmp, within};
use reclaimsim_core::{sim, trace, Error, Scenario};

fn trace_scenario(path: &str, extra: &str) -> String {
    format!(
        "duration = \"1s\"\n[machine]\ncpus = 2\nmemory_per_node = \"64M\"\n[[cgroup]]\npath = \"/t\"\nmemory.max = \"16M\"\n[[workload]]\ntype = \"trace\"\ncgroup = \"/t\"\npath = \"{path}\"\n{extra}\n"
    )
}

#[test]
fn empty_traces_are_refused_by_validation_and_run_alike() {
    for (name, data, extra) in [
        ("empty.txt", &b""[..], ""),
        ("comments.txt", &b"# nothing\n\n"[..], ""),
        ("header.csv", &b"obj_id,obj_size\n"[..], ""),
        ("empty.oracleGeneral", &b""[..], ""),
        ("empty.json", &b"[]"[..], ""),
        (
            "zero-rate.json",
            &br#"[{"snapshots": [{"regions": [{"start": 0, "end": 8192, "nr_accesses": 0}]}]}]"#[..],
            "",
        ),
    ] {
        let p = tmp(name, data);
        let t = trace_scenario(&p, extra);
        let e = Scenario::from_toml(&t).expect_err(name);
        let msg = e.to_string();
        assert!(matches!(e, Error::Trace { .. }), "{name}: {msg}");
        assert!(
            msg.contains(name) && msg.contains("no requests"),
            "{name}: {msg}"
        );
        // run_json validates the same way: no run of 0 requests.
        let json = serde_json::to_string(
            &serde_json::to_value(toml::from_str::<toml::Value>(&t).unwrap()).unwrap(),
        )
        .unwrap();
        let e2 = reclaimsim_core::run_json(&json, &mut |_, _| true).expect_err(name);
        assert_eq!(e2.to_string(), msg);
        assert_eq!(
            reclaimsim_core::validate_json(&json)
                .expect_err(name)
                .to_string(),
            msg
        );
    }
}

#[test]
fn huge_trace_objects_and_damon_regions_are_errors_not_allocations() {
    // One CSV object of 10^15 bytes: 2.4e11 pages, beyond the 32-bit page index.
    let p = tmp("huge.csv", b"obj_id,obj_size\n1,1000000000000000\n");
    let sc = Scenario::from_toml(&trace_scenario(&p, "")).unwrap();
    let e = within(300, move || sim::run(&sc, &mut |_, _| true).map(|_| ())).expect_err("refused");
    let msg = e.to_string();
    assert!(matches!(e, Error::Trace { .. }), "{msg}");
    assert!(
        msg.contains("record 1")
            && msg.contains("1000000000000000 bytes")
            && msg.contains("32-bit"),
        "{msg}"
    );
    // An object that fits the page index but not the memory budget.
    let p = tmp("big.csv", b"obj_id,obj_size\n1,4096\n2,1099511627776\n");
    let sc = Scenario::from_toml(&trace_scenario(&p, "")).unwrap();
    let e = within(300, move || {
        sim::run_with(&sc, false, Some(256 << 20), &mut |_, _| true).map(|_| ())
    })
    .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("record 2") && msg.contains("memory budget") && msg.contains("--max-memory"),
        "{msg}"
    );
    // A DAMON region of 2^60 bytes at a tiny rate.
    let p = tmp(
        "huge-region.json",
        br#"[{"snapshots": [{"regions": [{"start": 0, "end": 1152921504606846976, "nr_accesses": 0.0001}]}]}]"#,
    );
    let e = Scenario::from_toml(&trace_scenario(&p, "")).expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.contains("281474976710656 pages") && msg.contains("4294967295"),
        "{msg}"
    );
    // Addresses beyond 64 bits, NaN-like counts.
    for body in [
        r#"[{"snapshots": [{"regions": [{"start": 0, "end": 1e30, "nr_accesses": 1}]}]}]"#,
        r#"[{"snapshots": [{"regions": [{"start": 0, "end": 4096, "nr_accesses": -1}]}]}]"#,
        r#"[{"intervals": {"sample_us": 0}, "snapshots": [{"regions": [{"start": 0, "end": 4096, "nr_accesses": 1}]}]}]"#,
    ] {
        let e = trace::probe_bytes(
            "r.json",
            body.as_bytes().to_vec(),
            reclaimsim_core::scenario::TraceFormat::Auto,
            None,
            1,
        )
        .expect_err(body);
        assert!(matches!(e, Error::Trace { record: 1, .. }), "{e}");
    }
    // A text trace without line breaks is not read whole into one line.
    let e = trace::probe_bytes(
        "long.txt",
        vec![b'7'; (trace::MAX_LINE + 10) as usize],
        reclaimsim_core::scenario::TraceFormat::Auto,
        None,
        1,
    )
    .expect_err("refused");
    assert!(e.to_string().contains("longer than"), "{e}");
}

#[test]
fn trace_gen_refuses_a_shuffle_beyond_the_memory_limit() {
    let p = tmp("never.oracleGeneral", b"");
    let e = trace::write_zipf_oracle(&p, 4_294_967_295, 10, 0.9, 1, Some(1 << 30), &mut || true)
        .expect_err("refused");
    let msg = e.to_string();
    assert!(
        msg.starts_with("trace-gen --objects: 4294967295")
            && msg.contains("16383 MiB")
            && msg.contains("allowed up to 268435456 objects"),
        "{msg}"
    );
    // Interrupted through its progress callback (called every 2^20 records).
    let e = trace::write_zipf_oracle(&p, 100, 3 << 20, 0.9, 1, None, &mut || false)
        .expect_err("interrupted");
    assert_eq!(e, Error::Interrupted);
}
