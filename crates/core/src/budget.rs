//! The memory budget: before a run is built, estimate the host memory it will take and
//! refuse a run beyond the limit (`--max-memory`; default: the machine's MemAvailable).
//!
//! The estimate sums the model's large tables, each at the size the run can reach:
//!
//! | term | bytes | reached when |
//! |---|---|---|
//! | frame table | 25 per frame the workloads can use (MGLRU's generation byte is in struct page): their memory, capped by the cgroups' memory.max and by the machine | frames are allocated zeroed and touched in order as they are first used |
//! | page tables | 4 per page of every usemem area (the parent's too, with prealloc, plus a write-protect bit per page) and request_churn buffer ring (PTEs) | areas are written all over (prefault, passes, random writes) |
//! | page-cache index | 8 per page of every file (file_read files, shared_file mappings) | a read leaves an entry or a shadow per page |
//! | swap map | 8 per swap slot: the anonymous pages that the cgroups' memory.max and the machine cannot hold | slots are handed out in order |
//! | memcg state | per cgroup: its lruvecs and locks on every node and its per-CPU statistics deltas (152 bytes per CPU, and 144 per CPU per node) | built at start |
//! | tasks | per task: its future, its CPU's batches and run queue entry | built at start |
//! | time series | per row (one per cgroup per sample): the row, its JSON and the front's copy | one row per cgroup every sample_interval until duration |
//!
//! Each workload's module adds its own terms (page tables, page-cache index) and says what
//! it can keep resident (`workload::Workload::memory`, `demand`). Trace workloads grow as
//! their objects appear (`Workload::grows`): their index is not in the estimate; the
//! budget left over is shared among them and enforced as objects are mapped
//! (`trace::PageMap::limit`). The estimate excludes the process's own baseline (the
//! interpreter and libraries): it is what the run adds, compared with what is available.
//! docs/bench.md compares it with measured peak RSS.

use crate::error::{Error, Result};
use crate::scenario::{Limit, Scenario};
use crate::workload::Check;

/// Host bytes per frame: a 16-byte `Page`, the line-owner byte (mm/lru_lines.rs), and an
/// 8-byte `LruLink` (the classic LRU) or, with MGLRU, a 4-byte list position and a 4-byte
/// entry in a generation's array (mm/lru_gen/list.rs; the arrays' spare room is not
/// counted).
pub const FRAME_BYTES: u64 = 25;
/// Host bytes per PTE (u32), plus the PTE-table presence map (1 byte per 512 PTEs).
pub const PTE_BYTES: f64 = 4.0 + 1.0 / 512.0;
/// Host bytes per page-cache slot (u64), plus the xarray-node presence maps (1 byte per
/// 64 slots, and per 64 of those...).
pub const CACHE_BYTES: f64 = 8.0 + 1.0 / 63.0;
/// Host bytes per swap slot used: the swap map's u64 (slots are handed out in order; the
/// free stack of slots given back stays small next to it).
const SWAP_SLOT_BYTES: u64 = 8;
/// Host bytes per cgroup per node (its lruvec and two locks) and per cgroup (struct
/// memcg, its view in the sampler and the report).
const MEMCG_NODE_BYTES: u64 = 1_200;
const MEMCG_BYTES: u64 = 4_096;
/// Host bytes per cgroup per CPU (the per-CPU statistics deltas of the memcg: [i64; 2]
/// per counter item, and rstat's u64) and per cgroup per node per CPU (those of its
/// lruvec: [i64; 2] per counter item).
const MEMCG_CPU_BYTES: u64 = 16 * NR_STAT_KINDS + 8;
const MEMCG_NODE_CPU_BYTES: u64 = 16 * NR_STAT_KINDS;
const NR_STAT_KINDS: u64 = crate::mm::memcontrol::NR_STAT_KINDS as u64;
/// Host bytes per workload task (its boxed future, task state, tally) and per CPU (its
/// LRU batches, charge stock and IO completion queue, and the 256-byte row of the list
/// lines' transfer table, mm/lru_lines.rs).
const TASK_BYTES: u64 = 4_096;
const CPU_BYTES: u64 = 768;
/// Host bytes per time-series row: the row as kept (128 bytes), its text in the result
/// and the front's parsed copy (measured when a row was kept as a JSON value: 30,000 rows
/// took 72.5 MiB of peak RSS through `reclaimsim run`, 2,534 bytes each; docs/bench.md).
const ROW_BYTES: u64 = 2_560;
/// Host bytes per sampled row of /sys/kernel/debug/lru_gen (MGLRU: a row per generation
/// of each memcg and node at each sample): the row as kept (56 bytes), its text in the
/// result and the front's parsed copy. Measured through `reclaimsim run`: seed 001's
/// shape with 129 memcgs on 4 nodes for 750 s (1.55M rows) peaked at 843 MiB, 385 MiB
/// over the estimate without this term (docs/bench.md).
const LRU_GEN_ROW_BYTES: u64 = 256;

/// One term of an estimate.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Term {
    /// What the memory holds, e.g. "page tables of workload[0] (usemem)".
    pub name: String,
    /// The scenario field that sets its size, e.g. `scenario.workload[0].size`.
    pub field: String,
    pub bytes: u64,
}

/// Terms of an estimate as they are added (a term of 0 bytes is left out).
#[derive(Debug, Default)]
pub struct Terms(Vec<Term>);

impl Terms {
    /// Add a term: what the memory holds, the field that sets its size, its bytes.
    pub fn add(&mut self, name: String, field: String, bytes: u64) {
        if bytes > 0 {
            self.0.push(Term { name, field, bytes });
        }
    }
}

/// The estimated host memory of a run.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Estimate {
    pub total: u64,
    pub terms: Vec<Term>,
}

impl Estimate {
    /// The largest term.
    pub fn largest(&self) -> Option<&Term> {
        self.terms.iter().max_by_key(|t| t.bytes)
    }
}

/// `n` bytes for people: "512.0 MiB".
pub fn human(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// The memory this process may still take [bytes]: the least of the machine's
/// MemAvailable, the headroom of its memory cgroup and of each ancestor (memory.max less
/// memory.current in cgroup v2, memory.limit_in_bytes less memory.usage_in_bytes in v1),
/// and its address-space limit (RLIMIT_AS, `ulimit -v`) less its size; None where none
/// can be read.
pub fn available_memory() -> Option<u64> {
    available_memory_why().map(|(b, _)| b)
}

/// [`available_memory`] and which bound it is, in words.
pub fn available_memory_why() -> Option<(u64, String)> {
    let mut bounds: Vec<(u64, String)> = Vec::new();
    if let Some(b) = meminfo_available() {
        bounds.push((b, "the machine's available memory (MemAvailable)".into()));
    }
    if let Some((b, cg)) = cgroup_headroom() {
        bounds.push((b, format!("the headroom of the memory cgroup {cg}")));
    }
    if let Some(b) = address_space_headroom() {
        bounds.push((
            b,
            "the address-space limit (ulimit -v) less the process's size".into(),
        ));
    }
    bounds.into_iter().min_by_key(|(b, _)| *b)
}

fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb.saturating_mul(1024))
}

/// The least headroom of this process's memory cgroup and its ancestors, with the path
/// that sets it; None without a memory controller or a limit.
fn cgroup_headroom() -> Option<(u64, String)> {
    let cgroups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    let mount_of = |v2: bool| {
        mounts.lines().find_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let ok = if v2 {
                f.get(2) == Some(&"cgroup2")
            } else {
                f.get(2) == Some(&"cgroup")
                    && f.get(3)
                        .is_some_and(|o| o.split(',').any(|x| x == "memory"))
            };
            ok.then(|| f[1].to_string())
        })
    };
    let (mount, path, files) = cgroups
        .lines()
        .find_map(|l| {
            let mut f = l.splitn(3, ':');
            let (_, ctrl, path) = (f.next()?, f.next()?, f.next()?);
            if ctrl.split(',').any(|c| c == "memory") {
                Some((
                    mount_of(false)?,
                    path.to_string(),
                    ("memory.limit_in_bytes", "memory.usage_in_bytes"),
                ))
            } else {
                None
            }
        })
        .or_else(|| {
            let path = cgroups.lines().find_map(|l| l.strip_prefix("0::"))?;
            Some((
                mount_of(true)?,
                path.to_string(),
                ("memory.max", "memory.current"),
            ))
        })?;
    let read = |dir: &std::path::Path, f: &str| -> Option<u64> {
        std::fs::read_to_string(dir.join(f))
            .ok()?
            .trim()
            .parse()
            .ok()
    };
    let mut best: Option<(u64, String)> = None;
    let mut p = std::path::PathBuf::from(&path);
    loop {
        let dir = std::path::Path::new(&mount).join(p.strip_prefix("/").unwrap_or(&p));
        if let (Some(max), Some(cur)) = (read(&dir, files.0), read(&dir, files.1)) {
            // "max" (v2) does not parse; v1 writes "no limit" as about 2^63.
            if max < 1 << 60 {
                let room = max.saturating_sub(cur);
                if best.as_ref().is_none_or(|(b, _)| room < *b) {
                    best = Some((room, p.display().to_string()));
                }
            }
        }
        if !p.pop() {
            break;
        }
    }
    best
}

/// RLIMIT_AS (the "Max address space" of /proc/self/limits) less the process's virtual
/// size (VmSize); None when unlimited.
fn address_space_headroom() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let soft: u64 = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max address space"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?; // "unlimited" does not parse
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmSize:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some(soft.saturating_sub(kb.saturating_mul(1024)))
}

/// The pages the workloads can keep resident on a machine of `frames` frames, and the
/// anonymous pages that the cgroups and the machine cannot hold (those go to swap).
fn resident(sc: &Scenario, frames: u64) -> (u64, u64) {
    // Frames: each workload's pages go to its cgroup; a cgroup holds at most its
    // memory.max and what its subtree asks for (children come after their parents in the
    // list, so one backward pass sums the tree).
    let n = sc.cgroups.len();
    let index: std::collections::HashMap<&str, usize> = sc
        .cgroups
        .iter()
        .enumerate()
        .map(|(i, c)| (c.path.as_str(), i + 1))
        .collect();
    let mut want = vec![0u64; n + 1];
    let mut anon = vec![0u64; n + 1];
    for w in &sc.workloads {
        let c = index.get(w.common().cgroup.as_str()).copied().unwrap_or(0);
        let (pages, a) = w.spec().demand(frames);
        want[c] = want[c].saturating_add(pages);
        anon[c] = anon[c].saturating_add(a);
    }
    // Anonymous pages a cgroup cannot hold go to swap.
    let mut overflow = 0u64;
    for i in (1..=n).rev() {
        let cap = sc.cgroups[i - 1].memory.max.map_or(u64::MAX, Limit::pages);
        let (held, anon_held) = (want[i].min(cap), anon[i].min(cap));
        overflow = overflow.saturating_add(anon[i] - anon_held);
        let parent = index
            .get(crate::scenario::parent_path(&sc.cgroups[i - 1].path))
            .copied()
            .unwrap_or(0);
        want[parent] = want[parent].saturating_add(held);
        anon[parent] = anon[parent].saturating_add(anon_held);
    }
    overflow = overflow.saturating_add(anon[0] - anon[0].min(frames));
    (want[0].min(frames), overflow)
}

/// Estimate the host memory of a validated scenario's run.
pub fn estimate(sc: &Scenario) -> Estimate {
    let m = &sc.machine;
    let frames = m.memory_per_node.pages() * m.nodes as u64;
    let nodes = m.nodes as u64;
    let cpus = m.cpus as u64 + nodes;
    let mut terms = Terms::default();

    let (used, overflow) = resident(sc, frames);
    let per = FRAME_BYTES;
    terms.add(
        format!("frame table ({per} bytes per page of the {used} pages the workloads can use)"),
        "scenario.machine.memory_per_node".into(),
        used * per,
    );

    for (index, w) in sc.workloads.iter().enumerate() {
        let cx = Check {
            index,
            scenario: sc,
        };
        w.spec().memory(&cx, &mut terms);
    }

    if let Some(sw) = &m.swap {
        let slots = sw.size.pages().min(overflow);
        terms.add(
            format!("swap map ({slots} slots: the anonymous pages the cgroups and the machine cannot hold)"),
            "scenario.machine.swap.size".into(),
            slots * SWAP_SLOT_BYTES,
        );
    }

    let memcgs = sc.cgroups.len() as u64 + 1;
    terms.add(
        format!("memcg state ({memcgs} cgroups on {nodes} node(s) and {cpus} CPUs)"),
        "scenario.cgroup".into(),
        memcgs
            * (MEMCG_BYTES
                + nodes * MEMCG_NODE_BYTES
                + cpus * (MEMCG_CPU_BYTES + nodes * MEMCG_NODE_CPU_BYTES)),
    );
    let tasks: u64 = sc.workloads.iter().map(|w| w.nr_tasks()).sum::<u64>() + 2 * nodes;
    terms.add(
        format!("tasks and CPUs ({tasks} tasks on {cpus} CPUs)"),
        "scenario.workload".into(),
        tasks * TASK_BYTES + cpus * CPU_BYTES,
    );
    let samples = sc.duration.0 / sc.sample_interval.0;
    terms.add(
        format!("time series ({samples} samples of {memcgs} cgroups: duration / sample_interval)"),
        "scenario.sample_interval".into(),
        samples.saturating_mul(memcgs).saturating_mul(ROW_BYTES),
    );
    if sc.kernel.lru == crate::scenario::LruKind::Mglru {
        let rows = samples.saturating_mul(memcgs * nodes * crate::mm::lru_gen::MAX_NR_GENS);
        terms.add(
            format!(
                "lru_gen samples ({rows} rows: a generation of each cgroup and node per sample)"
            ),
            "scenario.sample_interval".into(),
            rows.saturating_mul(LRU_GEN_ROW_BYTES),
        );
    }

    let terms = terms.0;
    let total = terms.iter().fold(0u64, |a, t| a.saturating_add(t.bytes));
    Estimate { total, terms }
}

/// The memory limit of a run: `max_memory`, else what this process may take ([`available_memory`]; None
/// when neither is known: no limit).
pub fn limit(max_memory: Option<u64>) -> Option<u64> {
    max_memory.or_else(available_memory)
}

/// Where the limit of a run comes from, in words (for a refusal).
fn limit_source(max_memory: Option<u64>) -> String {
    match max_memory {
        Some(_) => "--max-memory".into(),
        None => available_memory_why().map_or("the machine's available memory".into(), |(_, w)| w),
    }
}

/// Refuse a run whose estimate exceeds `limit`; otherwise return the estimate.
pub fn check(sc: &Scenario, limit: Option<u64>) -> Result<Estimate> {
    check_from(sc, limit, "--max-memory".into())
}

/// Refuse a run whose estimate exceeds the limit `max_memory` or, without it, the memory
/// available to this process ([`available_memory`]); the refusal names which.
pub fn check_available(sc: &Scenario, max_memory: Option<u64>) -> Result<Estimate> {
    check_from(sc, limit(max_memory), limit_source(max_memory))
}

fn check_from(sc: &Scenario, limit: Option<u64>, source: String) -> Result<Estimate> {
    let e = estimate(sc);
    if let Some(l) = limit {
        if e.total > l {
            let big = e.largest().cloned().unwrap_or(Term {
                name: "nothing".into(),
                field: "scenario".into(),
                bytes: 0,
            });
            return Err(Error::scenario(
                big.field,
                format!(
                    "the run needs an estimated {} of memory, above the {} allowed ({source}; --max-memory sets the limit); the largest part is the {}: {}",
                    human(e.total),
                    human(l),
                    big.name,
                    human(big.bytes)
                ),
            ));
        }
    }
    Ok(e)
}
