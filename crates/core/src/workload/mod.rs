//! Workloads: the user-space side. Each task issues page accesses on its CPU; an access to
//! a resident page costs `access_seq`/`access_random` (anon) or `file_read_hit` (file) and
//! sets the PTE young bit or calls folio_mark_accessed; anything else enters the kernel
//! (a page fault or a page-cache miss).
//!
//! Between kernel entries a task runs ahead on its own clock; it stops at a synchronization
//! point at least every SKEW_QUANTUM of virtual time, so no task sets young bits more than
//! that far "in the future" of a reclaimer that clears them.
//!
//! - `usemem` follows vm-scalability's usemem: each process maps `size` (threads split it),
//!   optionally prefaults it, then makes `repeat` passes (0 = forever) of sequential writes
//!   every `step` bytes, or of size/8 random word writes (`--random`), optionally paced to
//!   a `rate` (fio's).
//! - `file_read` reads page-cache files with readahead off: sequential passes, uniform,
//!   zipf(theta) over all pages, or `hotscan` (a hot file read uniformly while a second file
//!   is streamed once, `hot_per_stream` hot reads per streamed page).
//! - `request_churn` serves short-lived requests through a pipeline of workers: each
//!   request's buffer is written on one CPU and freed (munmap) on the next, so which folios
//!   die in a remote lru_add batch follows from batch drains and request timing (seed 003).
//! - `trace` replays a page-access trace (text, CSV, oracleGeneral, DAMON; `crate::trace`
//!   reads them) against a page-cache file or an anonymous area.
//!
//! Each workload is one module that owns all of it: its schema (the serde struct of its
//! `[[workload]]` fields), its checks, its share of the memory budget, its simulated tasks
//! and its replay on the host kernel (`reclaimsim kernel-run`, crates/host), behind the
//! [`Workload`] trait. Generic code (scenario validation, the budget, the simulator, the
//! host runner) reaches workloads only through that trait and the registry below, so adding
//! a workload is its module and one registry line.
//!
//! Shared parts: `stats.rs` (the counters and report rows), `task.rs` (what every
//! simulated task does: its clock, its end, anonymous touches and faults), `access.rs` (the
//! access type and the tasks' random streams), `host.rs` (what the host runner is told).

pub mod access;
pub mod file_read;
pub mod host;
pub mod request_churn;
mod stats;
mod task;
pub mod trace;
pub mod usemem;

pub use stats::{Tally, ThreadStats, ThreadTally, TraceStats, WorkloadStats};
pub use task::SKEW_QUANTUM;

use crate::budget::Terms;
use crate::error::{Error, Result};
use crate::mm::MemcgId;
use crate::scenario::Scenario;
use crate::sim::Sim;
use host::{HostPlan, HostPrepared, HostProcess, HostRefusal};
use serde::{Serialize, Serializer};
use std::rc::Rc;

/// One type of workload: the struct of its own `[[workload]]` fields (besides the
/// placement every workload has: name, cgroup, cpus, start, copies) implements it.
pub trait Workload: std::fmt::Debug + Sync {
    /// Tasks of the workload (each needs a CPU of its own), computed without overflow.
    fn nr_tasks(&self) -> u64;

    /// The field that sets the number of tasks and how that number comes about, for the
    /// error when it is out of range.
    fn tasks_field(&self) -> (&'static str, String) {
        ("threads", format!("{} tasks", self.nr_tasks()))
    }

    /// The checks of the type's own fields, after the shared ones (placement, task count).
    fn validate(&self, cx: &Check) -> Result<()>;

    /// Pages the workload can keep resident (before its cgroup's limits), and how many of
    /// those are anonymous; `frames` are the machine's.
    fn demand(&self, frames: u64) -> (u64, u64);

    /// The workload's own tables in the memory estimate (page tables, page-cache index).
    fn memory(&self, cx: &Check, terms: &mut Terms);

    /// Whether the workload's tables grow as it runs, outside the estimate (a trace's id
    /// map as objects appear): such workloads share what the estimate leaves of the limit.
    fn grows(&self) -> bool {
        false
    }

    /// Create the workload's tasks in the simulator; `stream` is the next task's random
    /// stream (each task takes one, in task order).
    fn spawn(&self, s: &Rc<Sim>, at: &Spawn, stream: &mut u64) -> Result<()>;

    /// Whether the workload ends by itself (a bounded number of accesses), as the host
    /// runner needs; otherwise the reason and the fields to set.
    fn bounded(&self) -> std::result::Result<(), String> {
        Ok(())
    }

    /// How the host runner replays the workload, or why it cannot.
    fn host(&self) -> std::result::Result<HostPlan, HostRefusal>;

    /// The sizes [bytes] of the files the host replay reads (`Access::Read`'s `file`),
    /// created before it runs; `seed` is the scenario's.
    fn host_files(&self, _seed: u64) -> std::result::Result<Vec<u64>, String> {
        Ok(Vec::new())
    }

    /// What the host replay builds ahead, in the parent process, for each of its
    /// processes to read instead of building it (and having it charged to its cgroup).
    fn host_prepare(&self, _seed: u64) -> std::result::Result<Option<HostPrepared>, String> {
        Ok(None)
    }

    /// Process `process` of workload `wi`'s host replay: its area and its threads'
    /// accesses and pacing.
    fn host_process<'a>(
        &'a self,
        sc: &Scenario,
        wi: usize,
        process: u32,
        prepared: Option<&'a HostPrepared>,
    ) -> std::result::Result<HostProcess<'a>, String>;
}

/// Where a workload's checks and budget terms stand: its index in the scenario (errors
/// name `scenario.workload[i].field`) and the scenario.
pub struct Check<'a> {
    pub index: usize,
    pub scenario: &'a Scenario,
}

impl Check<'_> {
    /// The path of the workload's field `f`.
    pub fn at(&self, f: &str) -> String {
        format!("scenario.workload[{}].{f}", self.index)
    }

    /// An error at the workload's field `f`.
    pub fn err(&self, f: &str, msg: impl Into<String>) -> Error {
        Error::scenario(self.at(f), msg)
    }
}

/// Where and when a workload's tasks run in the simulator.
pub struct Spawn<'a> {
    /// The workload's index (its counters, its processes' owner).
    pub wi: usize,
    /// Virtual start time [ns].
    pub start: u64,
    /// The memcg its memory is charged to.
    pub memcg: MemcgId,
    /// The CPU of each task, in task order.
    pub cpus: &'a [u32],
}

/// The registry of workload types: each line the `type` as a scenario spells it, the
/// variant of [`WorkloadKind`] and the module's struct. It makes the enum, the dispatch
/// to the [`Workload`] trait, the reading of a type's fields and the list of fields an
/// unknown one is told (from the struct's serde field names: not typed twice).
macro_rules! registry {
    ($($name:literal => $variant:ident($ty:ty)),+ $(,)?) => {
        /// A workload's type and its own fields.
        #[derive(Debug, Clone)]
        pub enum WorkloadKind {
            $($variant($ty)),+
        }

        impl WorkloadKind {
            /// The types, as a scenario spells them, in registry order.
            pub const TYPES: &'static [&'static str] = &[$($name),+];

            /// The workload behind the type.
            pub fn spec(&self) -> &dyn Workload {
                match self {
                    $(WorkloadKind::$variant(w) => w),+
                }
            }

            /// The `type` as a scenario spells it.
            pub fn type_name(&self) -> &'static str {
                match self {
                    $(WorkloadKind::$variant(_) => $name),+
                }
            }

            /// The own fields of type `name`, as a scenario spells them (None: no such
            /// type).
            pub fn fields(name: &str) -> Option<&'static [&'static str]> {
                match name {
                    $($name => Some(crate::scenario::struct_fields::<$ty>()),)+
                    _ => None,
                }
            }

            /// Read type `name`'s fields (a JSON table), tracking the path of a failing
            /// field (None: no such type).
            pub fn read(
                name: &str,
                fields: serde_json::Value,
            ) -> Option<std::result::Result<Self, serde_path_to_error::Error<serde_json::Error>>> {
                match name {
                    $($name => Some(serde_path_to_error::deserialize::<_, $ty>(crate::scenario::Strict(&fields)).map(WorkloadKind::$variant)),)+
                    _ => None,
                }
            }
        }

        impl Serialize for WorkloadKind {
            fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
                match self {
                    $(WorkloadKind::$variant(w) => w.serialize(s)),+
                }
            }
        }
    };
}

registry! {
    "usemem" => Usemem(usemem::Usemem),
    "file_read" => FileRead(file_read::FileRead),
    "request_churn" => RequestChurn(request_churn::RequestChurn),
    "trace" => Trace(trace::Trace),
}
