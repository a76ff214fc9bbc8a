//! The page accesses of the workloads and the random stream of each of their tasks,
//! shared by the simulator and the native runner that replays a scenario on the host
//! kernel (`reclaimsim-host`); each workload's module has its generator (e.g.
//! `usemem::UsememSeq`).
//!
//! A generator yields one thread's accesses in program order from the thread's own random
//! stream; it knows nothing of time. The simulator stops a generator early at the run's end
//! or a workload's `runtime`; the native runner needs a bounded workload and runs every
//! access. For the same scenario and seed both sides therefore issue the same pages in the
//! same order, thread by thread (`tests/host_sequences.rs` dumps and compares them).

use crate::engine::rng::{self, Rng};
use crate::scenario::Scenario;
use serde::Serialize;

/// One step of a thread's access sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Access {
    /// Write one word of anonymous page `vpn`; `random` selects the random-access cost.
    Touch { vpn: u32, random: bool },
    /// Page `vpn` of usemem's --prefault walk: mmap's MAP_POPULATE faults it in for
    /// writing and marks the folio accessed (GUP's FOLL_TOUCH).
    Populate { vpn: u32 },
    /// munmap + mmap of pages [lo, hi) (usemem `unmap` between passes).
    Unmap { lo: u32, hi: u32 },
    /// Read page `page` of the workload's file `file` (an index into its `files`).
    Read { file: u32, page: u32 },
}

/// The random stream of thread `thread` of workload `wi`: tasks number their streams in
/// creation order, workload by workload (usemem: process-major, then thread), from
/// engine/streams.rs's FIRST_TASK_STREAM.
pub fn task_stream(sc: &Scenario, wi: usize, thread: u32) -> u64 {
    let before: u64 = sc.workloads[..wi].iter().map(|w| w.nr_tasks()).sum();
    crate::engine::streams::FIRST_TASK_STREAM + before + thread as u64
}

/// The random stream of a task of workload `wi` (see [`task_stream`]).
pub fn task_rng(sc: &Scenario, wi: usize, thread: u32) -> Rng {
    rng::stream(sc.seed, task_stream(sc, wi, thread))
}
