//! The fuzzers' regression corpus (fuzz/regress/<target>/*): every committed input,
//! minimized from what the fuzzers found or seeded by hand, is fed to the same harness
//! the fuzz targets run (fuzz/harness.rs). Each must end in a clean result or a clean
//! bad-input error; a panic (overflow checks are on in test builds) fails the test.

#[path = "../../../fuzz/harness.rs"]
mod harness;

use std::path::PathBuf;

fn corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regress")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "{}: no corpus files", dir.display());
    files
        .into_iter()
        .map(|p| {
            let data = std::fs::read(&p).expect("corpus file");
            (p, data)
        })
        .collect()
}

fn replay(target: &str, f: fn(&[u8])) {
    for (path, data) in corpus(target) {
        let r = std::panic::catch_unwind(|| f(&data));
        assert!(r.is_ok(), "{}: the harness panicked", path.display());
    }
}

#[test]
fn scenario_json_corpus() {
    replay("scenario_json", harness::scenario_json);
}

#[test]
fn scenario_toml_corpus() {
    replay("scenario_toml", harness::scenario_toml);
}

#[test]
fn trace_corpus() {
    replay("trace", harness::trace);
}

#[test]
fn sim_corpus() {
    replay("sim", harness::sim);
}
