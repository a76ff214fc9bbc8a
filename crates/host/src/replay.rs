//! The host replay of one process of a workload: its anonymous area and its files, and
//! one OS thread per workload thread performing the accesses the workload's module
//! describes (`reclaimsim_core::workload::host`), paced by the same rule as the
//! simulator's task (usemem's `Pace`: an open or a closed loop). Nothing here names a
//! workload.
//!
//! A touch writes one word of its page (THP off by MADV_NOHUGEPAGE, since the model has
//! base pages only); a populate writes the word and then applies MADV_POPULATE_WRITE to
//! the page, whose FOLL_TOUCH marks the folio accessed as MAP_POPULATE's does; an unmap is
//! MADV_DONTNEED on the range (the zap the model does). A touch's major faults
//! (getrusage, per thread) are its misses. A read is first classified by mincore() on a
//! never-touched MAP_SHARED mapping of the file (it does not disturb the page cache), then
//! made with pread() of one page, the file opened with POSIX_FADV_RANDOM (readahead off,
//! one page per read, as the model reads).

use crate::{affinity, file_path, Live, ThreadStats, PAGE, PUBLISH_EVERY};
use reclaimsim_core::workload::access::Access;
use reclaimsim_core::workload::host::{HostArea, HostProcess, HostThread};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};

/// The clock a replay thread paces itself by.
pub trait Clock {
    /// Nanoseconds since the thread started.
    fn now(&mut self) -> u64;
    /// Wait until `t` [ns since the thread started].
    fn sleep_until(&mut self, t: u64);
}

/// The wall clock, counted from the thread's start.
pub struct WallClock(Instant);

impl WallClock {
    pub fn new() -> Self {
        WallClock(Instant::now())
    }
}

impl Default for WallClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for WallClock {
    fn now(&mut self) -> u64 {
        self.0.elapsed().as_nanos() as u64
    }

    fn sleep_until(&mut self, t: u64) {
        let now = self.now();
        if t > now {
            std::thread::sleep(Duration::from_nanos(t - now));
        }
    }
}

/// Makes each replay thread's clock, on that thread when it starts.
pub type Clocks<'a> = &'a (dyn Fn() -> Box<dyn Clock + Send> + Sync);

/// What the threads of a process share: its area and its files.
struct Process {
    area: Option<Mapping>,
    files: Vec<OpenFile>,
}

/// One file of a workload, open for pread and mapped (never touched) for mincore.
struct OpenFile {
    file: File,
    map: Mapping,
}

/// A thread's accesses by kind, for its hits and misses.
#[derive(Default)]
struct Counts {
    touches: u64,
    read_hits: u64,
    read_misses: u64,
}

impl Counts {
    /// The thread's faults since it started (`maj0`, `min0` then), and its hits and
    /// misses: a read is classified by mincore; a touch that did not fault is a hit, and
    /// its major faults are its misses.
    fn update(&self, st: &mut ThreadStats, maj0: u64, min0: u64) {
        let (maj, min) = thread_faults();
        st.major_faults = maj - maj0;
        st.minor_faults = min - min0;
        st.hits = self.read_hits;
        st.misses = self.read_misses;
        if self.touches > 0 {
            st.misses += st.major_faults;
            st.hits += self
                .touches
                .saturating_sub(st.major_faults + st.minor_faults);
        }
    }
}

/// Run process `p` of workload `wi`, whose `files` files are under `dir`: thread t pinned
/// to `cpus[t]` when given, publishing into `slots[t]`, keeping its accesses with
/// `record`, pacing itself by `clocks`' clock (None: the wall clock).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    p: HostProcess<'_>,
    dir: &Path,
    wi: usize,
    files: usize,
    record: bool,
    slots: &[Live],
    cpus: &[u32],
    clocks: Option<Clocks>,
) -> Result<Vec<ThreadStats>, String> {
    let area = p.area.map(map_area).transpose()?;
    let files = open_files(dir, wi, files)?;
    let shared = &Process { area, files };
    std::thread::scope(|scope| {
        let handles: Vec<_> = p
            .threads
            .into_iter()
            .enumerate()
            .map(|(t, th)| {
                let live = slots[t];
                let cpu = cpus.get(t).copied();
                scope.spawn(move || {
                    on_cpu(cpu, || {
                        let mut clock: Box<dyn Clock + Send> = match clocks {
                            Some(c) => c(),
                            None => Box::new(WallClock::new()),
                        };
                        replay_thread(shared, th, record, live, clock.as_mut())
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "a workload thread panicked".to_string())?
            })
            .collect()
    })
}

/// A process's anonymous area: MAP_SHARED (shmem, as fio's mmap engine makes of
/// /dev/zero) or private.
fn map_area(a: HostArea) -> Result<Mapping, String> {
    let len = a.pages as usize * PAGE;
    if a.shared {
        Mapping::shmem(len)
    } else {
        Mapping::anon(len)
    }
}

/// Open workload `wi`'s `n` files under `dir`, readahead off.
fn open_files(dir: &Path, wi: usize, n: usize) -> Result<Vec<OpenFile>, String> {
    let mut files = Vec::new();
    for j in 0..n {
        let p = file_path(dir, wi, j);
        let file = File::open(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let len = file.metadata().map_err(|e| e.to_string())?.len() as usize;
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
    Ok(files)
}

/// One replay thread: each access performed, then the pace's wait; its counters
/// published every PUBLISH_EVERY accesses and at the end.
fn replay_thread(
    p: &Process,
    th: HostThread,
    record: bool,
    live: Live,
    clock: &mut dyn Clock,
) -> Result<ThreadStats, String> {
    let (maj0, min0) = thread_faults();
    let (vol0, invol0) = thread_switches();
    let mut st = ThreadStats {
        stream: th.stream,
        log: record.then(Vec::new),
        started: Some(Instant::now()),
        ..Default::default()
    };
    let mut n = Counts::default();
    let mut buf = vec![0u8; PAGE];
    let mut pace = th.pace;
    for a in th.accesses {
        if perform(p, a?, &mut st, &mut n, &mut buf)? && st.accesses.is_multiple_of(PUBLISH_EVERY) {
            n.update(&mut st, maj0, min0);
            live.publish(&mut st);
        }
        if let Some(due) = pace.as_mut().and_then(|next| next(clock.now())) {
            clock.sleep_until(due);
        }
    }
    n.update(&mut st, maj0, min0);
    live.publish(&mut st);
    let (vol, invol) = thread_switches();
    st.voluntary_ctxt_switches = Some(vol - vol0);
    st.nonvoluntary_ctxt_switches = Some(invol - invol0);
    Ok(st)
}

/// Perform one access; true when it counts as one (an unmap does not).
fn perform(
    p: &Process,
    a: Access,
    st: &mut ThreadStats,
    n: &mut Counts,
    buf: &mut [u8],
) -> Result<bool, String> {
    match a {
        Access::Touch { vpn, random } => {
            let v = touch(area(p)?, vpn, false, st);
            n.touches += 1;
            log(st, Access::Touch { vpn: v, random });
        }
        Access::Populate { vpn } => {
            let v = touch(area(p)?, vpn, true, st);
            n.touches += 1;
            log(st, Access::Populate { vpn: v });
        }
        Access::Unmap { lo, hi } => {
            let m = area(p)?;
            // SAFETY: lo < pages of the mapping (the generator stays in the area).
            let start = unsafe { m.base.add(lo as usize * PAGE) };
            let len = (hi - lo) as usize * PAGE;
            // SAFETY: zapping a range of our own mapping; the next touch zero-fills.
            unsafe { libc::madvise(start as *mut libc::c_void, len, libc::MADV_DONTNEED) };
            let lo = (start as usize - m.base as usize) / PAGE;
            let hi = (lo + len / PAGE) as u32;
            log(st, Access::Unmap { lo: lo as u32, hi });
            return Ok(false);
        }
        Access::Read { file, page } => read_page(&p.files, file, page, buf, st, n)?,
    }
    Ok(true)
}

/// The process's area, which an anonymous access needs.
fn area(p: &Process) -> Result<&Mapping, String> {
    p.area
        .as_ref()
        .ok_or_else(|| "an anonymous access in a process without an area".to_string())
}

/// Write one word of page `vpn` of the area, and with `populate` mark it accessed as
/// MAP_POPULATE does; the page as the address written says (for the log).
fn touch(m: &Mapping, vpn: u32, populate: bool, st: &mut ThreadStats) -> u32 {
    // SAFETY: vpn < pages of the mapping (the generator stays in the area).
    let p = unsafe { m.base.add(vpn as usize * PAGE) } as *mut u64;
    unsafe { p.write_volatile(st.accesses ^ 0x5a5a) };
    if populate {
        // MAP_POPULATE's state, page by page: faulted in for writing (the word above, so
        // that the page is not all zeros, which zram would store without compressing) and
        // marked accessed by GUP's FOLL_TOUCH, which MADV_POPULATE_WRITE (Linux 5.14)
        // applies to the page it finds present. `processes` refused a kernel without it.
        // SAFETY: advice on page vpn of our own mapping.
        unsafe { libc::madvise(p as *mut libc::c_void, PAGE, libc::MADV_POPULATE_WRITE) };
    }
    st.accesses += 1;
    ((p as usize - m.base as usize) / PAGE) as u32
}

/// Keep an access in the thread's log, when recording.
fn log(st: &mut ThreadStats, a: Access) {
    if let Some(l) = st.log.as_mut() {
        l.push(a);
    }
}

/// Read page `page` of file `file` after classifying it with mincore (see the module doc).
fn read_page(
    files: &[OpenFile],
    file: u32,
    page: u32,
    buf: &mut [u8],
    st: &mut ThreadStats,
    n: &mut Counts,
) -> Result<(), String> {
    let f = files
        .get(file as usize)
        .ok_or_else(|| format!("a read of file {file}, which the workload does not have"))?;
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
    let got = unsafe {
        libc::pread(
            f.file.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            PAGE,
            off as libc::off_t,
        )
    };
    if got != PAGE as isize {
        return Err(format!(
            "pread of page {page} of file {file}: {}",
            if got < 0 {
                std::io::Error::last_os_error().to_string()
            } else {
                format!("short read ({got} bytes)")
            }
        ));
    }
    st.accesses += 1;
    if vec[0] & 1 != 0 {
        n.read_hits += 1;
    } else {
        n.read_misses += 1;
    }
    if let Some(l) = st.log.as_mut() {
        l.push(Access::Read {
            file,
            page: (off / PAGE) as u32,
        });
    }
    Ok(())
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// getrusage(RUSAGE_THREAD): this thread's resource usage so far.
fn thread_rusage() -> libc::rusage {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
        ru
    }
}

/// This thread's (major, minor) page faults so far.
fn thread_faults() -> (u64, u64) {
    let ru = thread_rusage();
    (ru.ru_majflt as u64, ru.ru_minflt as u64)
}

/// This thread's context switches so far, (voluntary: it blocked, involuntary: it was
/// preempted), as getrusage's ru_nvcsw and ru_nivcsw and /proc's
/// voluntary_ctxt_switches and nonvoluntary_ctxt_switches count them. Each is followed by
/// a switch back in, where context_switch() calls lru_gen_use_mm for the process.
fn thread_switches() -> (u64, u64) {
    let ru = thread_rusage();
    (ru.ru_nvcsw as u64, ru.ru_nivcsw as u64)
}

/// An anonymous private mapping, unmapped on drop.
pub(crate) struct Mapping {
    pub(crate) base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory; threads write disjoint or racy-but-benign words.
unsafe impl Sync for Mapping {}
unsafe impl Send for Mapping {}

impl Mapping {
    pub(crate) fn anon(len: usize) -> Result<Self, String> {
        Self::anonymous(len, libc::MAP_PRIVATE)
    }

    /// A shared anonymous mapping (shmem), as fio's mmap engine on /dev/zero makes.
    pub(crate) fn shmem(len: usize) -> Result<Self, String> {
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

    pub(crate) fn file_rw(f: &File, len: usize) -> Result<Self, String> {
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

    pub(crate) fn file(f: &File, len: usize) -> Result<Self, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_sleeps_is_switched_out_each_time() {
        // Each nanosleep blocks the thread: a voluntary context switch (ru_nvcsw), then a
        // switch back in.
        let (before, _) = thread_switches();
        for _ in 0..3 {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(thread_switches().0 - before >= 3);
    }
}
