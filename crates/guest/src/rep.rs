//! One rep in the guest: the cgroup tree, the workload processes, the memory.reclaim
//! writes, and the counter deltas.

use crate::plan::{Plan, Reclaim};
use crate::sys::{self, CGROOT, WORKDIR};
use reclaimsim_core::scenario::Scenario;
use reclaimsim_host::{Prepared, LIVE_FIELDS};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub struct Ready {
    scenario: Scenario,
    prepared: Prepared,
}

/// Parse the scenario, create the workloads' files on the data disk, build trace maps.
pub fn prepare(plan: &Plan) -> Result<Ready, String> {
    let scenario = Scenario::from_json(&plan.scenario).map_err(|e| e.to_string())?;
    for wi in 0..scenario.workloads.len() {
        reclaimsim_host::create_files(&scenario, wi, Path::new(WORKDIR))?;
    }
    let prepared = reclaimsim_host::prepare(&scenario)?;
    Ok(Ready { scenario, prepared })
}

fn cg_dir(path: &str) -> PathBuf {
    Path::new(CGROOT).join(path.trim_start_matches('/'))
}

fn create_cgroups(plan: &Plan) -> Result<(), String> {
    for cg in &plan.cgroups {
        let d = cg_dir(&cg.path);
        std::fs::create_dir_all(&d).map_err(|e| format!("mkdir {}: {e}", d.display()))?;
        let parent = d.parent().expect("under the cgroup root");
        sys::write(
            &parent.join("cgroup.subtree_control").to_string_lossy(),
            "+memory",
        )?;
        for (f, v) in &cg.files {
            sys::write(&d.join(f).to_string_lossy(), v)?;
        }
    }
    Ok(())
}

/// Kill what is left in the tree and remove it, children first.
fn remove_cgroups(plan: &Plan) {
    for cg in plan.cgroups.iter().rev() {
        let d = cg_dir(&cg.path);
        if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
            for pid in procs
                .split_whitespace()
                .filter_map(|p| p.parse::<i32>().ok())
            {
                // SAFETY: plain syscall.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
        }
        for _ in 0..200 {
            if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// A pressure file's (memory.pressure) stall totals in microseconds, `some` and `full`
/// (the `total=` field of each line); empty where the kernel has no PSI.
fn psi_totals(path: &Path) -> BTreeMap<String, i64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (kind, rest) = l.split_once(' ')?;
            let total = rest.split(' ').find_map(|f| f.strip_prefix("total="))?;
            Some((kind.to_string(), total.parse().ok()?))
        })
        .collect()
}

/// `key value` lines (memory.stat, memory.events, /proc/vmstat) as a map.
fn kv(path: &Path) -> BTreeMap<String, i64> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (k, v) = l.split_once(' ')?;
            Some((k.to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

struct Child {
    workload: usize,
    pid: i32,
    pipe: std::fs::File,
    live: PathBuf,
}

/// Fork one workload process: it joins its cgroup, replays, and writes its statistics
/// as JSON into the pipe.
fn spawn(
    ready: &Ready,
    workload: usize,
    process: u32,
    threads: u32,
    cgroup: &str,
) -> Result<Child, String> {
    let live = PathBuf::from(format!("/dev/shm/w{workload}-p{process}"));
    // Zeroed here, so its pages are the parent's, not the workload cgroup's.
    std::fs::write(
        &live,
        vec![0u8; (threads as usize * LIVE_FIELDS.len() * 8).max(8)],
    )
    .map_err(|e| format!("{}: {e}", live.display()))?;
    let mut fds = [0i32; 2];
    // SAFETY: plain syscalls; the child only runs Rust code of this process image and
    // leaves by _exit.
    unsafe {
        if libc::pipe(fds.as_mut_ptr()) != 0 {
            return Err("pipe failed".into());
        }
        let pid = libc::fork();
        if pid < 0 {
            return Err("fork failed".into());
        }
        if pid == 0 {
            libc::close(fds[0]);
            let procs = cg_dir(cgroup).join("cgroup.procs");
            let out = sys::write(&procs.to_string_lossy(), &libc::getpid().to_string())
                .and_then(|_| {
                    reclaimsim_host::run_process_prepared(
                        &ready.scenario,
                        workload,
                        process,
                        Path::new(WORKDIR),
                        false,
                        Some(live.as_path()),
                        Some(&ready.prepared),
                        false,
                    )
                })
                .and_then(|st| serde_json::to_string(&st).map_err(|e| e.to_string()));
            let (text, code) = match out {
                Ok(t) => (t, 0),
                Err(e) => (json!({ "error": e }).to_string(), 1),
            };
            let mut w = std::fs::File::from_raw_fd(fds[1]);
            let _ = std::io::Write::write_all(&mut w, text.as_bytes());
            drop(w);
            libc::_exit(code);
        }
        libc::close(fds[1]);
        Ok(Child {
            workload,
            pid,
            pipe: std::fs::File::from_raw_fd(fds[0]),
            live,
        })
    }
}

/// The live counters a killed process's threads last published.
fn read_live(p: &Path) -> Vec<Value> {
    let data = std::fs::read(p).unwrap_or_default();
    let vals: Vec<u64> = data
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    vals.chunks_exact(LIVE_FIELDS.len())
        .map(|t| {
            let m: Map<String, Value> = LIVE_FIELDS
                .iter()
                .zip(t)
                .map(|(k, v)| (k.to_string(), json!(v)))
                .collect();
            Value::Object(m)
        })
        .collect()
}

/// The accesses the workload processes have published so far (every few thousand per
/// thread, in their live files).
fn accesses_done(lives: &[PathBuf]) -> u64 {
    lives
        .iter()
        .flat_map(|p| read_live(p))
        .map(|t| t["accesses"].as_u64().unwrap_or(0))
        .sum()
}

/// Whether write `k` of `r` is due: its wall-clock time has come or, with
/// `after_accesses`, the workloads have done that many accesses.
fn write_due(r: &Reclaim, k: u64, start: Instant, lives: &[PathBuf]) -> bool {
    match &r.after_accesses {
        Some(th) => accesses_done(lives) >= th[k as usize],
        None => start.elapsed() >= Duration::from_nanos(r.at_ns + k * r.every_ns),
    }
}

/// One schedule of memory.reclaim writes, from a thread of the runner: the k-th write is
/// due at `at + k * every` after the start (or at the workloads' progress the plan gives);
/// a late write is made at once (back to back, as the model's reclaim task does). Stops
/// when the workloads have ended.
fn reclaim_thread(
    r: &Reclaim,
    start: Instant,
    lives: &[PathBuf],
    done: Arc<AtomicBool>,
) -> Vec<Value> {
    let file = cg_dir(&r.cgroup).join("memory.reclaim");
    let mut log = Vec::new();
    for k in 0..r.times {
        while !write_due(r, k, start, lives) {
            if done.load(Ordering::Relaxed) {
                return log;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let accesses = accesses_done(lives);
        let stat = cg_dir(&r.cgroup).join("memory.stat");
        let steals = || kv(&stat).get("pgsteal").copied();
        let s0 = steals();
        let t0 = start.elapsed();
        let res = std::fs::write(&file, &r.buffer);
        let t1 = start.elapsed();
        let s1 = steals();
        log.push(json!({
            "cgroup": r.cgroup,
            "due_ns": r.at_ns + k * r.every_ns,
            "due_accesses": r.after_accesses.as_ref().map(|th| th[k as usize]),
            "accesses": accesses,
            "start_ns": t0.as_nanos() as u64,
            "end_ns": t1.as_nanos() as u64,
            // the cgroup's steals across the write (its own, and any other reclaim meanwhile)
            "pgsteal": s0.zip(s1).map(|(a, b)| b - a),
            "error": res.err().map(|e| e.to_string()),
        }));
    }
    log
}

/// A rep: returns wall time, the /proc/vmstat deltas, each cgroup's memory.stat,
/// memory.events, memory.pressure totals and cpu.stat, each process's statistics and the
/// memory.reclaim log.
pub fn run_rep(plan: &Plan, ready: &Ready) -> Result<Value, String> {
    remove_cgroups(plan);
    create_cgroups(plan)?;
    let out = run_rep_in_tree(plan, ready);
    remove_cgroups(plan);
    out
}

fn run_rep_in_tree(plan: &Plan, ready: &Ready) -> Result<Value, String> {
    sys::drop_caches()?;
    let v0 = kv(Path::new("/proc/vmstat"));
    crate::trace::start(crate::trace::TRACEFS, &plan.hists)?;
    let start = Instant::now();
    let mut kids = Vec::new();
    for p in &plan.procs {
        for i in 0..p.count {
            kids.push(spawn(ready, p.workload, i, p.threads, &p.cgroup)?);
        }
    }
    let done = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = plan
        .reclaim
        .iter()
        .map(|r| {
            let (r, d) = (r.clone(), done.clone());
            let lives: Vec<PathBuf> = kids.iter().map(|k| k.live.clone()).collect();
            std::thread::spawn(move || reclaim_thread(&r, start, &lives, d))
        })
        .collect();
    let mut results = Vec::new();
    let mut errors = Vec::new();
    for mut k in kids {
        let mut buf = String::new();
        let _ = k.pipe.read_to_string(&mut buf);
        let mut status = 0;
        // SAFETY: waiting for our own child.
        unsafe { libc::waitpid(k.pid, &mut status, 0) };
        if libc::WIFSIGNALED(status) {
            results.push(json!({
                "workload": k.workload,
                "killed": libc::WTERMSIG(status),
                "threads": read_live(&k.live),
            }));
        } else {
            let v: Value =
                serde_json::from_str(&buf).unwrap_or_else(|_| json!({ "error": "no output" }));
            if let Some(e) = v.get("error") {
                errors.push(format!(
                    "workload {}: {}",
                    k.workload,
                    e.as_str().unwrap_or("?")
                ));
            }
            results.push(v);
        }
        let _ = std::fs::remove_file(&k.live);
    }
    let wall = start.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let writes: Vec<Value> = threads
        .into_iter()
        .flat_map(|t| t.join().unwrap_or_default())
        .collect();
    let hists = crate::trace::stop(crate::trace::TRACEFS, &plan.hists)?;
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    let v1 = kv(Path::new("/proc/vmstat"));
    let vmstat: BTreeMap<&String, i64> = v1
        .iter()
        .map(|(k, v)| (k, v - v0.get(k).copied().unwrap_or(0)))
        .collect();
    let cgroups: Map<String, Value> = plan
        .cgroups
        .iter()
        .map(|c| {
            let d = cg_dir(&c.path);
            (
                c.path.clone(),
                json!({
                    "memory.stat": kv(&d.join("memory.stat")),
                    "memory.events": kv(&d.join("memory.events")),
                    "memory.pressure": psi_totals(&d.join("memory.pressure")),
                    "cpu.stat": kv(&d.join("cpu.stat")),
                }),
            )
        })
        .collect();
    // MGLRU's generations as the rep left them (before the cgroups are removed): the
    // host reads how many times each memcg's lruvecs aged. None without MGLRU or debugfs.
    let lru_gen = std::fs::read_to_string(Path::new(sys::DEBUGFS).join("lru_gen")).ok();
    Ok(json!({
        "wall_s": wall,
        "vmstat": vmstat,
        "cgroups": cgroups,
        "processes": results,
        "reclaim_writes": writes,
        "lru_gen": lru_gen,
        "hists": hists,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_totals_reads_the_total_field_of_each_line() {
        let d = std::env::temp_dir().join(format!("reclaimsim-psi-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        let f = d.join("memory.pressure");
        // The format of the kernel's psi_show(): avg10, avg60, avg300, total (us).
        std::fs::write(
            &f,
            "some avg10=0.00 avg60=1.25 avg300=0.40 total=1234567\n\
             full avg10=0.00 avg60=0.90 avg300=0.30 total=987654\n",
        )
        .unwrap();
        let t = psi_totals(&f);
        assert_eq!(t.get("some"), Some(&1_234_567));
        assert_eq!(t.get("full"), Some(&987_654));
        assert_eq!(t.len(), 2);
        assert!(psi_totals(&d.join("absent")).is_empty());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
