//! reclaimsim-host: replay a scenario's workloads on the host kernel, for `reclaimsim
//! kernel-run`.
//!
//! Each workload thread draws its accesses from the same generator the simulator uses
//! (`reclaimsim_core::workload::access`), seeded from the same stream, and performs them
//! for real:
//!
//! - usemem: one anonymous private mapping per process (THP off by MADV_NOHUGEPAGE, since
//!   the model has base pages only); a touch writes one word of the page; the prefault
//!   walk (MAP_POPULATE in usemem) writes the word and then applies MADV_POPULATE_WRITE
//!   to the page, whose FOLL_TOUCH marks the folio accessed as MAP_POPULATE's does (a
//!   kernel without it is refused); `unmap` between passes is MADV_DONTNEED on the
//!   thread's span (the zap the model does). Major faults (getrusage, per thread) are the
//!   misses.
//! - file_read: files opened with POSIX_FADV_RANDOM (readahead off, one page per read, as
//!   the model reads); each access is first classified by mincore() on a never-touched
//!   MAP_SHARED mapping of the file (it does not disturb the page cache), then read with
//!   pread() of one page.
//!
//! With `pin` (kernel-run --pin), each thread runs pinned to the CPU the simulator gives
//! its task, where the host has that CPU ([`affinity`]).
//!
//! The caller (the Python front) places the process in the cgroup before calling
//! [`run_process`]; this crate does no cgroup or swap setup.

pub mod affinity;
pub mod calibrate;

use reclaimsim_core::scenario::{
    FileRead, MappingKind, Scenario, Trace, TraceTarget, Usemem, WorkloadSpec, PAGE_SIZE,
};
use reclaimsim_core::trace;
use reclaimsim_core::workload::access::{bounded, task_rng, Access, FileReadSeq, UsememSeq};
use serde::Serialize;
use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

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
const PUBLISH_EVERY: u64 = 256;

/// A thread's slot in the live-statistics file: a shared mapping the parent reads after
/// the process ends, also when the OOM killer ended it.
#[derive(Clone, Copy)]
struct Live(*mut u64);

// SAFETY: each thread writes only its own slot; the parent reads after the process exits.
unsafe impl Send for Live {}
unsafe impl Sync for Live {}

impl Live {
    fn publish(&self, st: &mut ThreadStats) {
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
    let w = sc
        .workloads
        .get(wi)
        .ok_or_else(|| format!("no workload {wi}: the scenario has {}", sc.workloads.len()))?;
    bounded(w).map_err(|e| {
        format!("scenario.workload[{wi}]: {e} (kernel-run needs workloads that end)")
    })?;
    match w {
        WorkloadSpec::Usemem(u) if u.mapping == MappingKind::SharedFile => Err(format!(
            "scenario.workload[{wi}]: kernel-run supports usemem mapping = \"anon\" only"
        )),
        WorkloadSpec::Usemem(u) if u.prealloc => Err(format!(
            "scenario.workload[{wi}].prealloc: true: kernel-run maps each process's area in the process itself (its workers share no parent's pages copy-on-write); allowed: prealloc = false"
        )),
        WorkloadSpec::Usemem(u) if u.prefault && !populate_write_supported() => Err(format!(
            "scenario.workload[{wi}].prefault: true: this kernel refuses MADV_POPULATE_WRITE (Linux 5.14 and later have it), with which kernel-run populates as MAP_POPULATE does; allowed: prefault = false"
        )),
        WorkloadSpec::Usemem(u) => Ok(u.processes),
        WorkloadSpec::FileRead(_) => Ok(1),
        WorkloadSpec::Trace(_) => Ok(1),
        WorkloadSpec::RequestChurn(_) => Err(format!(
            "scenario.workload[{wi}]: kernel-run does not replay request_churn (its accesses depend on simulated timing); allowed: usemem, file_read"
        )),
    }
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

/// How many files workload `wi` reads: a file_read workload's files, one for a trace
/// replayed as file reads, none for the others.
fn file_count(sc: &Scenario, wi: usize) -> usize {
    match &sc.workloads[wi] {
        WorkloadSpec::FileRead(f) => f.files.len(),
        WorkloadSpec::Trace(t) if t.target == TraceTarget::File => 1,
        _ => 0,
    }
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
    let sizes: Vec<u64> = match &sc.workloads[wi] {
        WorkloadSpec::FileRead(f) => f.files.iter().map(|s| s.pages() * PAGE_SIZE).collect(),
        WorkloadSpec::Trace(t) if t.target == TraceTarget::File => {
            // A file as long as the pages the trace's objects map to.
            let (_, _, pages) = trace::count(&t.path, t.format, t.csv.as_ref(), sc.seed)
                .map_err(|e| e.to_string())?;
            vec![pages.max(1) * PAGE_SIZE]
        }
        _ => return Ok(Vec::new()),
    };
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
    run_process_prepared(sc, wi, process, dir, record, live, None, false)
}

/// The id-to-page maps of a scenario's trace workloads, built ahead (see [`prepare`]).
#[derive(Default)]
pub struct Prepared {
    maps: Vec<Option<trace::PageMap>>,
}

/// Build, in the calling process, the id-to-page map of every trace workload (one pass
/// over each trace). A worker forked afterwards reads the map instead of building its own,
/// so the map's memory is not charged to the workload's cgroup (the model has no such
/// table in the simulated machine).
pub fn prepare(sc: &Scenario) -> Result<Prepared, String> {
    let mut maps = Vec::new();
    for w in &sc.workloads {
        maps.push(match w {
            WorkloadSpec::Trace(t) => {
                let mut src = trace::open(&t.path, t.format, t.csv.as_ref(), sc.seed)
                    .map_err(|e| e.to_string())?;
                let mut map = trace::PageMap::default();
                let mut n = 0u64;
                while let Some(r) = src.next_request().map_err(|e| e.to_string())? {
                    n += 1;
                    if t.requests != 0 && n > t.requests {
                        break;
                    }
                    map.map(&r)?;
                }
                Some(map)
            }
            _ => None,
        });
    }
    Ok(Prepared { maps })
}

/// [`run_process`] with trace maps built ahead by [`prepare`]; with `pin`, each thread
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
    let n = processes(sc, wi)?;
    if process >= n {
        return Err(format!(
            "workload {wi} has {n} process(es), not {}",
            process + 1
        ));
    }
    let (_map, slots) = live_slots(live, threads_per_process(&sc.workloads[wi]))?;
    let cpus = if pin {
        affinity::process_cpus(sc, wi, process)
    } else {
        Vec::new()
    };
    let threads = match &sc.workloads[wi] {
        WorkloadSpec::Usemem(u) => run_usemem(sc, wi, u, process, record, &slots, &cpus)?,
        WorkloadSpec::FileRead(f) => run_file_read(sc, wi, f, dir, record, &slots, &cpus)?,
        WorkloadSpec::Trace(t) => {
            let map = prepared
                .and_then(|p| p.maps.get(wi))
                .and_then(|m| m.as_ref());
            let (cpu, live) = (cpus.first().copied(), slots[0]);
            // On a thread of its own, like the other workloads' threads, so that pinning
            // it leaves the caller's affinity alone.
            let st = std::thread::scope(|scope| {
                scope
                    .spawn(move || on_cpu(cpu, || run_trace(sc, wi, t, dir, record, live, map)))
                    .join()
                    .map_err(|_| "the trace thread panicked".to_string())?
            })?;
            vec![st]
        }
        WorkloadSpec::RequestChurn(_) => unreachable!("rejected by processes()"),
    };
    Ok(ProcessStats {
        workload: wi,
        process,
        threads,
    })
}

/// Threads of one process of a workload.
pub fn threads_per_process(w: &WorkloadSpec) -> u32 {
    match w {
        WorkloadSpec::Usemem(u) => u.threads,
        WorkloadSpec::FileRead(f) => f.threads,
        WorkloadSpec::RequestChurn(r) => r.threads,
        WorkloadSpec::Trace(_) => 1,
    }
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// This thread's (major, minor) page faults so far.
fn thread_faults() -> (u64, u64) {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        (ru.ru_majflt as u64, ru.ru_minflt as u64)
    }
}

/// An anonymous private mapping, unmapped on drop.
struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; threads write disjoint or racy-but-benign words.
unsafe impl Sync for Mapping {}
unsafe impl Send for Mapping {}

impl Mapping {
    fn anon(len: usize) -> Result<Self, String> {
        Self::anonymous(len, libc::MAP_PRIVATE)
    }

    /// A shared anonymous mapping (shmem), as fio's mmap engine on /dev/zero makes.
    fn shmem(len: usize) -> Result<Self, String> {
        Self::anonymous(len, libc::MAP_SHARED)
    }

    fn anonymous(len: usize, share: libc::c_int) -> Result<Self, String> {
        // SAFETY: a fresh anonymous mapping; failure is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(PAGE),
                libc::PROT_READ | libc::PROT_WRITE,
                share | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap (anonymous)"));
        }
        // SAFETY: advice on our own mapping.
        unsafe { libc::madvise(p, len.max(PAGE), libc::MADV_NOHUGEPAGE) };
        Ok(Mapping {
            base: p as *mut u8,
            len: len.max(PAGE),
        })
    }

    fn file_rw(f: &File, len: usize) -> Result<Self, String> {
        // SAFETY: a shared read-write mapping of a small file we opened; failure is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap (live statistics)"));
        }
        Ok(Mapping {
            base: p as *mut u8,
            len,
        })
    }

    fn file(f: &File, len: usize) -> Result<Self, String> {
        // SAFETY: a read-only shared mapping of an open file; failure is checked. It is
        // never touched, only queried with mincore.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len.max(PAGE),
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(os_err("mmap (file, for mincore)"));
        }
        Ok(Mapping {
            base: p as *mut u8,
            len: len.max(PAGE),
        })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping we created.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Run a workload thread's `body` pinned to `cpu` when given (and allowed), recording the
/// CPUs it could run on.
fn on_cpu(
    cpu: Option<u32>,
    body: impl FnOnce() -> Result<ThreadStats, String>,
) -> Result<ThreadStats, String> {
    let allowed = affinity::pin_workload_thread(cpu);
    let mut st = body()?;
    st.affinity = allowed;
    Ok(st)
}

/// Run a usemem process's threads, thread t pinned to `cpus[t]` when given.
fn run_usemem(
    sc: &Scenario,
    wi: usize,
    u: &Usemem,
    process: u32,
    record: bool,
    slots: &[Live],
    cpus: &[u32],
) -> Result<Vec<ThreadStats>, String> {
    let pages = u.size.pages() as usize;
    let map = if u.mapping == MappingKind::Shmem {
        Mapping::shmem(pages * PAGE)?
    } else {
        Mapping::anon(pages * PAGE)?
    };
    let rate = u.rate.map(|r| r.0);
    let map = &map;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..u.threads)
            .map(|t| {
                let task = process * u.threads + t;
                let stream = reclaimsim_core::workload::access::task_stream(sc, wi, task);
                let seq = UsememSeq::new(u, t, task_rng(sc, wi, task));
                let live = slots[t as usize];
                let cpu = cpus.get(t as usize).copied();
                scope.spawn(move || {
                    on_cpu(cpu, || {
                        Ok(usemem_thread(map, seq, stream, record, live, rate))
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a usemem thread panicked".to_string())?
            })
            .collect()
    })
}

fn usemem_thread(
    map: &Mapping,
    seq: UsememSeq,
    stream: u64,
    record: bool,
    live: Live,
    rate: Option<u64>,
) -> ThreadStats {
    let t0 = std::time::Instant::now();
    let (maj0, min0) = thread_faults();
    let mut st = ThreadStats {
        stream,
        log: record.then(Vec::new),
        started: Some(std::time::Instant::now()),
        ..Default::default()
    };
    for a in seq {
        match a {
            Access::Touch { vpn, .. } | Access::Populate { vpn } => {
                // SAFETY: vpn < pages of the mapping (the generator stays in the span).
                let p = unsafe { map.base.add(vpn as usize * PAGE) } as *mut u64;
                unsafe { p.write_volatile(st.accesses ^ 0x5a5a) };
                if let Access::Populate { .. } = a {
                    // MAP_POPULATE's state, page by page: faulted in for writing (the word
                    // above, so that the page is not all zeros, which zram would store
                    // without compressing) and marked accessed by GUP's FOLL_TOUCH, which
                    // MADV_POPULATE_WRITE (Linux 5.14) applies to the page it finds present.
                    // `processes` refused a kernel without it; the page is ours and mapped.
                    // SAFETY: advice on page vpn of our own mapping.
                    unsafe {
                        libc::madvise(p as *mut libc::c_void, PAGE, libc::MADV_POPULATE_WRITE)
                    };
                }
                st.accesses += 1;
                if let Some(r) = rate {
                    // fio's rate: sleep while ahead of `r` bytes per second.
                    let due = std::time::Duration::from_secs_f64(
                        (st.accesses * PAGE as u64) as f64 / r.max(1) as f64,
                    );
                    if let Some(wait) = due.checked_sub(t0.elapsed()) {
                        std::thread::sleep(wait);
                    }
                }
                if st.accesses.is_multiple_of(PUBLISH_EVERY) {
                    usemem_faults(&mut st, maj0, min0);
                    live.publish(&mut st);
                }
                if let Some(l) = st.log.as_mut() {
                    let vpn = ((p as usize - map.base as usize) / PAGE) as u32;
                    l.push(match a {
                        Access::Populate { .. } => Access::Populate { vpn },
                        _ => Access::Touch {
                            vpn,
                            random: matches!(a, Access::Touch { random: true, .. }),
                        },
                    });
                }
            }
            Access::Unmap { lo, hi } => {
                let start = unsafe { map.base.add(lo as usize * PAGE) };
                let len = (hi - lo) as usize * PAGE;
                // SAFETY: zapping a range of our own mapping; the next touch zero-fills.
                unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
                if let Some(l) = st.log.as_mut() {
                    let lo = (start as usize - map.base as usize) / PAGE;
                    l.push(Access::Unmap {
                        lo: lo as u32,
                        hi: (lo + len / PAGE) as u32,
                    });
                }
            }
            Access::Read { .. } => unreachable!("usemem reads no files"),
        }
    }
    usemem_faults(&mut st, maj0, min0);
    live.publish(&mut st);
    st
}

/// A usemem thread's faults since it started: major faults are its misses, and an access
/// that did not fault is a hit.
fn usemem_faults(st: &mut ThreadStats, maj0: u64, min0: u64) {
    let (maj, min) = thread_faults();
    st.major_faults = maj - maj0;
    st.minor_faults = min - min0;
    st.misses = st.major_faults;
    st.hits = st
        .accesses
        .saturating_sub(st.major_faults + st.minor_faults);
}

struct OpenFile {
    file: File,
    map: Mapping,
}

/// Run a file_read workload's threads, thread t pinned to `cpus[t]` when given.
fn run_file_read(
    sc: &Scenario,
    wi: usize,
    f: &FileRead,
    dir: &Path,
    record: bool,
    slots: &[Live],
    cpus: &[u32],
) -> Result<Vec<ThreadStats>, String> {
    let mut files = Vec::new();
    for (j, sz) in f.files.iter().enumerate() {
        let p = file_path(dir, wi, j);
        let file = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let len = (sz.pages() * PAGE_SIZE) as usize;
        // SAFETY: advice on an open descriptor.
        let rc = unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
        if rc != 0 {
            return Err(format!(
                "posix_fadvise(POSIX_FADV_RANDOM) {}: error {rc}",
                p.display()
            ));
        }
        let map = Mapping::file(&file, len)?;
        files.push(OpenFile { file, map });
    }
    let files = &files;
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..f.threads)
            .map(|t| {
                let stream = reclaimsim_core::workload::access::task_stream(sc, wi, t);
                let seq = FileReadSeq::new(f, task_rng(sc, wi, t));
                let live = slots[t as usize];
                let cpu = cpus.get(t as usize).copied();
                scope.spawn(move || {
                    on_cpu(cpu, || file_read_thread(files, seq, stream, record, live))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a file_read thread panicked".to_string())?
            })
            .collect()
    })
}

fn file_read_thread(
    files: &[OpenFile],
    seq: FileReadSeq,
    stream: u64,
    record: bool,
    live: Live,
) -> Result<ThreadStats, String> {
    let (maj0, min0) = thread_faults();
    let mut st = ThreadStats {
        stream,
        log: record.then(Vec::new),
        started: Some(std::time::Instant::now()),
        ..Default::default()
    };
    let mut buf = vec![0u8; PAGE];
    let mut vec = [0u8; 1];
    for a in seq {
        let Access::Read { file, page } = a else {
            unreachable!("file_read only reads")
        };
        let f = &files[file as usize];
        let off = page as usize * PAGE;
        // SAFETY: a page-aligned address inside our mapping; mincore fills one byte.
        let rc = unsafe {
            libc::mincore(
                f.map.base.add(off) as *mut libc::c_void,
                PAGE,
                vec.as_mut_ptr(),
            )
        };
        if rc != 0 {
            return Err(os_err("mincore"));
        }
        let cached = vec[0] & 1 != 0;
        // SAFETY: reading one page into our buffer.
        let n = unsafe {
            libc::pread(
                f.file.as_raw_fd(),
                buf.as_mut_ptr() as *mut libc::c_void,
                PAGE,
                off as libc::off_t,
            )
        };
        if n != PAGE as isize {
            return Err(format!(
                "pread of page {page} of file {file}: {}",
                if n < 0 {
                    std::io::Error::last_os_error().to_string()
                } else {
                    format!("short read ({n} bytes)")
                }
            ));
        }
        st.accesses += 1;
        if cached {
            st.hits += 1;
        } else {
            st.misses += 1;
        }
        if st.accesses.is_multiple_of(PUBLISH_EVERY) {
            live.publish(&mut st);
        }
        if let Some(l) = st.log.as_mut() {
            l.push(Access::Read {
                file: files.iter().position(|x| std::ptr::eq(x, f)).unwrap_or(0) as u32,
                page: (off / PAGE) as u32,
            });
        }
    }
    let (maj, min) = thread_faults();
    st.major_faults = maj - maj0;
    st.minor_faults = min - min0;
    live.publish(&mut st);
    Ok(st)
}

/// Replay a trace workload in this process (one thread): each request's object maps to
/// pages exactly as in the simulator (`trace::PageMap`); a file target reads those pages
/// of a file made long enough beforehand, an anon target writes them in one mapping.
fn run_trace(
    sc: &Scenario,
    wi: usize,
    t: &Trace,
    dir: &Path,
    record: bool,
    live: Live,
    prebuilt: Option<&trace::PageMap>,
) -> Result<ThreadStats, String> {
    let stream = reclaimsim_core::workload::access::task_stream(sc, wi, 0);
    let mut src =
        trace::open(&t.path, t.format, t.csv.as_ref(), sc.seed).map_err(|e| e.to_string())?;
    let (maj0, min0) = thread_faults();
    let mut st = ThreadStats {
        stream,
        log: record.then(Vec::new),
        started: Some(std::time::Instant::now()),
        ..Default::default()
    };
    let mut own = trace::PageMap::default();
    // Objects map to the same pages whichever map is used: both assign them in order of
    // first appearance over the same stream.
    let mut map_req = |req: &trace::Request| -> Result<(u32, u32), String> {
        match prebuilt {
            Some(m) => m
                .get(req.obj)
                .ok_or_else(|| "trace changed since it was prepared".to_string()),
            None => own.map(req).map(|(b, p, _)| (b, p)),
        }
    };
    let limit = if t.requests == 0 {
        u64::MAX
    } else {
        t.requests
    };
    let mut requests = 0u64;
    match t.target {
        TraceTarget::File => {
            let p = file_path(dir, wi, 0);
            let file = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            let len = file.metadata().map_err(|e| e.to_string())?.len() as usize;
            // SAFETY: advice on an open descriptor.
            unsafe { libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_RANDOM) };
            let files = [OpenFile {
                map: Mapping::file(&file, len)?,
                file,
            }];
            let mut buf = vec![0u8; PAGE];
            while requests < limit {
                let Some(req) = src.next_request().map_err(|e| e.to_string())? else {
                    break;
                };
                requests += 1;
                let (base, pages) = map_req(&req)?;
                for page in base..base + pages {
                    read_page(&files, 0, page, &mut buf, &mut st)?;
                    if st.accesses.is_multiple_of(PUBLISH_EVERY) {
                        live.publish(&mut st);
                    }
                }
            }
            let (maj, min) = thread_faults();
            st.major_faults = maj - maj0;
            st.minor_faults = min - min0;
        }
        TraceTarget::Anon => {
            // Pages are assigned as objects appear: size the mapping from a first pass.
            let (_, _, total) = trace::count(&t.path, t.format, t.csv.as_ref(), sc.seed)
                .map_err(|e| e.to_string())?;
            let area = Mapping::anon(total.max(1) as usize * PAGE)?;
            while requests < limit {
                let Some(req) = src.next_request().map_err(|e| e.to_string())? else {
                    break;
                };
                requests += 1;
                let (base, pages) = map_req(&req)?;
                for vpn in base..base + pages {
                    // SAFETY: vpn < total pages of the mapping.
                    let p = unsafe { area.base.add(vpn as usize * PAGE) } as *mut u64;
                    unsafe { p.write_volatile(st.accesses ^ 0x5a5a) };
                    st.accesses += 1;
                    if let Some(l) = st.log.as_mut() {
                        l.push(Access::Touch {
                            vpn: ((p as usize - area.base as usize) / PAGE) as u32,
                            random: true,
                        });
                    }
                    if st.accesses.is_multiple_of(PUBLISH_EVERY) {
                        usemem_faults(&mut st, maj0, min0);
                        live.publish(&mut st);
                    }
                }
            }
            usemem_faults(&mut st, maj0, min0);
        }
    }
    live.publish(&mut st);
    Ok(st)
}

/// Read page `page` of file `file` after classifying it with mincore (see the module doc).
fn read_page(
    files: &[OpenFile],
    file: u32,
    page: u32,
    buf: &mut [u8],
    st: &mut ThreadStats,
) -> Result<(), String> {
    let f = &files[file as usize];
    let off = page as usize * PAGE;
    let mut vec = [0u8; 1];
    // SAFETY: a page-aligned address inside our mapping; mincore fills one byte.
    let rc = unsafe {
        libc::mincore(
            f.map.base.add(off) as *mut libc::c_void,
            PAGE,
            vec.as_mut_ptr(),
        )
    };
    if rc != 0 {
        return Err(os_err("mincore"));
    }
    // SAFETY: reading one page into our buffer.
    let n = unsafe {
        libc::pread(
            f.file.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            PAGE,
            off as libc::off_t,
        )
    };
    if n != PAGE as isize {
        return Err(format!(
            "pread of page {page} of file {file}: {}",
            if n < 0 {
                std::io::Error::last_os_error().to_string()
            } else {
                format!("short read ({n} bytes)")
            }
        ));
    }
    st.accesses += 1;
    if vec[0] & 1 != 0 {
        st.hits += 1;
    } else {
        st.misses += 1;
    }
    if let Some(l) = st.log.as_mut() {
        l.push(Access::Read {
            file,
            page: (off / PAGE) as u32,
        });
    }
    Ok(())
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

/// Create the files of every file_read workload of a scenario given as JSON.
pub fn create_files_json(scenario_json: &str, dir: &str) -> Result<(), String> {
    let sc = Scenario::from_json(scenario_json).map_err(|e| e.to_string())?;
    for wi in 0..sc.workloads.len() {
        create_files(&sc, wi, Path::new(dir))?;
    }
    Ok(())
}
