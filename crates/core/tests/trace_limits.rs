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
        let json = refused_alike_by_run_json(&t, &msg, name);
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

/// The ids' shuffle asks the progress callback too (every 50 ms while it runs): a shuffle
/// of tens of millions of ids, taking longer than that, stops at the first refusal,
/// before the file is created; one that is let finish writes the trace.
#[test]
fn trace_gen_can_be_interrupted_while_it_shuffles_the_ids() {
    let p = std::env::temp_dir().join(format!("shuffle-{}.oracleGeneral", std::process::id()));
    let path = p.to_str().unwrap();
    let _ = std::fs::remove_file(&p);
    let mut asked = 0;
    let e = trace::write_zipf_oracle(path, 1 << 26, 1, 0.9, 1, None, &mut || {
        asked += 1;
        false
    })
    .expect_err("interrupted");
    assert_eq!(e, Error::Interrupted);
    assert_eq!(asked, 1, "stopped at the first refusal");
    assert!(!p.exists(), "no file before the shuffle ends");
    let mut asked = 0;
    let n = trace::write_zipf_oracle(path, 1 << 26, 1, 0.9, 1, None, &mut || {
        asked += 1;
        true
    })
    .unwrap();
    assert_eq!(n, trace::ORACLE_GENERAL_RECORD as u64);
    assert!(asked >= 1, "the shuffle asked while it ran");
    std::fs::remove_file(&p).unwrap();
}

/// `n` bytes no reader takes for text, CSV, JSON or zstd (a byte >= 0x80 first).
fn noise(n: usize) -> Vec<u8> {
    (0..n).map(|i| (0x80 + i * 37 % 127) as u8).collect()
}

/// The scenario `t` (TOML) as JSON, after checking that run_json refuses it with the
/// message `msg` that validation gave.
fn refused_alike_by_run_json(t: &str, msg: &str, name: &str) -> String {
    let json = serde_json::to_string(
        &serde_json::to_value(toml::from_str::<toml::Value>(t).unwrap()).unwrap(),
    )
    .unwrap();
    let e = reclaimsim_core::run_json(&json, &mut |_, _| true).expect_err(name);
    assert_eq!(e.to_string(), msg);
    json
}

#[test]
fn oracle_general_files_that_are_not_whole_records_are_refused_by_validation_and_run_alike() {
    // 2.5 records: the first two read fine, so a reader that stops only at the partial
    // third would pass validation's one-record probe, and a run that ends while it
    // replays the garbage's first object (up to 2^32 bytes of pages) never reaches it.
    // 20 bytes (auto format: binary content) is a partial first record.
    for (name, len, record, partial) in [
        ("half.oracleGeneral", 60, "record 3", "12 of 24 bytes"),
        ("noise", 20, "record 1", "20 of 24 bytes"),
        ("noise5000", 5000, "record 209", "8 of 24 bytes"),
    ] {
        let p = tmp(name, &noise(len));
        let t = trace_scenario(&p, "");
        let e = Scenario::from_toml(&t).expect_err(name);
        let msg = e.to_string();
        assert!(matches!(e, Error::Trace { .. }), "{name}: {msg}");
        assert!(
            msg.contains(name)
                && msg.contains(record)
                && msg.contains(&format!("truncated: {partial}"))
                && msg.contains(&format!(
                    "the file's {len} bytes are not a whole number of 24-byte oracleGeneral records"
                )),
            "{name}: {msg}"
        );
        refused_alike_by_run_json(&t, &msg, name);
        // The bench's count and an in-memory trace say the same.
        let fmt = reclaimsim_core::scenario::TraceFormat::Auto;
        assert_eq!(trace::count(&p, fmt, None, 1).unwrap_err().to_string(), msg);
        let e3 = trace::probe_bytes(name, noise(len), fmt, None, 1).expect_err(name);
        assert!(e3.to_string().contains(record), "{e3}");
    }
    // A zstd-compressed trace read as plain oracleGeneral (format given): its length is
    // not whole records, and the message says what it is.
    let p = tmp("z.oracleGeneral.zst", b"");
    trace::write_zipf_oracle(&p, 1000, 1000, 0.9, 1, None, &mut || true).unwrap();
    let len = std::fs::metadata(&p).unwrap().len();
    assert_ne!(len % 24, 0, "pick other parameters: {len} bytes");
    let e = Scenario::from_toml(&trace_scenario(&p, "format = \"oracle_general\""))
        .expect_err("compressed");
    let msg = e.to_string();
    assert!(
        msg.contains(&format!("record {}: truncated", len / 24 + 1))
            && msg.contains("zstd's magic number")
            && msg.contains("format = \"oracle_general_zst\""),
        "{msg}"
    );
    // Whole records are accepted.
    let p = tmp("two.oracleGeneral", &noise(48));
    assert!(Scenario::from_toml(&trace_scenario(&p, "")).is_ok());
}

#[test]
fn damon_access_counts_above_the_samples_of_an_aggregation_interval_are_refused() {
    let fmt = reclaimsim_core::scenario::TraceFormat::Auto;
    let region = |acc: &str| format!(r#"{{"start": 0, "end": 40960, "nr_accesses": {acc}}}"#);
    let record = |intervals: &str, regions: &str| {
        format!(
            r#"[{{"intervals": {{{intervals}}}, "snapshots": [{{"regions": [{}]}}, {{"regions": [{}, {regions}]}}]}}]"#,
            region("1"),
            region("2")
        )
    };
    let iv = r#""sample_us": 5000, "aggr_us": 100000"#;
    for acc in ["500", "1e300", "21", r#"{"samples": 21}"#] {
        let body = record(iv, &region(acc));
        let p = tmp("over.json", body.as_bytes());
        let e = Scenario::from_toml(&trace_scenario(&p, "")).expect_err(acc);
        let msg = e.to_string();
        let shown = serde_json::from_str::<serde_json::Value>(acc)
            .unwrap()
            .to_string();
        assert!(
            matches!(e, Error::Trace { record: 1, .. })
                && msg.contains("over.json")
                && msg.contains(&format!(
                    "snapshot 2 region 2: nr_accesses {shown}: allowed 0..=20"
                ))
                && msg.contains("aggr_us / sample_us = 100000 / 5000"),
            "{acc}: {msg}"
        );
    }
    // At the bound: every sample found the region accessed.
    assert!(trace::probe_bytes(
        "ok.json",
        record(iv, &region("20")).into_bytes(),
        fmt,
        None,
        1
    )
    .is_ok());
    // The default intervals (5 ms, 100 ms) give the same bound.
    let e = trace::probe_bytes(
        "d.json",
        record("", &region("20.5")).into_bytes(),
        fmt,
        None,
        1,
    )
    .expect_err("default intervals");
    assert!(
        e.to_string().contains("nr_accesses 20.5: allowed 0..=20"),
        "{e}"
    );
    // DAMON refuses a sampling interval longer than the aggregation interval.
    let e = trace::probe_bytes(
        "iv.json",
        record(r#""sample_us": 5000, "aggr_us": 1000"#, &region("1")).into_bytes(),
        fmt,
        None,
        1,
    )
    .expect_err("sample_us > aggr_us");
    let msg = e.to_string();
    assert!(
        msg.contains("record 1: intervals.sample_us 5000 above aggr_us 1000")
            && msg.contains("allowed sample_us <= aggr_us"),
        "{msg}"
    );
}

/// The requests of a DAMON trace held in memory (page ids), seed 1.
fn damon_pages(body: &str) -> reclaimsim_core::Result<Vec<u64>> {
    let mut src = trace::from_bytes(
        "d.json",
        body.as_bytes().to_vec(),
        reclaimsim_core::scenario::TraceFormat::Damon,
        None,
        1,
    )?;
    let mut out = Vec::new();
    while let Some(r) = src.next_request()? {
        out.push(r.obj);
    }
    Ok(out)
}

#[test]
fn damon_records_read_as_a_stream_mean_the_same_in_any_key_order() {
    // Region 1: 4 pages in every sample (all of them, twice); region 2: 8 pages at 10 of
    // 20 samples (a seeded half); region 3 never accessed.
    let regions = r#"[{"start": 4096, "end": 20480, "nr_accesses": 20, "age": 1},
                      {"start": 1048576, "end": 1081344, "nr_accesses": {"samples": 10}},
                      {"start": 0, "end": 4096, "nr_accesses": 0}]"#;
    let snaps = format!(
        r#"[{{"start_time": 0, "regions": {regions}}}, {{"regions": {regions}, "end_time": 9}}]"#
    );
    let iv = r#"{"sample_us": 5000, "aggr_us": 100000}"#;
    let before = format!(r#"[{{"intervals": {iv}, "snapshots": {snaps}, "target_id": 0}}]"#);
    let after = format!(r#"[{{"snapshots": {snaps}, "target_id": 0, "intervals": {iv}}}]"#);
    let one = format!(r#"{{"kdamond_idx": 0, "intervals": {iv}, "snapshots": {snaps}}}"#);
    let pages = damon_pages(&before).unwrap();
    // Both snapshots: pages 1..=4 whole, then some of 256..264.
    assert_eq!(pages[..4], [1, 2, 3, 4]);
    assert!(pages
        .iter()
        .all(|p| (1..=4).contains(p) || (256..264).contains(p)));
    assert_eq!(pages.iter().filter(|p| **p <= 4).count(), 8);
    assert_eq!(damon_pages(&after).unwrap(), pages);
    assert_eq!(damon_pages(&one).unwrap(), pages);
    // Intervals that come late still bound nr_accesses (10 of aggr_us / sample_us = 5).
    let tight = r#"{"sample_us": 20000, "aggr_us": 100000}"#;
    let e = damon_pages(&format!(
        r#"[{{"snapshots": {snaps}, "intervals": {tight}}}]"#
    ))
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("record 1") && e.contains("snapshot 1 region 1: nr_accesses 20: allowed 0..=5"),
        "{e}"
    );
}

#[test]
fn damon_files_of_the_wrong_shape_say_which_part() {
    let cases = [
        ("5", "expected a list of damo records with \"snapshots\""),
        (
            r#"{"intervals": {}}"#,
            "expected a list of damo records with \"snapshots\"",
        ),
        (
            r#"[{"snapshots": [{"regions": []}]}, 7]"#,
            "record 2: record without a \"snapshots\" list",
        ),
        (
            r#"[{"snapshots": {"regions": []}}]"#,
            "record 1: record without a \"snapshots\" list",
        ),
        (
            r#"{"snapshots": 3}"#,
            "record 1: record without a \"snapshots\" list",
        ),
        (
            r#"[{"snapshots": [{"start_time": 0}]}]"#,
            "record 1: snapshot without a \"regions\" list",
        ),
        (
            r#"[{"snapshots": [[]]}]"#,
            "record 1: snapshot without a \"regions\" list",
        ),
        (
            r#"[{"snapshots": [{"regions": 1}]}]"#,
            "record 1: snapshot without a \"regions\" list",
        ),
        (
            r#"[{"snapshots": [{"regions": [{"start": 0}]}]}]"#,
            "lacks numeric start, end or nr_accesses",
        ),
        (
            r#"[{"snapshots": [{"regions": ["#,
            "not DAMON records (damo JSON): EOF while parsing",
        ),
        (
            r#"[{"snapshots": []}] x"#,
            "not DAMON records (damo JSON): trailing characters",
        ),
    ];
    for (body, want) in cases {
        let e = damon_pages(body).expect_err(body).to_string();
        assert!(e.contains(want), "{body}: {e}");
    }
}
