//! reclaimsim-core: a deterministic discrete-event simulator of the Linux kernel's page
//! reclaim (classic LRU), in pure Rust.
//!
//! ```text
//!  Scenario (JSON/TOML) --> sim::Sim::new --> engine (tasks, clocks, locks, cache lines)
//!                                 |                 ^
//!                                 v                 |
//!                          mm model (kernel names) --+--> report::Report (JSON)
//!                          workloads (usemem, file_read)
//! ```
//!
//! Layout mirrors the kernel: `mm/vmscan.rs` holds get_scan_count and shrink_* as
//! `mm/vmscan.c` does, `mm/workingset.rs` the refault detection, `mm/swap.rs` the per-CPU LRU
//! batches and lru_note_cost, `mm/memcontrol.rs` the memory cgroup. Each modeled function's
//! doc comment names the kernel function it models and states what it simplifies.

pub mod engine;
pub mod error;
pub mod fixture;
pub mod mm;
pub mod report;
pub mod scenario;
pub mod sched;
pub mod schedule;
pub mod sim;
pub mod trace;
pub mod variant;
pub mod workload;

pub use error::{Error, Result};
pub use scenario::Scenario;

/// Run a scenario given as JSON text; returns the result as JSON text (docs/results.md).
/// `progress(now_ns, end_ns)` is called periodically; returning false interrupts the run.
pub fn run_json(scenario_json: &str, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<String> {
    let sc = Scenario::from_json(scenario_json)?;
    let report = sim::run(&sc, progress)?;
    serde_json::to_string(&report).map_err(|e| Error::Internal(e.to_string()))
}

/// Validate a scenario given as JSON text; returns it normalized (defaults filled in).
pub fn validate_json(scenario_json: &str) -> Result<String> {
    let sc = Scenario::from_json(scenario_json)?;
    serde_json::to_string(&sc).map_err(|e| Error::Internal(e.to_string()))
}

/// The cost table as JSON: a list of {"name", "default_ns", "doc"}.
pub fn cost_table_json() -> String {
    let v: Vec<serde_json::Value> = engine::cost::CostTable::describe()
        .into_iter()
        .map(|(n, d, doc)| serde_json::json!({"name": n, "default_ns": d, "doc": doc}))
        .collect();
    serde_json::to_string(&v).unwrap_or_default()
}
