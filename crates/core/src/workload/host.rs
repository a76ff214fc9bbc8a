//! What the host runner (crates/host, `reclaimsim kernel-run`) is told of a workload to
//! replay it natively on the host kernel: how many processes and threads, the files it
//! reads, each process's anonymous area, and each thread's accesses (the simulator's own
//! sequence, from the same random stream) and pacing (the simulator's own [`Pace`]-like
//! rule, so both sides keep the same schedule). The runner maps, reads and writes; it
//! never names a workload.
//!
//! [`Pace`]: super::usemem::Pace

use super::access::Access;

/// How a workload's host replay is laid out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPlan {
    /// Processes, each run in a process of its own.
    pub processes: u32,
    /// Threads per process.
    pub threads: u32,
    /// Files the replay reads (`Access::Read`'s `file` indexes them), created beforehand
    /// with the sizes of `Workload::host_files`.
    pub files: usize,
    /// The field that asks for MADV_POPULATE_WRITE (the prefault walk's way to mark each
    /// page accessed, as MAP_POPULATE does), which a kernel without it refuses.
    pub populate: Option<&'static str>,
}

/// Why a workload cannot be replayed on the host: the message, and the field it is about
/// (None: the workload as a whole).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRefusal {
    pub field: Option<&'static str>,
    pub msg: String,
}

/// What a workload's host replay builds ahead (see `Workload::host_prepare`); only the
/// workload that built it reads it.
pub type HostPrepared = Box<dyn std::any::Any + Send + Sync>;

/// One process of a host replay.
pub struct HostProcess<'a> {
    /// The anonymous area the process maps, if it has one (`Access::Touch`, `Populate`
    /// and `Unmap` address its pages).
    pub area: Option<HostArea>,
    /// Its threads, in order.
    pub threads: Vec<HostThread<'a>>,
}

/// A process's anonymous area.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostArea {
    pub pages: u64,
    /// MAP_SHARED (shmem), else MAP_PRIVATE.
    pub shared: bool,
}

/// One thread of a host replay.
pub struct HostThread<'a> {
    /// Its random stream: its task's number in the simulator.
    pub stream: u64,
    /// Its accesses in program order; an error (a malformed trace) ends the replay.
    pub accesses: Box<dyn Iterator<Item = Result<Access, String>> + Send + 'a>,
    /// Its pacing, if it has one.
    pub pace: Option<HostPace>,
}

/// A thread's pacing: called after each access with the time it ended [ns since the
/// thread started], it answers when the next access may start (None: at once).
pub type HostPace = Box<dyn FnMut(u64) -> Option<u64> + Send>;
