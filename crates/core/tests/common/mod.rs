//! Helpers shared by the integration tests.

#![allow(dead_code)]

use std::sync::mpsc;
use std::time::Duration;

/// A small valid scenario with `extra` at the top level (before any table) and `tail`
/// appended to its one usemem workload, 1M in cgroup /a.
pub fn toml(extra: &str, tail: &str) -> String {
    format!(
        r#"duration = "10ms"
{extra}
[machine]
cpus = 4
memory_per_node = "64M"
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "1M"
{tail}"#
    )
}

/// Run `f` on another thread and wait for it at most `secs` (a guard against hangs: no
/// test asserts a time, only that the call returns).
pub fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(Duration::from_secs(secs))
        .expect("the call did not return within the guard timeout")
}

/// Write `data` to a file `name` in this test process's temporary directory.
pub fn tmp(name: &str, data: &[u8]) -> String {
    let dir = std::env::temp_dir().join(format!("reclaimsim-tests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(name);
    std::fs::write(&p, data).unwrap();
    p.to_string_lossy().into_owned()
}

/// Run the scenario `t` (TOML) with every invariant checked after every reclaim pass; the
/// result as JSON.
pub fn run_checked_json(t: &str) -> serde_json::Value {
    let sc = reclaimsim_core::Scenario::from_toml(t).expect("valid scenario");
    let r = reclaimsim_core::sim::run_checked(&sc, true, &mut |_, _| true).expect("run");
    serde_json::to_value(&r).unwrap()
}

/// Run the scenario `t` (TOML) without the invariant checks; the result as JSON.
pub fn run_json(t: &str) -> serde_json::Value {
    let sc = reclaimsim_core::Scenario::from_toml(t).expect("valid scenario");
    let r = reclaimsim_core::sim::run(&sc, &mut |_, _| true).expect("run");
    serde_json::to_value(&r).unwrap()
}

/// The built-in scenarios (python/reclaimsim/scenarios/*.toml): (file name, text), in
/// file-name order.
pub fn builtin_scenarios() -> Vec<(String, String)> {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/reclaimsim/scenarios"
    );
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

/// The result's entry of the cgroup at `path` (its memory.stat, memory.events, ...).
pub fn cgroup<'a>(r: &'a serde_json::Value, path: &str) -> &'a serde_json::Value {
    r["cgroups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["path"] == path)
        .unwrap_or_else(|| panic!("no cgroup {path} in the result"))
}

/// The scenario error of `r`: (path, message), asserting the whole error is one line;
/// `what` (the scenario's text) is shown when `r` is not a scenario error.
pub fn refused_by(
    r: Result<reclaimsim_core::Scenario, reclaimsim_core::Error>,
    what: &str,
) -> (String, String) {
    use reclaimsim_core::Error;
    match r {
        Err(e @ Error::Scenario { .. }) => {
            let s = e.to_string();
            assert!(!s.contains('\n'), "one line: {s:?}");
            let Error::Scenario { path, msg, .. } = e else {
                unreachable!()
            };
            (path, msg)
        }
        other => panic!("expected a scenario error, got {other:?}\n{what}"),
    }
}

/// The scenario error of the TOML scenario `t`: (path, message).
pub fn refused(t: &str) -> (String, String) {
    refused_by(reclaimsim_core::Scenario::from_toml(t), t)
}

/// `t` is refused at field `path` with a message holding each of `parts`.
pub fn assert_refused(t: &str, path: &str, parts: &[&str]) {
    let (p, m) = refused(t);
    assert_eq!(p, path, "{m}");
    for x in parts {
        assert!(m.contains(x), "{path}: {x:?} not in {m:?}");
    }
}
