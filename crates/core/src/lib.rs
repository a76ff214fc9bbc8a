//! reclaimsim-core: a deterministic discrete-event simulator of the Linux kernel's page
//! reclaim (the classic LRU and MGLRU), in pure Rust.
//!
//! ```text
//!  Scenario (JSON/TOML) --> sim::Sim::build --> engine (tasks, clocks, locks, cache lines)
//!                                 |                 ^
//!                                 v                 |
//!                          mm model (kernel names) --+--> report::Report (JSON)
//!                          workloads (usemem, file_read, request_churn, trace)
//! ```
//!
//! `scenario/` is the schema and its checks (its generic part names no workload type);
//! `workload/` has one module per workload type, each owning its schema, checks, budget
//! terms, simulated tasks and host replay behind the `workload::Workload` trait, and the
//! registry of types; `trace/` has the trace readers, one file per format; `budget.rs`
//! estimates a run's host memory; `sim.rs` builds and runs the simulation; `engine/` is the
//! executor, the costs, the devices and the registry of random streams (`engine/streams.rs`).
//! The mm model names neither `scenario` nor `workload`: `sim.rs` fills its parameters.
//!
//! Layout mirrors the kernel: `mm/vmscan.rs` holds get_scan_count and shrink_* as
//! `mm/vmscan.c` does, `mm/workingset.rs` the refault detection, `mm/rmap.rs` the reverse-map
//! walks, `mm/swap.rs` the per-CPU LRU batches and lru_note_cost, `mm/memcontrol.rs` the
//! memory cgroup (the full map is in `mm/mod.rs`). Each modeled function's
//! doc comment names the kernel function it models and states what it simplifies.

pub mod budget;
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
pub mod versions;
pub mod workload;

pub use error::{Error, Result};
pub use scenario::Scenario;

/// Run a scenario given as JSON text; returns the result as JSON text (docs/results.md).
/// `progress(now_ns, end_ns)` is called periodically; returning false interrupts the run.
/// The memory limit is what this process may take (budget::available_memory).
pub fn run_json(scenario_json: &str, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<String> {
    run_json_limited(scenario_json, None, progress)
}

/// [`run_json`] with a memory limit [bytes] (None: the memory this process may take, budget::available_memory).
pub fn run_json_limited(
    scenario_json: &str,
    max_memory: Option<u64>,
    progress: &mut dyn FnMut(u64, u64) -> bool,
) -> Result<String> {
    let sc = Scenario::from_json(scenario_json)?;
    let report = sim::run_with(&sc, false, max_memory, progress)?;
    serde_json::to_string(&report).map_err(|e| Error::Internal(e.to_string()))
}

/// Validate a scenario given as JSON text; returns it normalized (defaults filled in).
/// A scenario that `run_json` would refuse before running is refused here too, the
/// memory budget included (None: the memory this process may take, budget::available_memory).
pub fn validate_json(scenario_json: &str) -> Result<String> {
    validate_json_limited(scenario_json, None)
}

/// [`validate_json`] with a memory limit [bytes].
pub fn validate_json_limited(scenario_json: &str, max_memory: Option<u64>) -> Result<String> {
    let sc = Scenario::from_json(scenario_json)?;
    budget::check_available(&sc, max_memory)?;
    serde_json::to_string(&sc).map_err(|e| Error::Internal(e.to_string()))
}

/// The estimated host memory of a scenario's run (JSON text: `total` and `terms`, each
/// with `name`, `field` and `bytes`), for `validate` to print.
pub fn estimate_memory_json(scenario_json: &str) -> Result<String> {
    let sc = Scenario::from_json(scenario_json)?;
    serde_json::to_string(&budget::estimate(&sc)).map_err(|e| Error::Internal(e.to_string()))
}

/// The cost table as JSON: a list of {"name", "ns", "default_ns", "origin", "doc"}, where
/// `origin` is {"layer", "from", "source"}. Without a scenario every value is the default;
/// with one (JSON text), its `machine.profile`, `costs_profile` and `[costs]` applied.
pub fn cost_table_json(scenario_json: Option<&str>) -> Result<String> {
    let resolved = match scenario_json {
        Some(text) => Some(engine::cost_profile::resolve(&Scenario::from_json(text)?)?),
        None => None,
    };
    let v: Vec<serde_json::Value> = engine::cost::CostTable::describe()
        .into_iter()
        .map(|(n, d, doc)| {
            let (ns, origin) = match &resolved {
                Some(r) => (r.table.get(n).unwrap_or(d), r.origins.get(n).cloned()),
                None => (d, None),
            };
            let origin = origin.unwrap_or(engine::cost_profile::Origin {
                layer: "default",
                from: String::new(),
                source: String::new(),
            });
            serde_json::json!({"name": n, "ns": ns, "default_ns": d, "origin": origin, "doc": doc})
        })
        .collect();
    serde_json::to_string(&v).map_err(|e| Error::Internal(e.to_string()))
}

/// The built-in hardware profiles as JSON (a list of profiles: name, description, costs).
pub fn profiles_json() -> Result<String> {
    serde_json::to_string(&engine::cost_profile::builtins()?)
        .map_err(|e| Error::Internal(e.to_string()))
}
