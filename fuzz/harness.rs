//! The fuzzers' bodies, shared by the cargo-fuzz targets (`fuzz/fuzz_targets/*.rs`) and
//! by the regression test that replays the committed corpus (`crates/core/tests/
//! fuzz_regress.rs`). Each takes arbitrary bytes and panics on a property violation:
//!
//! - `scenario_json`, `scenario_toml`: the parser and validation. An accepted scenario's
//!   normalized form is accepted again and normalizes to itself (what `validate` prints,
//!   `run` accepts); a refused one gets a bad-input error of one line, naming a field,
//!   without a Rust type name or a position in the internal JSON.
//! - `trace`: every trace reader (the first byte picks the format and CSV columns) on the
//!   rest of the bytes. Errors are trace errors of one line; `probe` (validation) says
//!   "no requests" exactly when the reader yields none.
//! - `sim`: a random small scenario (machine, cgroup tree, limits, costs including
//!   zeros, every workload type, traces from the bytes) run for a few virtual
//!   milliseconds with the invariants checked after every reclaim pass (and overflow
//!   checks on in the fuzz and test builds): a clean result or a clean bad-input error,
//!   never an internal error or a panic; the same bytes twice.

#![allow(dead_code)]

use reclaimsim_core::scenario::{CsvColumn, CsvColumns, TraceFormat};
use reclaimsim_core::{sim, trace, Error, Scenario};

/// Names that must not appear in what a message says is expected.
const RUST_WORDS: [&str; 9] = [
    "u8", "u16", "u32", "u64", "usize", "i64", "f64", "struct ", "enum ",
];

/// `m` without its quoted parts ("..." with backslash escapes, and `...`).
fn unquoted(m: &str) -> String {
    let mut out = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in m.chars() {
        match quote {
            Some(q) => {
                if escaped {
                    escaped = false;
                } else if c == '\\' && q == '"' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            None if c == '"' || c == '`' => quote = Some(c),
            None => out.push(c),
        }
    }
    out
}

/// A bad-input error as the user sees it: one line, naming a field or file, in the
/// scenario's words.
fn check_bad_input(e: &Error, json_input: bool, input: &[u8]) {
    let msg = e.to_string();
    assert!(
        matches!(e, Error::Scenario { .. } | Error::Trace { .. }),
        "not a bad-input error: {msg}"
    );
    assert!(!msg.contains('\n'), "a message of several lines: {msg:?}");
    if let Error::Scenario { path, msg: m, .. } = e {
        assert!(path.starts_with("scenario"), "no field named: {msg}");
        // The message's own words name no Rust type (the values it quotes from the
        // input may say anything).
        let own = unquoted(m);
        let input = String::from_utf8_lossy(input);
        // A word the input spells itself may come back in a quoted value whose quotes
        // are not balanced (serde does not escape backticks): only the others count.
        for w in RUST_WORDS.iter().filter(|w| !input.contains(w.trim())) {
            let hit = own
                .match_indices(w)
                .any(|(j, _)| !own[..j].ends_with(|c: char| c.is_ascii_alphanumeric()));
            assert!(!hit, "a Rust type name ({w}) in: {msg}");
        }
        if json_input {
            assert!(
                !m.contains(" at line "),
                "a position in the internal JSON: {msg}"
            );
        }
    }
}

/// An accepted scenario normalizes to a fixed point that is accepted again.
fn check_normal_form(sc: &Scenario) {
    let once = serde_json::to_string(sc).expect("a scenario serializes");
    let again = Scenario::from_json(&once)
        .unwrap_or_else(|e| panic!("the normalized scenario is refused: {e}\n{once}"));
    let twice = serde_json::to_string(&again).expect("a scenario serializes");
    assert_eq!(once, twice, "normalizing twice changes the scenario");
}

pub fn scenario_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match Scenario::from_json(text) {
        Ok(sc) => check_normal_form(&sc),
        Err(e) => check_bad_input(&e, true, data),
    }
}

pub fn scenario_toml(data: &[u8]) {
    match Scenario::from_toml_bytes(data) {
        Ok(sc) => check_normal_form(&sc),
        Err(e) => check_bad_input(&e, false, data),
    }
}

/// Reads bytes as choices; past the end every choice is 0.
pub struct Choices<'a>(pub &'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        match self.0.split_first() {
            Some((b, rest)) => {
                self.0 = rest;
                *b
            }
            None => 0,
        }
    }
    /// A number in 0..n.
    fn below(&mut self, n: u64) -> u64 {
        let v = u64::from(self.byte()) | u64::from(self.byte()) << 8;
        v % n.max(1)
    }
    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }
    fn pick<'b, T>(&mut self, xs: &'b [T]) -> &'b T {
        &xs[self.below(xs.len() as u64) as usize]
    }
}

const FORMATS: [(TraceFormat, &str); 7] = [
    (TraceFormat::Text, "t.txt"),
    (TraceFormat::Csv, "t.csv"),
    (TraceFormat::OracleGeneral, "t.oracleGeneral"),
    (TraceFormat::OracleGeneralZst, "t.oracleGeneral.zst"),
    (TraceFormat::Damon, "t.json"),
    (TraceFormat::Auto, "t"),
    (TraceFormat::Auto, "t.bin"),
];

/// CSV column options from a choice byte: None (the defaults) or a mapping.
fn csv_columns(b: u8) -> Option<CsvColumns> {
    if b & 0x80 == 0 {
        return None;
    }
    let header = b & 0x40 != 0;
    let col = |n: u8, name: &str| {
        if header {
            CsvColumn::Name(name.into())
        } else {
            CsvColumn::Number(usize::from(n))
        }
    };
    Some(CsvColumns {
        obj_id: col(1 + (b & 1), "obj_id"),
        obj_size: (b & 2 != 0).then(|| col(2 + (b & 1), "obj_size")),
        op: (b & 4 != 0).then(|| col(3, "op")),
        time: (b & 8 != 0).then(|| col(4, "time")),
        header,
        delimiter: if b & 0x10 != 0 { ";" } else { "," }.into(),
    })
}

pub fn trace(data: &[u8]) {
    let mut c = Choices(data);
    let (format, name) = *c.pick(&FORMATS);
    let csv = csv_columns(c.byte());
    let body = c.0.to_vec();
    let probe = trace::probe_bytes(name, body.clone(), format, csv.as_ref(), 1);
    if let Err(e) = &probe {
        check_bad_input(e, false, data);
    }
    let mut src = match trace::from_bytes(name, body, format, csv.as_ref(), 1) {
        Ok(s) => s,
        Err(e) => {
            check_bad_input(&e, false, data);
            assert!(
                probe.is_err(),
                "probe accepts a trace that does not open: {e}"
            );
            return;
        }
    };
    // Map objects to pages as a replay does, under a small memory budget.
    let mut map = trace::PageMap::default();
    map.limit(64 << 20, 8);
    let mut requests = 0u64;
    let mut batch = Vec::new();
    let mut read_error = None;
    for _ in 0..256 {
        batch.clear();
        let r = src.next_batch(&mut batch, 256);
        for req in &batch {
            requests += 1;
            if let Err(m) = map.map(req) {
                assert!(!m.contains('\n'), "{m:?}");
            }
        }
        match r {
            Ok(true) => {}
            Ok(false) => break,
            Err(e) => {
                check_bad_input(&e, false, data);
                read_error = Some(e);
                break;
            }
        }
    }
    match &probe {
        // A DAMON trace may draw no access at tiny rates; the others must yield one.
        Ok(()) if format != TraceFormat::Damon && !name.ends_with(".json") => assert!(
            requests > 0 || read_error.is_some(),
            "probe accepts a trace with no requests"
        ),
        Err(e) if e.to_string().contains("no requests") => assert!(
            requests == 0,
            "probe says no requests, the reader gave {requests}"
        ),
        _ => {}
    }
}

/// A small random scenario (TOML) from the bytes; trace workloads read `trace_path`.
pub fn random_scenario(c: &mut Choices<'_>, trace_path: &str) -> String {
    let nodes = 1 + c.below(2);
    let cpus = nodes + c.below(8);
    let mem = 16 + c.below(24);
    let mut t = format!(
        "seed = {}\nduration = \"{}ms\"\nsample_interval = \"{}ms\"\n[machine]\nnodes = {nodes}\ncpus = {cpus}\nmemory_per_node = \"{mem}M\"\n",
        c.below(1000),
        1 + c.below(20),
        1 + c.below(10),
    );
    match c.below(3) {
        1 => {
            t += &format!(
                "[machine.swap]\nsize = \"{}M\"\ndevice = \"zram\"\n",
                1 + c.below(64)
            )
        }
        2 => {
            t += &format!(
                "[machine.swap]\nsize = \"{}M\"\ndevice = \"ssd\"\n",
                1 + c.below(64)
            );
            if c.flag() {
                t += &format!("read_latency = {}\n", c.below(100_000));
            }
        }
        _ => {}
    }
    let v1 = c.below(4) == 0;
    let mglru = c.flag();
    t += &format!(
        "[kernel]\nswappiness = {}\nwatermark_scale_factor = {}\nmemory_recursiveprot = {}\ncgroup_version = {}\nlru = \"{}\"\n",
        c.below(201),
        1 + c.below(3000),
        c.flag(),
        if v1 { 1 } else { 2 },
        if mglru { "mglru" } else { "classic" },
    );
    if c.flag() {
        t += &format!("min_free_kbytes = {}\n", 128 + c.below(16384));
    }
    if mglru {
        // The capability bits, the core (0x1) always on; min_ttl_ms sometimes.
        t += &format!(
            "lru_gen = {{ enabled = {}, min_ttl_ms = {} }}\n",
            1 | (2 * c.below(4)),
            *c.pick(&[0u64, 0, 1, 1000])
        );
    }
    t += &format!(
        "[variants]\nrotation_cost = {}\nlru_add_dead_filter = {}\nvmstat_scan_cost = {}\nmemcg_stats = \"{}\"\nmglru_memcg_iter = {}\nmglru_tiers = {}\nmglru_look_around = {}\nmglru_bloom = {}\n",
        c.flag(),
        c.flag(),
        c.flag(),
        c.pick(&["rstat", "batched_local", "percpu_local"]),
        c.flag(),
        c.flag(),
        c.flag(),
        c.flag(),
    );
    let costs = reclaimsim_core::engine::cost::CostTable::names();
    let nc = c.below(4);
    if nc > 0 {
        t += "[costs]\n";
        let mut seen = Vec::new();
        for _ in 0..nc {
            let n = *c.pick(&costs);
            if !seen.contains(&n) {
                seen.push(n);
                // Zeros too: a run whose time stops must end in a clean error.
                t += &format!("{n} = {}\n", c.pick(&[0u64, 1, 7, 100, 5_000, 200_000]));
            }
        }
    }
    let mut paths = vec!["/".to_string()];
    for i in 0..c.below(5) {
        let parent = c.pick(&paths).clone();
        let p = if parent == "/" {
            format!("/c{i}")
        } else {
            format!("{parent}/c{i}")
        };
        // A few copies of a leaf now and then (`{i}` numbers them).
        let copies = if c.below(4) == 0 { 1 + c.below(3) } else { 1 };
        let p = if copies > 1 { format!("{p}x{{i}}") } else { p };
        t += &format!("[[cgroup]]\npath = \"{p}\"\ncopies = {copies}\n");
        if c.flag() {
            t += &format!("memory.max = \"{}M\"\n", 1 + c.below(64));
        }
        if v1 {
            if c.flag() {
                t += &format!("memory.swappiness = {}\n", c.below(201));
            }
        } else {
            if c.flag() {
                t += &format!("memory.high = \"{}M\"\n", 1 + c.below(64));
            }
            if c.flag() {
                t += &format!("memory.low = \"{}M\"\n", c.below(32));
            }
            if c.flag() {
                t += &format!("memory.min = \"{}M\"\n", c.below(16));
            }
            if c.flag() {
                t += &format!("memory.swap.max = \"{}M\"\n", c.below(32));
            }
        }
        if copies > 1 {
            // Copies are leaves: workloads go to the first one.
            paths.push(p.replace("{i}", "0"));
        } else {
            paths.push(p);
        }
    }
    let mut left = cpus;
    for _ in 0..1 + c.below(3) {
        if left == 0 {
            break;
        }
        let cg = c.pick(&paths).clone();
        let start = if c.flag() { c.below(5_000_000) } else { 0 };
        let head = format!("[[workload]]\ncgroup = \"{cg}\"\nstart = {start}\n");
        match c.below(4) {
            0 => {
                let procs = 1 + c.below(left.min(3));
                let threads = 1 + c.below((left / procs).min(2));
                left -= procs * threads;
                t += &format!(
                    "{head}type = \"usemem\"\nprocesses = {procs}\nthreads = {threads}\nsize = \"{}K\"\nprefault = {}\nprealloc = {}\nrandom = {}\nrepeat = {}\nunmap = {}\nmapping = \"{}\"\n",
                    4 * (threads + c.below(4096)),
                    c.flag(),
                    c.flag(),
                    c.flag(),
                    c.below(3),
                    c.flag(),
                    c.pick(&["anon", "anon", "shared_file", "shmem"]),
                );
                if c.below(4) == 0 {
                    t += &format!("rate = \"{}K\"\n", *c.pick(&[1u64, 64, 4096, 1 << 20]));
                }
            }
            1 => {
                let threads = 1 + c.below(left.min(2));
                left -= threads;
                let pattern = *c.pick(&["seq", "uniform", "zipf", "hotscan"]);
                let files = if pattern == "hotscan" {
                    format!(
                        "[\"{}K\", \"{}K\"]",
                        4 + 4 * c.below(512),
                        4 + 4 * c.below(4096)
                    )
                } else {
                    format!("[\"{}K\"]", 4 + 4 * c.below(8192))
                };
                t += &format!(
                    "{head}type = \"file_read\"\nthreads = {threads}\nfiles = {files}\npattern = \"{pattern}\"\npasses = {}\naccesses = {}\n",
                    c.below(3),
                    c.below(5000)
                );
            }
            2 if left >= 2 => {
                let threads = 2 + c.below((left - 1).min(3));
                left -= threads;
                t += &format!(
                    "{head}type = \"request_churn\"\nthreads = {threads}\nrequest_size = \"{}K\"\nservice = \"{}us\"\nload = {}\nrequests = {}\n",
                    4 * (1 + c.below(64)),
                    c.below(50),
                    c.pick(&["1.0", "0.9", "0.5", "0.01"]),
                    c.below(200)
                );
            }
            _ => {
                left -= 1;
                t += &format!(
                    "{head}type = \"trace\"\npath = \"{trace_path}\"\ntarget = \"{}\"\nrequests = {}\n",
                    c.pick(&["file", "anon"]),
                    c.below(3000)
                );
            }
        }
    }
    t
}

/// A trace file for the sim fuzzer's trace workloads: a text trace of ids from the bytes.
fn random_trace(c: &mut Choices<'_>) -> String {
    let n = 1 + c.below(400);
    let span = 1 + c.below(5000);
    (0..n).map(|_| format!("{}\n", c.below(span))).collect()
}

pub fn sim(data: &[u8]) {
    let mut c = Choices(data);
    let dir = std::env::temp_dir().join(format!("reclaimsim-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("t.txt");
    std::fs::write(&path, random_trace(&mut c)).expect("trace file");
    let text = random_scenario(&mut c, &path.to_string_lossy());
    let sc = match Scenario::from_toml(&text) {
        Ok(sc) => sc,
        Err(e) => {
            check_bad_input(&e, false, data);
            return;
        }
    };
    let run = |check: bool| {
        sim::run_with(&sc, check, Some(1 << 30), &mut |_, _| true)
            .map(|r| serde_json::to_string(&r).expect("a report serializes"))
    };
    // With the invariants checked after every reclaim pass, then without: the same
    // bytes (determinism, and checking changes nothing).
    match run(true) {
        Ok(a) => {
            let b = run(false).expect("the run without checks succeeds too");
            assert!(a == b, "the same scenario gives different results\n{text}");
        }
        Err(e) => {
            assert!(
                !matches!(e, Error::Internal(_)),
                "internal error: {e}\n{text}"
            );
            check_bad_input(&e, false, data);
        }
    }
}
