//! reclaimsim-host: replay a scenario's workloads on the host kernel, for `reclaimsim
//! kernel-run`.
//!
//! Each workload thread draws its accesses from the same generator the simulator uses,
//! seeded from the same stream, and performs them for real; a paced thread keeps the
//! simulator's pace (the same rule, open or closed loop). What to replay comes from the
//! workload's module (`reclaimsim_core::workload::Workload`'s host methods: processes,
//! threads, files, areas, accesses, pacing), so this crate names no workload: `replay.rs`
//! performs the accesses (anonymous touches, MAP_POPULATE's walk, unmaps, page-cache
//! reads classified by mincore).
//!
//! With `pin` (kernel-run --pin), each thread runs pinned to the CPU the simulator gives
//! its task, where the host has that CPU ([`affinity`]).
//!
//! The caller (the Python front) places the process in the cgroup before calling
//! [`run_process`]; this crate does no cgroup or swap setup.

pub mod affinity;
pub mod calibrate;
pub mod replay;
pub mod smt;

use reclaimsim_core::scenario::{Scenario, WorkloadSpec, PAGE_SIZE};
use reclaimsim_core::workload::access::Access;
use reclaimsim_core::workload::host::{HostPlan, HostPrepared};
use replay::{Clocks, Mapping};
use serde::Serialize;
use std::io::Write;
use std::path::{Path, PathBuf};

pub use replay::{Clock, WallClock};

const PAGE: usize = PAGE_SIZE as usize;

/// Counters per thread in the live-statistics file (u64 each, in this order).
pub const LIVE_FIELDS: [&str; 6] = [
    "accesses",
    "hits",
    "misses",
    "major_faults",
    "minor_faults",
    "elapsed_ns",
];

/// How often (in accesses) a thread publishes its counters to the live file: often
/// enough that kernel-run --vm's memory.reclaim writes, made at a count of accesses, land
/// within 256 accesses per thread of it (five stores each time, against a page access).
pub(crate) const PUBLISH_EVERY: u64 = 256;

/// A thread's slot in the live-statistics file: a shared mapping the parent reads after
/// the process ends, also when the OOM killer ended it.
#[derive(Clone, Copy)]
pub(crate) struct Live(*mut u64);

// SAFETY: each thread writes only its own slot; the parent reads after the process exits.
unsafe impl Send for Live {}
unsafe impl Sync for Live {}

impl Live {
    pub(crate) fn publish(&self, st: &mut ThreadStats) {
        st.elapsed_ns = st.started.map_or(0, |t| t.elapsed().as_nanos() as u64);
        if self.0.is_null() {
            return;
        }
        let v = [
            st.accesses,
            st.hits,
            st.misses,
            st.major_faults,
            st.minor_faults,
            st.elapsed_ns,
        ];
        for (i, x) in v.iter().enumerate() {
            // SAFETY: the slot has LIVE_FIELDS.len() u64s inside the mapping (checked when
            // the file was mapped); volatile so the stores are not elided before a kill.
            unsafe { self.0.add(i).write_volatile(*x) };
        }
    }
}

/// Map the live-statistics file (the caller sized it) and return one slot per thread.
fn live_slots(path: Option<&Path>, threads: u32) -> Result<(Option<Mapping>, Vec<Live>), String> {
    let Some(path) = path else {
        return Ok((None, vec![Live(std::ptr::null_mut()); threads as usize]));
    };
    let need = threads as usize * LIVE_FIELDS.len() * 8;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let len = f
        .metadata()
        .map_err(|e| format!("{}: {e}", path.display()))?
        .len() as usize;
    if len < need {
        return Err(format!(
            "{}: {len} bytes, need {need} for {threads} threads",
            path.display()
        ));
    }
    let m = Mapping::file_rw(&f, len)?;
    let slots = (0..threads as usize)
        .map(|t| Live(unsafe { (m.base as *mut u64).add(t * LIVE_FIELDS.len()) }))
        .collect();
    Ok((Some(m), slots))
}

/// What one thread did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ThreadStats {
    /// Stream id of the thread (its task index in the simulator).
    pub stream: u64,
    pub accesses: u64,
    pub hits: u64,
    pub misses: u64,
    pub major_faults: u64,
    pub minor_faults: u64,
    /// Wall time from the thread's start to its last access [ns] (kernel-run's elapsed
    /// time and accesses per second, beside the model's virtual runtime).
    pub elapsed_ns: u64,
    /// Context switches of the thread from its start to its end, voluntary (it blocked)
    /// and involuntary (preempted), as /proc/PID/status names them (getrusage's ru_nvcsw
    /// and ru_nivcsw): after each it was switched back in. None until it ends.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub voluntary_ctxt_switches: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonvoluntary_ctxt_switches: Option<u64>,
    /// The CPUs the thread could run on when it started (one: pinned to its simulated
    /// CPU; see [`affinity`]).
    pub affinity: Vec<u32>,
    /// When the thread started.
    #[serde(skip)]
    pub started: Option<std::time::Instant>,
    /// The accesses as performed, when recording (tests).
    #[serde(skip)]
    pub log: Option<Vec<Access>>,
}

/// What one process of a workload did.
#[derive(Debug, Default, Clone, Serialize)]
pub struct ProcessStats {
    pub workload: usize,
    pub process: u32,
    pub threads: Vec<ThreadStats>,
}

/// Whether workload `wi` can be replayed natively, and how many processes it has.
pub fn processes(sc: &Scenario, wi: usize) -> Result<u32, String> {
    plan(sc, wi).map(|p| p.processes)
}

/// How workload `wi` is replayed natively, or why it cannot be: it must end by itself,
/// its module must have a host replay, and a kernel without MADV_POPULATE_WRITE cannot
/// replay a populating walk.
fn plan(sc: &Scenario, wi: usize) -> Result<HostPlan, String> {
    let w = sc
        .workloads
        .get(wi)
        .ok_or_else(|| format!("no workload {wi}: the scenario has {}", sc.workloads.len()))?;
    w.spec().bounded().map_err(|e| {
        format!("scenario.workload[{wi}]: {e} (kernel-run needs workloads that end)")
    })?;
    let plan = w.spec().host().map_err(|r| match r.field {
        Some(f) => format!("scenario.workload[{wi}].{f}: {}", r.msg),
        None => format!("scenario.workload[{wi}]: {}", r.msg),
    })?;
    if let Some(f) = plan.populate.filter(|_| !populate_write_supported()) {
        return Err(format!(
            "scenario.workload[{wi}].{f}: true: this kernel refuses MADV_POPULATE_WRITE (Linux 5.14 and later have it), with which kernel-run populates as MAP_POPULATE does; allowed: {f} = false"
        ));
    }
    Ok(plan)
}

/// Whether this kernel has MADV_POPULATE_WRITE (Linux 5.14), the prefault walk's way to
/// mark each page accessed as MAP_POPULATE does: tried on one page of a fresh mapping.
pub fn populate_write_supported() -> bool {
    let Ok(m) = Mapping::anon(PAGE) else {
        return false;
    };
    // SAFETY: advice on the one page of our own fresh mapping.
    unsafe { libc::madvise(m.base as *mut libc::c_void, PAGE, libc::MADV_POPULATE_WRITE) == 0 }
}

/// The path of file `j` of workload `wi` under `dir`.
pub fn file_path(dir: &Path, wi: usize, j: usize) -> PathBuf {
    dir.join(file_name(wi, j))
}

/// The name of file `j` of workload `wi`.
fn file_name(wi: usize, j: usize) -> String {
    format!("w{wi}-f{j}.dat")
}

/// How many files workload `wi` reads (none for a workload without a host replay).
fn file_count(sc: &Scenario, wi: usize) -> usize {
    sc.workloads[wi].spec().host().map_or(0, |p| p.files)
}

/// The names of every file [`create_files`] makes for the scenario, in order: the caller
/// records them before they exist, so that a run killed while writing them leaves a list
/// of exactly what to remove.
pub fn file_names(sc: &Scenario) -> Vec<String> {
    (0..sc.workloads.len())
        .flat_map(|wi| (0..file_count(sc, wi)).map(move |j| file_name(wi, j)))
        .collect()
}

/// Create workload `wi`'s files under `dir`, written and fsynced so that dropping caches
/// leaves none of them cached. `dir` is the run's own directory: a regular file of the
/// right size there is one this run made for an earlier rep and is kept; anything else
/// under the name (a symbolic link, a file of another size) is an error, and a file is
/// only ever created new (O_EXCL, which never follows a link), never truncated.
pub fn create_files(sc: &Scenario, wi: usize, dir: &Path) -> Result<Vec<PathBuf>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    if file_count(sc, wi) == 0 {
        return Ok(Vec::new());
    }
    let sizes = sc.workloads[wi].spec().host_files(sc.seed)?;
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let chunk = vec![0x5au8; 1 << 20];
    let mut out = Vec::new();
    for (j, &want) in sizes.iter().enumerate() {
        let p = file_path(dir, wi, j);
        let err = |e: std::io::Error| format!("{}: {e}", p.display());
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_file() && m.len() == want => {
                out.push(p);
                continue;
            }
            Ok(_) => {
                return Err(format!(
                    "{}: already there and not this run's file of {want} bytes; not overwritten",
                    p.display()
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(err(e)),
        }
        let mut fh = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_NOFOLLOW)
            .mode(0o600)
            .open(&p)
            .map_err(err)?;
        let mut left = want;
        while left > 0 {
            let n = left.min(chunk.len() as u64) as usize;
            fh.write_all(&chunk[..n]).map_err(err)?;
            left -= n as u64;
        }
        fh.sync_all().map_err(err)?;
        out.push(p);
    }
    Ok(out)
}

/// Run process `process` of workload `wi` to completion in the calling process, one OS
/// thread per workload thread; `record` keeps every access (tests).
///
/// With `live`, each thread also publishes its counters every few thousand accesses into
/// that file (one slot of [`LIVE_FIELDS`] per thread), so they survive an OOM kill.
pub fn run_process(
    sc: &Scenario,
    wi: usize,
    process: u32,
    dir: &Path,
    record: bool,
    live: Option<&Path>,
) -> Result<ProcessStats, String> {
    let o = Options {
        record,
        live,
        ..Options::default()
    };
    run_process_with(sc, wi, process, dir, &o)
}

/// What a scenario's workloads build ahead of their host replay (see [`prepare`]).
#[derive(Default)]
pub struct Prepared {
    built: Vec<Option<HostPrepared>>,
}

/// Build, in the calling process, what each workload's replay needs ahead (a trace's
/// id-to-page map: one pass over it). A worker forked afterwards reads it instead of
/// building its own, so its memory is not charged to the workload's cgroup (the model has
/// no such table in the simulated machine).
pub fn prepare(sc: &Scenario) -> Result<Prepared, String> {
    let built = sc
        .workloads
        .iter()
        .map(|w| w.spec().host_prepare(sc.seed))
        .collect::<Result<_, _>>()?;
    Ok(Prepared { built })
}

/// [`run_process`] with what was built ahead by [`prepare`]; with `pin`, each thread
/// pinned to its simulated CPU ([`affinity`]).
#[allow(clippy::too_many_arguments)]
pub fn run_process_prepared(
    sc: &Scenario,
    wi: usize,
    process: u32,
    dir: &Path,
    record: bool,
    live: Option<&Path>,
    prepared: Option<&Prepared>,
    pin: bool,
) -> Result<ProcessStats, String> {
    let o = Options {
        record,
        live,
        prepared,
        pin,
        clocks: None,
    };
    run_process_with(sc, wi, process, dir, &o)
}

/// How [`run_process_with`] runs a process.
#[derive(Default)]
pub struct Options<'a> {
    /// Keep every access (tests).
    pub record: bool,
    /// Publish each thread's counters into this file ([`LIVE_FIELDS`] per thread), so
    /// they survive an OOM kill.
    pub live: Option<&'a Path>,
    /// What [`prepare`] built.
    pub prepared: Option<&'a Prepared>,
    /// Pin each thread to its simulated CPU ([`affinity`]).
    pub pin: bool,
    /// Each thread's clock for its pacing (None: the wall clock; tests give their own).
    pub clocks: Option<Clocks<'a>>,
}

/// Run process `process` of workload `wi` to completion in the calling process, one OS
/// thread per workload thread, as `o` says.
pub fn run_process_with(
    sc: &Scenario,
    wi: usize,
    process: u32,
    dir: &Path,
    o: &Options,
) -> Result<ProcessStats, String> {
    let plan = plan(sc, wi)?;
    if process >= plan.processes {
        return Err(format!(
            "workload {wi} has {} process(es), not {}",
            plan.processes,
            process + 1
        ));
    }
    let (_map, slots) = live_slots(o.live, plan.threads)?;
    let cpus = if o.pin {
        affinity::process_cpus(sc, wi, process)
    } else {
        Vec::new()
    };
    let built = o
        .prepared
        .and_then(|p| p.built.get(wi))
        .and_then(|b| b.as_ref());
    let p = sc.workloads[wi]
        .spec()
        .host_process(sc, wi, process, built)?;
    let threads = replay::run(p, dir, wi, plan.files, o.record, &slots, &cpus, o.clocks)?;
    Ok(ProcessStats {
        workload: wi,
        process,
        threads,
    })
}

/// Threads of one process of a workload (a workload without a host replay: its tasks).
pub fn threads_per_process(w: &WorkloadSpec) -> u32 {
    w.spec().host().map_or(w.nr_tasks() as u32, |p| p.threads)
}

/// Run process `process` of workload `wi` of a scenario given as JSON, returning its
/// statistics as JSON (for the Python front).
pub fn run_process_json(
    scenario_json: &str,
    wi: usize,
    process: u32,
    dir: &str,
    live: Option<&str>,
    prepared: Option<&Prepared>,
    pin: bool,
) -> Result<String, String> {
    let sc = Scenario::from_json(scenario_json).map_err(|e| e.to_string())?;
    let st = run_process_prepared(
        &sc,
        wi,
        process,
        Path::new(dir),
        false,
        live.map(Path::new),
        prepared,
        pin,
    )?;
    serde_json::to_string(&st).map_err(|e| e.to_string())
}

/// The names of the files [`create_files_json`] makes for a scenario given as JSON.
pub fn file_names_json(scenario_json: &str) -> Result<Vec<String>, String> {
    let sc = Scenario::from_json(scenario_json).map_err(|e| e.to_string())?;
    Ok(file_names(&sc))
}

/// Create the files of every workload of a scenario given as JSON that reads files.
pub fn create_files_json(scenario_json: &str, dir: &str) -> Result<(), String> {
    let sc = Scenario::from_json(scenario_json).map_err(|e| e.to_string())?;
    for wi in 0..sc.workloads.len() {
        create_files(&sc, wi, Path::new(dir))?;
    }
    Ok(())
}
