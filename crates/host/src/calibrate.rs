//! Microbenchmarks of this machine's kernel and hardware, for `reclaimsim calibrate`.
//!
//! Each benchmark times one primitive the cost table names, from user space, on the
//! running kernel: a loop over many pages (or many handoffs), repeated, the median of the
//! repetitions kept. What a benchmark cannot isolate (a fault is entry, allocation,
//! zeroing and mapping at once) it reports as a *path* figure; the Python front turns
//! paths into cost-table entries by subtracting the entries it already has, and says so
//! in each entry's `source`.
//!
//! Pages are filled the way kernel-run's workloads fill them (one word written per page),
//! so what zram compresses here is what it compresses in the calibration cases.
//!
//! Nothing here asserts a time: the figures are measurements, and the tests check only
//! that each benchmark does the work it says (pages resident, pages swapped out).

use crate::affinity;
use serde::Serialize;
use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

const PAGE: usize = 4096;

/// One measured figure.
#[derive(Debug, Clone, Serialize)]
pub struct Figure {
    /// The benchmark's name (a cost-table entry, or a path the front decomposes).
    pub name: &'static str,
    /// Median nanoseconds per operation.
    pub ns: f64,
    /// Spread: (max - min) / median over the repetitions.
    pub spread: f64,
    /// Operations timed per repetition.
    pub ops: u64,
    /// What was timed.
    pub how: String,
}

/// Sizes of a calibration run.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    /// Anonymous region [pages].
    pub anon_pages: usize,
    /// File size [pages].
    pub file_pages: usize,
    /// Repetitions of each benchmark.
    pub reps: usize,
    /// Cache-line round trips per repetition.
    pub pingpongs: u64,
}

fn os_err(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

/// An anonymous private mapping without THP, unmapped on drop.
struct Anon {
    base: *mut u8,
    len: usize,
}

impl Anon {
    fn new(pages: usize) -> Result<Anon, String> {
        let len = pages * PAGE;
        // SAFETY: a fresh private anonymous mapping; checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        // SAFETY: advice on our own mapping. Best effort: only a kernel without THP
        // refuses it, and such a kernel maps no huge pages anyway.
        unsafe { libc::madvise(base, len, libc::MADV_NOHUGEPAGE) };
        Ok(Anon {
            base: base as *mut u8,
            len,
        })
    }

    fn pages(&self) -> usize {
        self.len / PAGE
    }

    /// Write one word of page `i` (what a usemem touch does).
    fn touch(&self, i: usize, v: u64) {
        // SAFETY: i < pages; the mapping is ours and writable.
        unsafe { std::ptr::write_volatile(self.base.add(i * PAGE) as *mut u64, v) };
    }

    fn advise(&self, advice: libc::c_int) -> Result<(), String> {
        // SAFETY: advice on our own mapping.
        if unsafe { libc::madvise(self.base as *mut _, self.len, advice) } != 0 {
            return Err(os_err("madvise"));
        }
        Ok(())
    }

    /// madvise(MADV_DONTNEED) of each page on its own: per call the syscall, the zap of
    /// one PTE and its TLB flush.
    fn zap_each_page(&self) -> Result<(), String> {
        for i in 0..self.pages() {
            // SAFETY: advice on page i of our own mapping.
            let rc = unsafe {
                libc::madvise(self.base.add(i * PAGE) as *mut _, PAGE, libc::MADV_DONTNEED)
            };
            if rc != 0 {
                return Err(os_err("madvise(MADV_DONTNEED)"));
            }
        }
        Ok(())
    }

    /// Pages of the mapping resident in memory.
    fn resident(&self) -> Result<usize, String> {
        resident_pages(self.base as *mut _, self.pages())
    }
}

impl Drop for Anon {
    fn drop(&mut self) {
        // SAFETY: unmapping the mapping we made.
        unsafe { libc::munmap(self.base as *mut _, self.len) };
    }
}

/// A forked child that keeps an [`Anon`] mapping shared copy-on-write with this process
/// until [`Sharer::finish`], then checks that every page still holds the word written
/// before the fork: the parent's writes meanwhile must have copied the pages, not changed
/// them in place.
struct Sharer {
    pid: libc::pid_t,
    /// The pipe's write end: one byte (or its closing) releases the child.
    go: libc::c_int,
}

impl Sharer {
    fn fork(m: &Anon, word: u64) -> Result<Sharer, String> {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: fds has room for the two descriptors.
        if unsafe { libc::pipe(fds.as_mut_ptr()) } != 0 {
            return Err(os_err("pipe"));
        }
        // SAFETY: the child only reads the pipe, reads its own copy of the mapping and
        // calls _exit: no allocation, no lock, nothing the other threads may hold.
        let pid = unsafe { libc::fork() };
        if pid == 0 {
            let mut b = 0u8;
            // SAFETY: one byte into a local; then reads of pages of the inherited mapping.
            unsafe {
                libc::close(fds[1]);
                libc::read(fds[0], &mut b as *mut u8 as *mut _, 1);
                let same = (0..m.pages())
                    .all(|i| std::ptr::read_volatile(m.base.add(i * PAGE) as *const u64) == word);
                libc::_exit(if same { 0 } else { 1 });
            }
        }
        // SAFETY: closing our copy of the read end.
        unsafe { libc::close(fds[0]) };
        if pid < 0 {
            let e = os_err("fork");
            // SAFETY: the write end is ours.
            unsafe { libc::close(fds[1]) };
            return Err(e);
        }
        Ok(Sharer { pid, go: fds[1] })
    }

    /// Release the child and wait for it; an error if it saw the parent's writes.
    fn finish(self) -> Result<(), String> {
        let (pid, go) = (self.pid, self.go);
        std::mem::forget(self);
        // SAFETY: our descriptor and child.
        let status = unsafe {
            libc::close(go);
            let mut status = 0;
            if libc::waitpid(pid, &mut status, 0) != pid {
                return Err(os_err("waitpid"));
            }
            status
        };
        if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
            return Err("copy-on-write: the forked child saw the parent's writes".into());
        }
        Ok(())
    }
}

impl Drop for Sharer {
    fn drop(&mut self) {
        // SAFETY: release and reap our child (an error path left it running).
        unsafe {
            libc::close(self.go);
            libc::waitpid(self.pid, std::ptr::null_mut(), 0);
        }
    }
}

/// Pages of the `pages`-page mapping at `base` resident in memory (mincore).
fn resident_pages(base: *mut libc::c_void, pages: usize) -> Result<usize, String> {
    let mut vec = vec![0u8; pages];
    // SAFETY: vec has one byte per page of the caller's mapping.
    if unsafe { libc::mincore(base, pages * PAGE, vec.as_mut_ptr()) } != 0 {
        return Err(os_err("mincore"));
    }
    Ok(vec.iter().filter(|b| **b & 1 == 1).count())
}

/// Median of per-operation timings and their spread ((max - min) / median).
pub(crate) fn median_spread(mut v: Vec<f64>) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    let med = v[v.len() / 2];
    let spread = if med > 0.0 {
        (v[v.len() - 1] - v[0]) / med
    } else {
        0.0
    };
    (med, spread)
}

/// Median and spread of `reps` timings of `f`, each returning (ns, ops).
pub(crate) fn repeat(
    reps: usize,
    mut f: impl FnMut() -> Result<(f64, u64), String>,
) -> Result<(f64, f64, u64), String> {
    let mut v = Vec::with_capacity(reps);
    let mut ops = 0;
    for _ in 0..reps.max(1) {
        let (ns, n) = f()?;
        ops = n.max(1);
        v.push(ns / ops as f64);
    }
    let (med, spread) = median_spread(v);
    Ok((med, spread, ops))
}

pub(crate) fn figure(name: &'static str, r: (f64, f64, u64), how: &str) -> Figure {
    Figure {
        name,
        ns: r.0,
        spread: r.1,
        ops: r.2,
        how: how.to_string(),
    }
}

/// A permutation of 0..n from a small xorshift generator (deterministic).
pub(crate) fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    let mut x = seed | 1;
    for i in (1..n).rev() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        v.swap(i, (x % (i as u64 + 1)) as usize);
    }
    v
}

/// Anonymous memory: resident accesses, first-touch faults, zeroing, zap.
pub fn anon(s: Sizes) -> Result<Vec<Figure>, String> {
    let n = s.anon_pages;
    let mut out = Vec::new();
    // First touch: do_anonymous_page (fault entry, allocation, zeroing, mapping, LRU add).
    let r = repeat(s.reps, || {
        let m = Anon::new(n)?;
        let t = Instant::now();
        for i in 0..n {
            m.touch(i, i as u64 + 1);
        }
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure("anon_fault_path", r, "first write to each page of a fresh private anonymous mapping (THP off): one do_anonymous_page per page"));
    let r = repeat(s.reps, || {
        let m = Anon::new(n)?;
        for i in 0..n {
            m.touch(i, 1);
        }
        let sharer = Sharer::fork(&m, 1)?;
        let t = Instant::now();
        for i in 0..n {
            m.touch(i, 2);
        }
        let ns = t.elapsed().as_nanos() as f64;
        sharer.finish()?;
        Ok((ns, n as u64))
    })?;
    out.push(figure("cow_fault_path", r, "first write to each page of a populated private anonymous mapping (THP off) that a forked child still maps: one do_wp_page copying the page (wp_page_copy) per page"));
    let m = Anon::new(n)?;
    for i in 0..n {
        m.touch(i, 1);
    }
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for i in 0..n {
            m.touch(i, i as u64);
        }
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure(
        "access_seq",
        r,
        "one word written per page, pages in address order, all resident",
    ));
    let order = shuffled(n, 0x9e37_79b9_7f4a_7c15);
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for &i in &order {
            m.touch(i, i as u64);
        }
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure(
        "access_random",
        r,
        "one word written per page, pages in a random permutation, all resident",
    ));
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for i in 0..n {
            // SAFETY: page i of our resident mapping.
            unsafe { std::ptr::write_bytes(m.base.add(i * PAGE), 0, PAGE) };
        }
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure(
        "page_zero",
        r,
        "memset of 4 KiB over resident pages in address order (what clear_page does)",
    ));
    let r = repeat(s.reps, || {
        let m = Anon::new(n)?;
        for i in 0..n {
            m.touch(i, 1);
        }
        let t = Instant::now();
        m.advise(libc::MADV_DONTNEED)?;
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure(
        "zap_path",
        r,
        "MADV_DONTNEED over populated anonymous pages: zap_pte_range, per page",
    ));
    Ok(out)
}

/// Swap through the active swap device (zram in calibrate): MADV_PAGEOUT of anonymous
/// pages (reclaim_pages: shrink_folio_list with a swap write each), then swap-in faults in
/// a random order. `Ok(None)` when nothing was swapped out (no swap).
pub fn swap(s: Sizes) -> Result<Option<Vec<Figure>>, String> {
    let n = s.anon_pages;
    let mut outs = Vec::new();
    let mut ins = Vec::new();
    for rep in 0..s.reps.max(1) {
        let m = Anon::new(n)?;
        for i in 0..n {
            m.touch(i, (i as u64) << 12 | rep as u64 | 1);
        }
        let t = Instant::now();
        m.advise(libc::MADV_PAGEOUT)?;
        let out_ns = t.elapsed().as_nanos() as f64;
        let left = m.resident()?;
        let swapped = n - left;
        if swapped < n / 2 {
            return Ok(None);
        }
        outs.push(out_ns / swapped as f64);
        let order = shuffled(n, 0x2545_f491_4f6c_dd1d ^ rep as u64);
        let t = Instant::now();
        for &i in &order {
            m.touch(i, 7);
        }
        ins.push(t.elapsed().as_nanos() as f64 / n as f64);
    }
    let stat = |v: Vec<f64>| {
        let (med, spread) = median_spread(v);
        (med, spread, n as u64)
    };
    Ok(Some(vec![
        figure("swap_out_path", stat(outs), "MADV_PAGEOUT of written anonymous pages, per page swapped out (mincore after): reclaim_pages -> shrink_folio_list with one swap write each"),
        figure("swap_in_path", stat(ins), "write to each swapped-out page in a random order: do_swap_page with a synchronous read each"),
    ]))
}

/// A file of `pages` pages in `dir`, written and synced (removed on drop).
struct TmpFile {
    f: File,
    path: std::path::PathBuf,
    pages: usize,
}

impl TmpFile {
    fn new(dir: &Path, pages: usize) -> Result<TmpFile, String> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let path = dir.join(format!("reclaimsim-calibrate-{}", std::process::id()));
        // Created new (O_EXCL: never through a link, never someone else's file).
        let mut f = File::options()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| format!("{}: {e}", path.display()))?;
        let mut buf = vec![0u8; PAGE];
        for i in 0..pages {
            buf[..8].copy_from_slice(&(i as u64 + 1).to_le_bytes());
            f.write_all(&buf)
                .map_err(|e| format!("{}: {e}", path.display()))?;
        }
        f.sync_all()
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(TmpFile { f, path, pages })
    }

    fn fadvise(&self, advice: libc::c_int) {
        // SAFETY: advice on our own descriptor.
        unsafe { libc::posix_fadvise(self.f.as_raw_fd(), 0, 0, advice) };
    }

    fn pread(&self, i: usize, buf: &mut [u8]) -> Result<(), String> {
        // SAFETY: buf is PAGE bytes we own.
        let r = unsafe {
            libc::pread(
                self.f.as_raw_fd(),
                buf.as_mut_ptr() as *mut _,
                PAGE,
                (i * PAGE) as libc::off_t,
            )
        };
        if r != PAGE as isize {
            return Err(os_err("pread"));
        }
        Ok(())
    }
}

impl Drop for TmpFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Page cache: read hits, read misses (the device), MADV_PAGEOUT of clean mapped pages.
pub fn page_cache(dir: &Path, s: Sizes) -> Result<Vec<Figure>, String> {
    let f = TmpFile::new(dir, s.file_pages)?;
    let n = f.pages;
    let mut buf = vec![0u8; PAGE];
    let mut out = Vec::new();
    f.fadvise(libc::POSIX_FADV_RANDOM);
    for i in 0..n {
        f.pread(i, &mut buf)?;
    }
    let order = shuffled(n, 0x5851_f42d_4c95_7f2d);
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for &i in &order {
            f.pread(i, &mut buf)?;
        }
        Ok((t.elapsed().as_nanos() as f64, n as u64))
    })?;
    out.push(figure(
        "file_read_hit",
        r,
        "pread of one 4 KiB page-cache page, pages in a random order, all cached",
    ));
    // Misses: a quarter of the file per repetition, dropped from the cache first.
    let misses = (n / 4).max(1);
    let r = repeat(s.reps, || {
        f.fadvise(libc::POSIX_FADV_DONTNEED);
        f.fadvise(libc::POSIX_FADV_RANDOM);
        let t = Instant::now();
        for &i in order.iter().take(misses) {
            f.pread(i, &mut buf)?;
        }
        Ok((t.elapsed().as_nanos() as f64, misses as u64))
    })?;
    out.push(figure("file_read_miss_path", r, "pread of one uncached 4 KiB page (POSIX_FADV_DONTNEED before, readahead off by POSIX_FADV_RANDOM), random order: filemap_read with a synchronous device read"));
    // Clean file folios reclaimed through MADV_PAGEOUT (reclaim_pages).
    let r = repeat(s.reps, || {
        for i in 0..n {
            f.pread(i, &mut buf)?;
        }
        // SAFETY: a shared read-only mapping of our file, checked for MAP_FAILED.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                n * PAGE,
                libc::PROT_READ,
                libc::MAP_SHARED,
                f.f.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(os_err("mmap"));
        }
        let mut sum = 0u64;
        for i in 0..n {
            // SAFETY: page i of the mapping; maps the cached page.
            sum = sum.wrapping_add(unsafe {
                std::ptr::read_volatile((base as *const u8).add(i * PAGE))
            } as u64);
        }
        std::hint::black_box(sum);
        let t = Instant::now();
        // SAFETY: advice on our own mapping.
        let advised = unsafe { libc::madvise(base, n * PAGE, libc::MADV_PAGEOUT) };
        let ns = t.elapsed().as_nanos() as f64;
        let advised = if advised == 0 {
            Ok(())
        } else {
            Err(os_err("madvise(MADV_PAGEOUT)"))
        };
        let resident = resident_pages(base, n);
        // SAFETY: unmapping our mapping.
        unsafe { libc::munmap(base, n * PAGE) };
        advised?;
        let gone = n - resident?;
        if gone < n / 2 {
            return Err(format!(
                "MADV_PAGEOUT reclaimed {gone} of {n} clean file pages"
            ));
        }
        Ok((ns, gone as u64))
    })?;
    out.push(figure("reclaim_clean_file_path", r, "MADV_PAGEOUT of mapped clean page-cache pages, per page reclaimed (mincore after): reclaim_pages -> shrink_folio_list, rmap unmap, free"));
    Ok(out)
}

/// Submitters at once for the device's throughput figures (each at queue depth 1).
const DEVICE_SUBMITTERS: usize = 16;
/// IOs per submitter and repetition of the throughput figures.
const DEVICE_IOS_EACH: usize = 128;

/// One 4 KiB O_DIRECT read or write of page `i` of `fd` from `buf` (a page-aligned page).
fn direct_io(fd: libc::c_int, write: bool, i: usize, buf: *mut u8) -> Result<(), String> {
    let off = (i * PAGE) as libc::off_t;
    // SAFETY: buf is a page of our own mapping; fd is open with O_DIRECT.
    let r = unsafe {
        if write {
            libc::pwrite(fd, buf as *const libc::c_void, PAGE, off)
        } else {
            libc::pread(fd, buf as *mut libc::c_void, PAGE, off)
        }
    };
    if r != PAGE as isize {
        return Err(os_err(if write {
            "O_DIRECT pwrite"
        } else {
            "O_DIRECT pread"
        }));
    }
    Ok(())
}

/// The block device under `dir`, bypassing the page cache (O_DIRECT on a file written
/// first): the latency of one 4 KiB write at queue depth 1, and the throughput of
/// DEVICE_SUBMITTERS threads reading, then writing, 4 KiB at random offsets at once, as
/// the time per IO at that load (the device's `interval`, 1 / IOPS), and the read latency
/// at queue depth 1 from a thread on each of `cpus` (a check: the model has no interrupt
/// CPU). None when the filesystem refuses O_DIRECT.
pub fn device(dir: &Path, cpus: (usize, usize), s: Sizes) -> Result<Option<Vec<Figure>>, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = TmpFile::new(dir, s.file_pages)?;
    let n = f.pages;
    let direct = match File::options()
        .read(true)
        .write(true)
        .custom_flags(libc::O_DIRECT)
        .open(&f.path)
    {
        Ok(d) => d,
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", f.path.display())),
    };
    let fd = direct.as_raw_fd();
    let order = shuffled(n, 0x2545_f491_4f6c_dd1d);
    let serial = n.min(1024);
    // One IO at a time over the first `serial` pages of the shuffled order: (ns, IOs).
    let one_at_a_time = |write: bool, buf: *mut u8| -> Result<(f64, u64), String> {
        let t = Instant::now();
        for &i in order.iter().take(serial) {
            direct_io(fd, write, i, buf)?;
        }
        Ok((t.elapsed().as_nanos() as f64, serial as u64))
    };
    let buf = Anon::new(1)?;
    let lat = repeat(s.reps, || one_at_a_time(true, buf.base))?;
    let load = |write: bool| {
        repeat(s.reps, || {
            let t = Instant::now();
            std::thread::scope(|sc| {
                let hs: Vec<_> = (0..DEVICE_SUBMITTERS)
                    .map(|k| {
                        let order = &order;
                        sc.spawn(move || {
                            let b = Anon::new(1)?;
                            for j in 0..DEVICE_IOS_EACH {
                                let i = order[(k * DEVICE_IOS_EACH + j) % n];
                                direct_io(fd, write, i, b.base)?;
                            }
                            Ok::<(), String>(())
                        })
                    })
                    .collect();
                hs.into_iter().try_for_each(|h| {
                    h.join()
                        .map_err(|_| "a device benchmark thread panicked".to_string())?
                })
            })?;
            let ios = (DEVICE_SUBMITTERS * DEVICE_IOS_EACH) as u64;
            Ok((t.elapsed().as_nanos() as f64, ios))
        })
    };
    let (reads, writes_at_load) = (load(false)?, load(true)?);
    // One read at a time from a thread pinned to each CPU: where the device's completion
    // interrupt is not on the reader's CPU, each read also waits for a cross-CPU wakeup.
    let read_on = |cpu: usize| {
        repeat(s.reps, || {
            std::thread::scope(|sc| {
                sc.spawn(|| {
                    if !affinity::pin_thread(cpu as u32) {
                        return Err(format!("cannot run a thread on CPU {cpu}"));
                    }
                    let b = Anon::new(1)?;
                    one_at_a_time(false, b.base)
                })
                .join()
                .map_err(|_| "a device benchmark thread panicked".to_string())?
            })
        })
    };
    let (on_a, on_b) = (read_on(cpus.0)?, read_on(cpus.1)?);
    drop(direct);
    let on = |cpu: usize| {
        format!("O_DIRECT pread of one 4 KiB page at a random offset, one at a time, from a thread pinned to CPU {cpu}: the device's read latency plus, when its completion interrupt arrives on another CPU, a cross-CPU wakeup")
    };
    Ok(Some(vec![
        figure("direct_read_cpu_a", on_a, &on(cpus.0)),
        figure("direct_read_cpu_b", on_b, &on(cpus.1)),
        figure("ssd_write_latency", lat, "O_DIRECT pwrite of one 4 KiB page of a written file at a random offset, one at a time: the device's write latency plus the direct-IO path"),
        figure("ssd_read_interval", reads, &format!("O_DIRECT preads of 4 KiB at random offsets from {DEVICE_SUBMITTERS} threads at once (queue depth 1 each): wall time per read, 1 / the device's read IOPS at that load")),
        figure("ssd_write_interval", writes_at_load, &format!("O_DIRECT pwrites of 4 KiB at random offsets from {DEVICE_SUBMITTERS} threads at once (queue depth 1 each): wall time per write, 1 / the device's write IOPS at that load")),
    ]))
}

#[repr(align(128))]
pub(crate) struct Line(pub(crate) AtomicU64);

/// The longest a cache-line benchmark may spin before it gives up (a CPU that never runs
/// the peer thread must not hang calibrate).
pub(crate) const SPIN_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);
const SPIN_TIMEOUT: &str =
    "cache-line benchmark made no progress for 60 s (is the other CPU busy or offline?)";

/// Spin until `line` holds `v`; an error when `deadline` passes first.
pub(crate) fn spin_until(line: &AtomicU64, v: u64, deadline: Instant) -> Result<(), String> {
    let mut k = 0u32;
    while line.load(Ordering::Acquire) != v {
        std::hint::spin_loop();
        k = k.wrapping_add(1);
        if k & 0xffff == 0 && Instant::now() > deadline {
            return Err(SPIN_TIMEOUT.to_string());
        }
    }
    Ok(())
}

/// Run `peer` on CPU `b` (a new thread) and `mine` on CPU `a` (this thread), both starting
/// once the peer runs (else this CPU would do its part while the peer thread is still
/// being created); the wall time of `mine` [ns], or the first error of either.
pub(crate) fn on_two_cpus(
    (a, b): (usize, usize),
    deadline: Instant,
    peer: impl FnOnce() -> Result<(), String> + Send + 'static,
    mine: impl FnOnce() -> Result<(), String>,
) -> Result<f64, String> {
    let ready = Arc::new(Line(AtomicU64::new(0)));
    let r2 = ready.clone();
    let h = std::thread::spawn(move || {
        affinity::pin_thread(b as u32);
        r2.0.store(1, Ordering::Release);
        peer()
    });
    affinity::pin_thread(a as u32);
    let res = spin_until(&ready.0, 1, deadline).and_then(|_| {
        let t0 = Instant::now();
        mine().map(|_| t0)
    });
    let ns = res
        .as_ref()
        .map_or(0.0, |t0| t0.elapsed().as_nanos() as f64);
    let theirs = h
        .join()
        .map_err(|_| "benchmark thread panicked".to_string())?;
    res.and(theirs)?;
    Ok(ns)
}

/// Cache lines between CPUs `a` and `b`: a ping-pong (one transfer per hop), a contended
/// spinlock handoff; and on one CPU an atomic RMW and an uncontended lock round. The
/// calling thread's CPU affinity is restored afterwards (processes it forks later, such as
/// the reclaim-bound run's workers, would inherit the pinning).
pub fn cache_lines(a: usize, b: usize, s: Sizes) -> Result<Vec<Figure>, String> {
    let saved = affinity::allowed_cpus();
    let r = cache_lines_pinned(a, b, s).and_then(|mut out| {
        out.extend(contended_lines(&saved, s)?);
        out.extend(crate::smt::smt_figures(&saved, s)?);
        Ok(out)
    });
    if !saved.is_empty() {
        affinity::set_allowed(&saved);
    }
    r
}

/// One thread per CPU of `cpus`, all started together, each doing `n` rounds of a lock
/// xadd on each of `k` shared lines (own 128-byte slots) in turn: the wall time until
/// the last one is done [ns], and the rounds of all threads. With every thread on the
/// same line(s) each line is a saturated server; a second line in the round costs the
/// hot path what the lines' coupling costs (a line's home agent, the interconnect), which
/// independent servers in series would not. With one line an owner often does several
/// operations before the line is taken from it; with two or more in turn almost every
/// operation is a transfer, so one line's figure is no pace for the others.
pub fn lines_in_turn(cpus: &[u32], k: usize, n: u64) -> Result<(f64, u64), String> {
    let lines: Vec<Line> = (0..k).map(|_| Line(AtomicU64::new(0))).collect();
    let refs: Vec<&AtomicU64> = lines.iter().map(|l| &l.0).collect();
    run_in_turn(cpus, &refs, n, &[])
}

/// `lines_in_turn` over lines homed on chosen nodes: line i is alone on an anonymous page
/// first written by a thread pinned to `homes[i]`, so the kernel's default policy takes
/// the page from that CPU's node (the line's home, whose agent orders its cross-node
/// transfers).
pub fn homed_lines_in_turn(cpus: &[u32], homes: &[u32], n: u64) -> Result<(f64, u64), String> {
    let pages: Vec<Anon> = homes
        .iter()
        .map(|_| Anon::new(1))
        .collect::<Result<_, _>>()?;
    std::thread::scope(|sc| {
        for (p, &home) in pages.iter().zip(homes) {
            let addr = p.base as usize;
            sc.spawn(move || {
                affinity::pin_thread(home);
                // SAFETY: the first word of a page of a live mapping of ours.
                unsafe { std::ptr::write_volatile(addr as *mut u64, 0) };
            });
        }
    });
    // SAFETY: each page outlives the borrow (dropped at the end of this function); an
    // aligned u64 at a page's start, accessed only atomically from here on.
    let refs: Vec<&AtomicU64> = pages
        .iter()
        .map(|p| unsafe { &*(p.base as *const AtomicU64) })
        .collect();
    run_in_turn(cpus, &refs, n, &[])
}

/// `n` steps of local work: a dependent integer chain the compiler cannot fold, touching
/// no shared line (the work a hot path does between two of its atomics).
pub fn local_work(n: u64) -> u64 {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for i in 0..n {
        x = x.rotate_left(5) ^ i;
    }
    std::hint::black_box(x)
}

/// The rounds of `lines_in_turn` on given lines, with steps of `local_work` before each
/// round taken in turn from `gaps` (thread i starting at entry i * len / threads, so that
/// threads do not draw alike); empty: back to back.
pub fn run_in_turn(
    cpus: &[u32],
    lines: &[&AtomicU64],
    n: u64,
    gaps: &[u64],
) -> Result<(f64, u64), String> {
    let ready = AtomicU64::new(0);
    let threads = cpus.len() as u64;
    let deadline = Instant::now() + SPIN_LIMIT;
    let spans: Vec<Result<(Instant, Instant), String>> = std::thread::scope(|sc| {
        let handles: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(t, &cpu)| {
                let ready = &ready;
                sc.spawn(move || -> Result<(Instant, Instant), String> {
                    affinity::pin_thread(cpu);
                    ready.fetch_add(1, Ordering::AcqRel);
                    spin_until(ready, threads, deadline)?;
                    let mut g = t * gaps.len() / threads as usize;
                    let start = Instant::now();
                    for _ in 0..n {
                        if !gaps.is_empty() {
                            local_work(gaps[g]);
                            g = if g + 1 == gaps.len() { 0 } else { g + 1 };
                        }
                        for l in lines {
                            l.fetch_add(1, Ordering::AcqRel);
                        }
                    }
                    Ok((start, Instant::now()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| "benchmark thread panicked".to_string())?
            })
            .collect()
    });
    let mut span: Option<(Instant, Instant)> = None;
    for r in spans {
        let (a, b) = r?;
        span = Some(span.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
    }
    // From the first thread's start, once all had checked in, to the last one's end.
    let (first, last) = span.ok_or("no CPU to run on")?;
    Ok((last.duration_since(first).as_nanos() as f64, n * threads))
}

/// The NUMA node of each CPU of `cpus` (sysfs; node 0 for a CPU no node lists).
pub fn cpu_nodes(cpus: &[u32]) -> Vec<u32> {
    let mut node_of = std::collections::HashMap::new();
    for node in 0..1024u32 {
        let p = format!("/sys/devices/system/node/node{node}/cpulist");
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        for c in crate::smt::parse_cpulist(&text).unwrap_or_default() {
            node_of.insert(c, node);
        }
    }
    cpus.iter().map(|c| *node_of.get(c).unwrap_or(&0)).collect()
}

/// Contended lines: `lines_in_turn` over one, two and four lines, on every CPU this
/// process may use. Kept as checks (calibrate.py): the model's lines are independent
/// servers, and these figures say how far that holds here. On two CPUs they are a
/// ping-pong, with no queue of waiters behind a line. Where the CPUs span two nodes, two
/// lines in turn again, both homed on the first CPU's node (`contended_lines_2_one_home`)
/// and one on each node (`contended_lines_2_two_homes`): the same threads and transfers,
/// one home agent or two, which is what `home_agent_occupancy` is derived from.
fn contended_lines(cpus: &[u32], s: Sizes) -> Result<Vec<Figure>, String> {
    let cpus: Vec<u32> = if cpus.is_empty() {
        vec![0]
    } else {
        cpus.to_vec()
    };
    let mut out = Vec::new();
    for (k, name) in [
        (1, "contended_line_1"),
        (2, "contended_lines_2"),
        (4, "contended_lines_4"),
    ] {
        let r = repeat(s.reps, || lines_in_turn(&cpus, k, s.pingpongs))?;
        let how = format!(
            "{} threads, one per CPU, each doing a lock xadd on each of the same {k} shared line(s) in turn: wall time over all threads' rounds (1 / their throughput; with one line, its time per operation)",
            cpus.len()
        );
        out.push(figure(name, r, &how));
    }
    let nodes = cpu_nodes(&cpus);
    if let Some(j) = nodes.iter().position(|&x| x != nodes[0]) {
        let (a, b) = (cpus[0], cpus[j]);
        for (homes, name, where_) in [
            (
                [a, a],
                "contended_lines_2_one_home",
                format!(
                    "both homed on node {} (first written from CPU {a})",
                    nodes[0]
                ),
            ),
            (
                [a, b],
                "contended_lines_2_two_homes",
                format!(
                    "one homed on node {} (CPU {a}), one on node {} (CPU {b})",
                    nodes[0], nodes[j]
                ),
            ),
        ] {
            let r = repeat(s.reps, || homed_lines_in_turn(&cpus, &homes, s.pingpongs))?;
            let how = format!(
                "{} threads, one per CPU, each doing a lock xadd on two shared lines in turn, {where_}: wall time over all threads' rounds",
                cpus.len()
            );
            out.push(figure(name, r, &how));
        }
    }
    Ok(out)
}

/// A ping-pong of one cache line between CPUs `a` and `b` (`n` round trips: store, spin on
/// the peer's store): the wall time [ns] and the transfers (two per round trip).
pub fn pingpong(a: usize, b: usize, n: u64) -> Result<(f64, u64), String> {
    let line = Arc::new(Line(AtomicU64::new(0)));
    let l2 = line.clone();
    let deadline = Instant::now() + SPIN_LIMIT;
    let peer = move || {
        (0..n).try_for_each(|i| {
            spin_until(&l2.0, 2 * i + 1, deadline)?;
            l2.0.store(2 * i + 2, Ordering::Release);
            Ok(())
        })
    };
    let mine = || {
        (0..n).try_for_each(|i| {
            line.0.store(2 * i + 1, Ordering::Release);
            spin_until(&line.0, 2 * i + 2, deadline)
        })
    };
    // Each round trip moves the line twice.
    Ok((on_two_cpus((a, b), deadline, peer, mine)?, 2 * n))
}

fn cache_lines_pinned(a: usize, b: usize, s: Sizes) -> Result<Vec<Figure>, String> {
    let mut out = Vec::new();
    let n = s.pingpongs;
    let r = repeat(s.reps, || pingpong(a, b, n))?;
    out.push(figure("cacheline_transfer", r, &format!("ping-pong of one cache line between CPUs {a} and {b} (store, spin on the peer's store): half a round trip")));
    let r = repeat(s.reps, || {
        // A ticket lock, FIFO like the kernel's queued spinlock: with both CPUs
        // contending, every acquisition is a handoff from the other CPU.
        let lock = Arc::new((Line(AtomicU64::new(0)), Line(AtomicU64::new(0))));
        let l2 = lock.clone();
        let deadline = Instant::now() + SPIN_LIMIT;
        let take = move |l: &(Line, Line)| -> Result<(), String> {
            let me = l.0 .0.fetch_add(1, Ordering::Relaxed);
            spin_until(&l.1 .0, me, deadline)?;
            l.1 .0.store(me + 1, Ordering::Release);
            Ok(())
        };
        let peer = move || (0..n).try_for_each(|_| take(&l2));
        let mine = || (0..n).try_for_each(|_| take(&lock));
        Ok((on_two_cpus((a, b), deadline, peer, mine)?, 2 * n))
    })?;
    out.push(figure("lock_handoff", r, &format!("ticket spinlock (FIFO, as the kernel's queued spinlock) taken and released in a loop by CPUs {a} and {b} at once: wall time per acquisition, each one a handoff")));
    out.extend(tlb_shootdown(a, b, s)?);
    affinity::pin_thread(a as u32);
    let line = Line(AtomicU64::new(0));
    let m = n * 10;
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for _ in 0..m {
            line.0.fetch_add(1, Ordering::AcqRel);
        }
        Ok((t.elapsed().as_nanos() as f64, m))
    })?;
    out.push(figure(
        "atomic_rmw",
        r,
        "lock xadd on a line only this CPU uses",
    ));
    // A lock word of its own: the atomic benchmark left `line` non-zero.
    let lock = Line(AtomicU64::new(0));
    let r = repeat(s.reps, || {
        let t = Instant::now();
        for _ in 0..m {
            while lock.0.swap(1, Ordering::Acquire) != 0 {
                std::hint::spin_loop();
            }
            lock.0.store(0, Ordering::Release);
        }
        Ok((t.elapsed().as_nanos() as f64, m))
    })?;
    out.push(figure(
        "lock_uncontended",
        r,
        "test-and-set spinlock acquire and release on a line only this CPU uses",
    ));
    Ok(out)
}

/// A gap between two clock reads of a spinning thread longer than this is time its CPU
/// spent elsewhere (an interrupt handler, the hypervisor); shorter ones are the loop's own.
const STOLEN_GAP_NS: u64 = 250;

/// Spin until `done` holds 1, summing the gaps longer than STOLEN_GAP_NS between
/// consecutive clock reads; returns (that sum, the spin's wall time) [ns].
fn spin_counting_stolen(done: &AtomicU64, deadline: Instant) -> Result<(u64, u64), String> {
    let t0 = Instant::now();
    let mut prev = t0;
    let mut stolen = 0u64;
    let mut k = 0u32;
    while done.load(Ordering::Acquire) != 1 {
        let now = Instant::now();
        let gap = now.duration_since(prev).as_nanos() as u64;
        if gap > STOLEN_GAP_NS {
            stolen += gap;
        }
        prev = now;
        k = k.wrapping_add(1);
        if k & 0xffff == 0 && now > deadline {
            return Err(SPIN_TIMEOUT.to_string());
        }
    }
    Ok((stolen, t0.elapsed().as_nanos() as u64))
}

/// The spinning peer's side of a shootdown: a thread of this process spins on CPU `b`
/// while CPU `a` zaps `m`'s pages one per madvise call (each flush interrupts `b`), then
/// spins as long again while `a` sleeps. The time `b` lost per shootdown is the first
/// spin's stolen time less the second's, scaled to the same length: returns (that time
/// summed, the number of shootdowns).
fn shootdown_target_time(m: Anon, (a, b): (usize, usize)) -> Result<(f64, u64), String> {
    let pages = m.pages() as u64;
    let spin = |mine: &dyn Fn() -> Result<(), String>| -> Result<(u64, u64), String> {
        let done = Arc::new(Line(AtomicU64::new(0)));
        let got = Arc::new((AtomicU64::new(0), AtomicU64::new(0)));
        let (d2, g2) = (done.clone(), got.clone());
        let deadline = Instant::now() + SPIN_LIMIT;
        let peer = move || {
            let (stolen, wall) = spin_counting_stolen(&d2.0, deadline)?;
            g2.0.store(stolen, Ordering::Release);
            g2.1.store(wall, Ordering::Release);
            Ok(())
        };
        let me = || {
            let r = mine();
            done.0.store(1, Ordering::Release);
            r
        };
        on_two_cpus((a, b), deadline, peer, me)?;
        Ok((got.0.load(Ordering::Acquire), got.1.load(Ordering::Acquire)))
    };
    let (stolen, wall) = spin(&|| m.zap_each_page())?;
    let quiet = std::time::Duration::from_nanos(wall);
    let (base, base_wall) = spin(&|| {
        std::thread::sleep(quiet);
        Ok(())
    })?;
    let background = base as f64 * wall as f64 / base_wall.max(1) as f64;
    Ok(((stolen as f64 - background).max(0.0), pages))
}

/// TLB shootdowns: one page zapped per madvise call on CPU `a`, first while no other CPU
/// runs this process (the flush is local), then while a thread of it spins on CPU `b`
/// (each flush is an IPI to `b`, waited for). The difference is one shootdown. The
/// spinning thread also times what each shootdown takes from it (`tlb_flush_ipi_target`).
fn tlb_shootdown(a: usize, b: usize, s: Sizes) -> Result<Vec<Figure>, String> {
    let pages = (s.anon_pages / 4).max(64);
    let populated = || -> Result<Anon, String> {
        let m = Anon::new(pages)?;
        for i in 0..pages {
            m.touch(i, 1);
        }
        Ok(m)
    };
    affinity::pin_thread(a as u32);
    let r = repeat(s.reps, || {
        let m = populated()?;
        let t = Instant::now();
        m.zap_each_page()?;
        Ok((t.elapsed().as_nanos() as f64, pages as u64))
    })?;
    let local = figure("zap_page_path", r, &format!("madvise(MADV_DONTNEED) of one populated anonymous page per call on CPU {a}, no other CPU running the process: syscall, zap of one PTE, local TLB flush"));
    let r = repeat(s.reps, || {
        let m = populated()?;
        let done = Arc::new(Line(AtomicU64::new(0)));
        let d2 = done.clone();
        let deadline = Instant::now() + SPIN_LIMIT;
        let peer = move || spin_until(&d2.0, 1, deadline);
        let mine = || {
            let r = m.zap_each_page();
            done.0.store(1, Ordering::Release);
            r
        };
        Ok((on_two_cpus((a, b), deadline, peer, mine)?, pages as u64))
    })?;
    let shared = figure("zap_page_shared_path", r, &format!("the same on CPU {a} while a thread of the process spins on CPU {b}: each TLB flush is a shootdown IPI to CPU {b}, waited for"));
    let r = repeat(s.reps, || shootdown_target_time(populated()?, (a, b)))?;
    let target = figure("tlb_flush_ipi_target", r, &format!("a thread spinning on CPU {b} while CPU {a} zaps one page of their process per madvise: the gaps over {STOLEN_GAP_NS} ns between its clock reads, less those of an equal spin without zaps, per shootdown received"));
    Ok(vec![local, shared, target])
}

/// Which benchmarks [`run_json`] runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Part {
    Anon,
    Swap,
    PageCache,
    Device,
    CacheLines,
}

/// Run one part and return its figures as JSON text (a list; empty for `Swap` when no
/// page could be swapped out, for `Device` when the filesystem refuses O_DIRECT). `dir`
/// holds the page-cache file; `cpus` the two CPUs of the cache-line benchmarks.
pub fn run_json(part: Part, dir: &Path, cpus: (usize, usize), s: Sizes) -> Result<String, String> {
    let figs = match part {
        Part::Anon => anon(s)?,
        Part::Swap => swap(s)?.unwrap_or_default(),
        Part::PageCache => page_cache(dir, s)?,
        Part::Device => device(dir, cpus, s)?.unwrap_or_default(),
        Part::CacheLines => cache_lines(cpus.0, cpus.1, s)?,
    };
    serde_json::to_string(&figs).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffled_is_a_permutation() {
        let mut v = shuffled(1000, 42);
        assert_ne!(v, (0..1000).collect::<Vec<_>>());
        v.sort();
        assert_eq!(v, (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn repeat_takes_the_median_per_op() {
        let mut k = 0.0;
        let r = repeat(5, || {
            k += 1.0;
            Ok((k * 100.0, 10))
        })
        .unwrap();
        // Per-op values 10, 20, 30, 40, 50: median 30, spread (50-10)/30.
        assert_eq!(r.0, 30.0);
        assert!((r.1 - 40.0 / 30.0).abs() < 1e-12);
        assert_eq!(r.2, 10);
    }

    #[test]
    fn anon_zap_leaves_nothing_resident() {
        let m = Anon::new(64).unwrap();
        for i in 0..64 {
            m.touch(i, 1);
        }
        assert_eq!(m.resident(), Ok(64));
        m.advise(libc::MADV_DONTNEED).unwrap();
        assert_eq!(m.resident(), Ok(0));
    }

    /// The parent's writes after the fork copy the pages: the child still reads the word
    /// written before it, the parent its own.
    #[test]
    fn writes_after_the_fork_leave_the_childs_pages_alone() {
        let m = Anon::new(16).unwrap();
        for i in 0..16 {
            m.touch(i, 1);
        }
        let sharer = Sharer::fork(&m, 1).unwrap();
        for i in 0..16 {
            m.touch(i, 2);
        }
        assert_eq!(sharer.finish(), Ok(()));
        // SAFETY: page 5 of our mapping.
        let w = unsafe { std::ptr::read_volatile(m.base.add(5 * PAGE) as *const u64) };
        assert_eq!(w, 2);
    }

    /// The child's check bites: told to expect a word the pages never held, it reports it.
    #[test]
    fn a_sharer_that_sees_other_words_is_an_error() {
        let m = Anon::new(4).unwrap();
        for i in 0..4 {
            m.touch(i, 1);
        }
        let sharer = Sharer::fork(&m, 3).unwrap();
        let e = sharer.finish().unwrap_err();
        assert!(e.starts_with("copy-on-write"), "{e}");
    }

    #[test]
    fn residency_of_an_unmapped_range_is_an_error_not_zero() {
        // A range nothing maps: mincore fails with ENOMEM. Before, that read as "no page
        // resident", which swap() took for a complete swap-out.
        let m = Anon::new(4).unwrap();
        let base = m.base as *mut libc::c_void;
        drop(m);
        let e = resident_pages(base, 4).unwrap_err();
        assert!(e.starts_with("mincore: "), "{e}");
    }
}

#[cfg(test)]
mod bench_smoke {
    use super::*;

    /// The cache-line benchmarks pin this thread while they run and unpin it afterwards.
    #[test]
    fn lines_in_turn_does_every_threads_rounds_on_every_line() {
        let cpus = affinity::allowed_cpus();
        let cpus = &cpus[..cpus.len().min(2)];
        let lines: Vec<Line> = (0..3).map(|_| Line(AtomicU64::new(0))).collect();
        let refs: Vec<&AtomicU64> = lines.iter().map(|l| &l.0).collect();
        let (_, ops) = run_in_turn(cpus, &refs, 500, &[3, 0, 7]).unwrap();
        assert_eq!(ops, 500 * cpus.len() as u64);
        for l in &lines {
            assert_eq!(l.0.load(Ordering::Relaxed), 500 * cpus.len() as u64);
        }
        let (_, ops) = homed_lines_in_turn(cpus, &[cpus[0], cpus[cpus.len() - 1]], 300).unwrap();
        assert_eq!(ops, 300 * cpus.len() as u64);
    }

    #[test]
    fn every_cpu_gets_a_node_and_a_cpu_no_node_lists_gets_node_0() {
        let cpus = affinity::allowed_cpus();
        let nodes = cpu_nodes(&cpus);
        assert_eq!(nodes.len(), cpus.len());
        let cpu0 = std::fs::read_to_string("/sys/devices/system/node/node0/cpulist")
            .ok()
            .and_then(|t| crate::smt::parse_cpulist(&t));
        if let Some(on0) = cpu0 {
            for (c, n) in cpus.iter().zip(&nodes) {
                assert_eq!(on0.contains(c), *n == 0, "CPU {c} on node {n}");
            }
        }
        assert_eq!(cpu_nodes(&[100_000]), vec![0]);
    }

    #[test]
    fn cache_lines_restore_the_callers_affinity() {
        let before = affinity::allowed_cpus();
        let n = std::thread::available_parallelism().map_or(1, |n| n.get());
        let s = Sizes {
            anon_pages: 1,
            file_pages: 1,
            reps: 1,
            pingpongs: 100,
        };
        cache_lines(0, (n > 1) as usize, s).unwrap();
        assert_eq!(affinity::allowed_cpus(), before);
    }

    /// Every part runs to its end and names the figures the front decomposes (the values
    /// are this machine's and are not asserted).
    #[test]
    fn parts_name_their_figures() {
        let s = Sizes {
            anon_pages: 256,
            file_pages: 128,
            reps: 1,
            pingpongs: 2000,
        };
        let names = |v: Vec<Figure>| v.into_iter().map(|f| f.name).collect::<Vec<_>>();
        assert_eq!(
            names(anon(s).unwrap()),
            [
                "anon_fault_path",
                "cow_fault_path",
                "access_seq",
                "access_random",
                "page_zero",
                "zap_path"
            ]
        );
        let dir = std::env::temp_dir();
        let cpu = affinity::allowed_cpus()[0] as usize;
        if let Some(figs) = device(&dir, (cpu, cpu), s).unwrap() {
            assert_eq!(
                names(figs),
                [
                    "direct_read_cpu_a",
                    "direct_read_cpu_b",
                    "ssd_write_latency",
                    "ssd_read_interval",
                    "ssd_write_interval"
                ]
            );
        }
        assert_eq!(
            names(page_cache(&dir, s).unwrap()),
            [
                "file_read_hit",
                "file_read_miss_path",
                "reclaim_clean_file_path"
            ]
        );
        let ncpu = std::thread::available_parallelism().map_or(1, |n| n.get());
        if ncpu >= 2 {
            let t = std::time::Instant::now();
            let figs = cache_lines(0, 1, s).unwrap();
            eprintln!("cache_lines took {:?}: {figs:?}", t.elapsed());
            assert_eq!(
                names(figs),
                [
                    "cacheline_transfer",
                    "lock_handoff",
                    "zap_page_path",
                    "zap_page_shared_path",
                    "tlb_flush_ipi_target",
                    "atomic_rmw",
                    "lock_uncontended",
                    "contended_line_1",
                    "contended_lines_2",
                    "contended_lines_4"
                ]
            );
        }
    }
}
