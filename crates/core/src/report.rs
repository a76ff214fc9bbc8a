//! The result of a run, under kernel names (docs/results.md documents the JSON schema).
//!
//! - `vmstat`: /proc/vmstat lines (state items summed over every lruvec, then events);
//! - `cgroups`: per memcg, cgroup v2 files: memory.current/max/high/low/min/peak,
//!   memory.swap.current, memory.stat (hierarchical; sizes in bytes) and memory.events
//!   (hierarchical);
//! - `locks`: `perf lock contention` per (lock, caller);
//! - `timeseries`: one row per cgroup per sample interval (sizes in bytes, counters as deltas).

use crate::mm::memcontrol::MEMCG_EVENT_NAMES;
use crate::mm::vmstat::{
    NodeStat, VmEvent, NODE_STAT_NAMES, NR_NODE_STAT, NR_VM_EVENTS, VM_EVENT_NAMES,
};
use crate::mm::{MemcgId, Mm};
use crate::scenario::{Scenario, PAGE_SIZE};
use crate::sim::Sim;
use crate::workload::WorkloadStats;
use serde::Serialize;
use serde_json::{json, Map, Value};

pub const SCHEMA_VERSION: u32 = 1;

/// Hierarchical counters of one memcg (itself plus descendants, all nodes).
#[derive(Clone)]
struct MemcgView {
    stat: [i64; NR_NODE_STAT],
    events: [u64; NR_VM_EVENTS],
    mem_events: [u64; 5],
    swap: u64,
    /// Kernel memory charged: slab (xarray nodes) and page tables [bytes].
    slab: u64,
    pgtables: u64,
}

/// The hierarchical counters of every memcg, indexed by id: each memcg's own, then
/// children added into parents bottom-up (linear in the tree's size).
fn memcg_views(mm: &Mm) -> Vec<MemcgView> {
    let mut views: Vec<MemcgView> = mm
        .memcgs
        .iter()
        .map(|mc| {
            let mut v = MemcgView {
                stat: [0; NR_NODE_STAT],
                events: [0; NR_VM_EVENTS],
                mem_events: [0; 5],
                swap: mc.swap_usage,
                slab: mc.slab_reclaimable_bytes,
                pgtables: mc.pagetables_bytes,
            };
            for &lv in &mc.lruvecs {
                for (i, s) in mm.lruvecs[lv as usize].stat.iter().enumerate() {
                    v.stat[i] += s;
                }
            }
            for (i, e) in mc.vm_events.iter().enumerate() {
                v.events[i] += e;
            }
            for (i, e) in mc.events.iter().enumerate() {
                v.mem_events[i] += e;
            }
            v
        })
        .collect();
    // Pre-order lists parents before children: backwards, every child is complete before
    // it is added to its parent.
    for &c in mm.memcg_preorder.iter().rev() {
        if let Some(p) = mm.memcgs[c as usize].parent {
            let (c, p) = (c as usize, p as usize);
            let child = views[c].clone();
            let v = &mut views[p];
            for (a, b) in v.stat.iter_mut().zip(child.stat.iter()) {
                *a += b;
            }
            for (a, b) in v.events.iter_mut().zip(child.events.iter()) {
                *a += b;
            }
            for (a, b) in v.mem_events.iter_mut().zip(child.mem_events.iter()) {
                *a += b;
            }
            v.swap += child.swap;
            v.slab += child.slab;
            v.pgtables += child.pgtables;
        }
    }
    views
}

fn page_bytes(p: i64) -> u64 {
    p.max(0) as u64 * PAGE_SIZE
}

/// The columns of the time series.
pub const TS_COLUMNS: [&str; 16] = [
    "t_ns",
    "cgroup",
    "memory.current",
    "inactive_anon",
    "active_anon",
    "inactive_file",
    "active_file",
    "unevictable",
    "pgscan",
    "pgsteal",
    "pgfault",
    "pgmajfault",
    "workingset_refault_anon",
    "workingset_refault_file",
    "pswpin",
    "pswpout",
];

/// The report's `timeseries`: `{"interval_ns", "columns": TS_COLUMNS, "rows"}`, each row
/// an array in TS_COLUMNS order, written one by one.
pub struct Timeseries {
    interval_ns: u64,
    /// Each memcg's path, by index.
    paths: Vec<String>,
    rows: Vec<TsRow>,
}

impl Serialize for Timeseries {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        struct Row<'a>(&'a TsRow, &'a str);
        impl Serialize for Row<'_> {
            fn serialize<S: serde::Serializer>(
                &self,
                s: S,
            ) -> std::result::Result<S::Ok, S::Error> {
                let mut q = s.serialize_seq(Some(TS_COLUMNS.len()))?;
                q.serialize_element(&self.0.t_ns)?;
                q.serialize_element(self.1)?;
                for v in &self.0.values {
                    q.serialize_element(v)?;
                }
                q.end()
            }
        }
        let rows = self
            .rows
            .iter()
            .map(|r| Row(r, &self.paths[r.memcg as usize]));
        TableOut {
            interval_ns: Some(self.interval_ns),
            columns: &TS_COLUMNS,
            rows: SeqOut(rows),
        }
        .serialize(s)
    }
}

/// A table of the report written as it is read, not built as a JSON value first:
/// `{"interval_ns" (when it has one), "columns", "rows"}`.
pub(crate) struct TableOut<'a, R: Serialize> {
    pub interval_ns: Option<u64>,
    pub columns: &'a [&'a str],
    pub rows: R,
}

impl<R: Serialize> Serialize for TableOut<'_, R> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(2 + self.interval_ns.is_some() as usize))?;
        if let Some(i) = self.interval_ns {
            m.serialize_entry("interval_ns", &i)?;
        }
        m.serialize_entry("columns", self.columns)?;
        m.serialize_entry("rows", &self.rows)?;
        m.end()
    }
}

/// The items of an iterator written as a JSON array, one by one.
pub(crate) struct SeqOut<I>(pub I);

impl<I: Iterator + Clone> Serialize for SeqOut<I>
where
    I::Item: Serialize,
{
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_seq(self.0.clone())
    }
}

/// Samples per-cgroup sizes and counter deltas on virtual time.
pub struct Sampler {
    pub interval: u64,
    /// The time of the last sample taken (0: none yet).
    pub last: u64,
    prev: Vec<[u64; 6]>,
    prev_global: [u64; 2],
    rows: Vec<TsRow>,
}

/// One row of the time series: its time, the cgroup, and the other TS_COLUMNS in order
/// (a full-scale seed 001 run keeps 543k of them: 128 bytes each rather than a JSON value
/// per row).
struct TsRow {
    t_ns: u64,
    memcg: MemcgId,
    values: [u64; TS_COLUMNS.len() - 2],
}

impl Sampler {
    pub fn new(interval: u64) -> Self {
        Sampler {
            interval,
            last: 0,
            prev: Vec::new(),
            prev_global: [0; 2],
            rows: Vec::new(),
        }
    }

    pub fn sample(&mut self, now: u64, mm: &Mm) {
        use VmEvent::*;
        self.last = now;
        if self.prev.len() != mm.memcgs.len() {
            self.prev = vec![[0; 6]; mm.memcgs.len()];
        }
        let g = [mm.events[Pswpin as usize], mm.events[Pswpout as usize]];
        let dg = [g[0] - self.prev_global[0], g[1] - self.prev_global[1]];
        self.prev_global = g;
        let views = memcg_views(mm);
        for &m in &mm.memcg_preorder {
            let v = &views[m as usize];
            let ev = |e: VmEvent| v.events[e as usize];
            let cur = [
                ev(PgscanKswapd) + ev(PgscanDirect) + ev(PgscanProactive),
                ev(PgstealKswapd) + ev(PgstealDirect) + ev(PgstealProactive),
                ev(Pgfault),
                ev(Pgmajfault),
                v.stat[NodeStat::WorkingsetRefaultAnon as usize].max(0) as u64,
                v.stat[NodeStat::WorkingsetRefaultFile as usize].max(0) as u64,
            ];
            let p = &mut self.prev[m as usize];
            let d: Vec<u64> = cur.iter().zip(p.iter()).map(|(c, o)| c - o).collect();
            *p = cur;
            let st = |s: NodeStat| page_bytes(v.stat[s as usize]);
            self.rows.push(TsRow {
                t_ns: now,
                memcg: m,
                values: [
                    mm.memcgs[m as usize].usage * PAGE_SIZE,
                    st(NodeStat::NrInactiveAnon),
                    st(NodeStat::NrActiveAnon),
                    st(NodeStat::NrInactiveFile),
                    st(NodeStat::NrActiveFile),
                    st(NodeStat::NrUnevictable),
                    d[0],
                    d[1],
                    d[2],
                    d[3],
                    d[4],
                    d[5],
                    dg[0],
                    dg[1],
                ],
            });
        }
    }
}

/// The whole result.
#[derive(Serialize)]
pub struct Report {
    pub schema_version: u32,
    pub scenario: Value,
    pub end_ns: u64,
    pub vmstat: Map<String, Value>,
    pub cgroups: Vec<Value>,
    pub locks: Vec<Value>,
    pub workloads: Vec<WorkloadStats>,
    pub oom_kills: Vec<Value>,
    pub reclaim: Value,
    /// memory.reclaim writes of the `[[reclaim]]` schedules (absent without any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub proactive: Option<Value>,
    /// /sys/kernel/debug/lru_gen writes of the `[[lru_gen]]` schedules (absent without any).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lru_gen_writes: Option<Value>,
    /// Tracepoint-derived counters (mm_lru_insertion and its dead share, seed 003).
    pub trace: crate::mm::TraceCounters,
    /// The vmscan tracepoints' hist table, with the scenario's `tracepoints = true`
    /// (mm/trace_vmscan.rs): one row per (event, nid, priority), its hitcount and sums.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tracepoints: Option<Vec<Value>>,
    pub timeseries: Timeseries,
    /// /sys/kernel/debug/lru_gen at the end and sampled (MGLRU; null with the classic LRU).
    pub lru_gen: crate::mm::lru_gen::LruGenReport,
    /// The cost table the run used: name -> {"ns", "origin"}, the origin being `default`,
    /// `machine.profile NAME`, `costs_profile FILE` or `costs` (engine/cost_profile.rs).
    pub costs: Map<String, Value>,
    pub engine: Value,
}

/// The run's cost table with each value's origin.
fn cost_report(sim: &Sim) -> Map<String, Value> {
    let mut m = Map::new();
    for (name, o) in &sim.cost_origins {
        let origin = if o.from.is_empty() {
            o.layer.to_string()
        } else {
            format!("{} {}", o.layer, o.from)
        };
        let ns = sim.c.get(name).unwrap_or(0);
        m.insert(name.to_string(), json!({"ns": ns, "origin": origin}));
    }
    m
}

fn limit_bytes(pages: u64) -> Value {
    if pages == u64::MAX {
        json!("max")
    } else {
        json!(pages * PAGE_SIZE)
    }
}

impl Report {
    pub fn build(sim: &Sim, sc: &Scenario) -> Report {
        let mm = sim.mm.borrow();
        let end_ns = sim.e.stop_time().unwrap_or(sim.end).min(sim.end);
        // /proc/vmstat
        let mut vmstat = Map::new();
        let free: u64 = mm.nodes.iter().map(|n| n.free).sum();
        vmstat.insert("nr_free_pages".into(), json!(free));
        let mut state = [0i64; NR_NODE_STAT];
        for lv in &mm.lruvecs {
            for (i, s) in lv.stat.iter().enumerate() {
                state[i] += s;
            }
        }
        for (i, name) in NODE_STAT_NAMES.iter().enumerate() {
            vmstat.insert((*name).into(), json!(state[i].max(0)));
        }
        for (i, name) in VM_EVENT_NAMES.iter().enumerate() {
            vmstat.insert((*name).into(), json!(mm.events[i]));
        }
        // cgroups
        let mut cgroups = Vec::new();
        let views = memcg_views(&mm);
        for &m in &mm.memcg_preorder {
            let mc = &mm.memcgs[m as usize];
            let v = &views[m as usize];
            let st = |s: NodeStat| page_bytes(v.stat[s as usize]);
            let ev = |e: VmEvent| v.events[e as usize];
            let mut stat = Map::new();
            use NodeStat::*;
            use VmEvent::*;
            for (k, val) in [
                ("anon", st(NrAnonMapped)),
                // A memcg's NR_FILE_PAGES leaves out the swap cache, which the kernel
                // counts in NR_FILE_PAGES per node only (the lruvecs keep both).
                (
                    "file",
                    page_bytes(v.stat[NrFilePages as usize] - v.stat[NrSwapcache as usize]),
                ),
                ("swapcached", st(NrSwapcache)),
                ("file_writeback", st(NrWriteback)),
                ("inactive_anon", st(NrInactiveAnon)),
                ("active_anon", st(NrActiveAnon)),
                ("inactive_file", st(NrInactiveFile)),
                ("active_file", st(NrActiveFile)),
                ("unevictable", st(NrUnevictable)),
            ] {
                stat.insert(k.into(), json!(val));
            }
            // Kernel memory charged to the subtree (hierarchical, as memory.stat shows it).
            let (slab, pgtables) = (v.slab, v.pgtables);
            stat.insert("kernel".into(), json!(slab + pgtables));
            stat.insert("pagetables".into(), json!(pgtables));
            stat.insert("slab_reclaimable".into(), json!(slab));
            for s in [
                WorkingsetRefaultAnon,
                WorkingsetRefaultFile,
                WorkingsetActivateAnon,
                WorkingsetActivateFile,
                WorkingsetRestoreAnon,
                WorkingsetRestoreFile,
                WorkingsetNodereclaim,
            ] {
                stat.insert(
                    NODE_STAT_NAMES[s as usize].into(),
                    json!(v.stat[s as usize].max(0)),
                );
            }
            for (k, val) in [
                (
                    "pgscan",
                    ev(PgscanKswapd) + ev(PgscanDirect) + ev(PgscanProactive),
                ),
                (
                    "pgsteal",
                    ev(PgstealKswapd) + ev(PgstealDirect) + ev(PgstealProactive),
                ),
                ("pgscan_kswapd", ev(PgscanKswapd)),
                ("pgscan_direct", ev(PgscanDirect)),
                ("pgscan_proactive", ev(PgscanProactive)),
                ("pgsteal_kswapd", ev(PgstealKswapd)),
                ("pgsteal_direct", ev(PgstealDirect)),
                ("pgsteal_proactive", ev(PgstealProactive)),
                ("pgfault", ev(Pgfault)),
                ("pgmajfault", ev(Pgmajfault)),
                ("pgrefill", ev(Pgrefill)),
                ("pgactivate", ev(Pgactivate)),
                ("pgdeactivate", ev(Pgdeactivate)),
            ] {
                stat.insert(k.into(), json!(val));
            }
            let mut events = Map::new();
            for (i, n) in MEMCG_EVENT_NAMES.iter().enumerate() {
                events.insert((*n).into(), json!(v.mem_events[i]));
            }
            cgroups.push(json!({
                "path": mc.path,
                "memory.current": mc.usage * PAGE_SIZE,
                "memory.max": limit_bytes(mc.max),
                "memory.high": limit_bytes(mc.high),
                "memory.low": mc.low * PAGE_SIZE,
                "memory.min": mc.min * PAGE_SIZE,
                "memory.peak": mc.peak * PAGE_SIZE,
                "memory.swap.current": v.swap * PAGE_SIZE,
                "memory.stat": stat,
                "memory.events": events,
            }));
        }
        // perf lock contention: every acquisition's wait (the truth); observed, also what
        // the observer reads (the traced acquisitions only, engine/perf_lock.rs).
        let observed = !sim.e.observe().is_none();
        let mut locks: Vec<(u64, Value)> = sim
            .e
            .lock_stats()
            .into_iter()
            .map(|(class, site, s)| {
                let mut row = json!({
                    "name": class.name(),
                    "caller": site.name(),
                    "acquisitions": s.acquisitions,
                    "contended": s.contended,
                    "total_wait_ns": s.total_wait,
                    "max_wait_ns": s.max_wait,
                    "avg_wait_ns": s.total_wait.checked_div(s.contended).unwrap_or(0),
                    "total_hold_ns": s.total_hold,
                });
                if observed {
                    row["observed"] = json!({
                        "contended": s.traced,
                        "total_wait_ns": s.traced_wait,
                        "max_wait_ns": s.traced_max_wait,
                        "avg_wait_ns": s.traced_wait.checked_div(s.traced).unwrap_or(0),
                    });
                }
                (s.total_wait, row)
            })
            .collect();
        locks.sort_by_key(|l| std::cmp::Reverse(l.0));
        let locks = locks.into_iter().map(|x| x.1).collect();
        let mut workloads = sim.workloads.borrow().clone();
        let warmup = sim.warmup.1.borrow();
        for (i, (w, t)) in workloads
            .iter_mut()
            .zip(sim.tallies.borrow().iter())
            .enumerate()
        {
            t.report_into(w);
            w.threads = sim
                .threads
                .borrow()
                .iter()
                .filter(|th| th.wi == i)
                .map(|th| th.stats(end_ns))
                .collect();
            w.threads.sort_by_key(|th| th.stream);
            let end = if w.live > 0 { end_ns } else { w.end_ns };
            let start = if w.start_ns == u64::MAX {
                end
            } else {
                w.start_ns
            };
            w.runtime_ns = end.saturating_sub(start);
            // The rate after the warmup: accesses since its end over the time since, for a
            // workload still running then (one that ended earlier keeps its whole run).
            let (from, done) = match warmup.as_ref() {
                Some(snap) if end > sim.warmup.0 => (start.max(sim.warmup.0), snap[i]),
                _ => (start, 0),
            };
            let span = end.saturating_sub(from);
            w.throughput = if span > 0 {
                (w.accesses - done) as f64 * 1e9 / span as f64
            } else {
                0.0
            };
        }
        let oom_kills = mm
            .oom_log
            .iter()
            .map(|(t, m, mmid)| {
                let wl = mm.mms[*mmid as usize].workload as usize;
                json!({
                    "t_ns": t,
                    "cgroup": mm.memcgs[*m as usize].path,
                    "workload": workloads.get(wl).map(|w| w.name.clone()).unwrap_or_default(),
                    "task": mmid,
                })
            })
            .collect();
        let stats = sim.stats.borrow();
        // The rows move into the report (the run is over): no second copy of them.
        let (interval, rows) = {
            let mut sampler = sim.sampler.borrow_mut();
            (sampler.interval, std::mem::take(&mut sampler.rows))
        };
        let nr_tasks: u64 = workloads.iter().map(|w| w.tasks as u64).sum();
        Report {
            schema_version: SCHEMA_VERSION,
            scenario: serde_json::to_value(sc).unwrap_or(Value::Null),
            end_ns,
            vmstat,
            cgroups,
            locks,
            workloads,
            oom_kills,
            reclaim: json!({
                "kswapd_cpu_ns": sim.kswapd_cpu_ns(end_ns),
                "direct_reclaim_ns": stats.direct_reclaim_ns,
                "direct_reclaims": stats.direct_reclaims,
            }),
            proactive: crate::schedule::report(sim, sc),
            lru_gen_writes: crate::schedule::lru_gen_report(sim, sc),
            trace: mm.trace,
            tracepoints: mm.trace_hist.as_ref().map(|t| t.report()),
            timeseries: Timeseries {
                interval_ns: interval,
                paths: mm.memcgs.iter().map(|m| m.path.clone()).collect(),
                rows,
            },
            lru_gen: sim.lru_gen_samples.borrow_mut().report(&mm, end_ns),
            costs: cost_report(sim),
            engine: json!({
                "polls": sim.e.polls.get(),
                "events": sim.e.spawned.get(),
                "lock_acquisitions": sim.e.lock_acquisitions.get(),
                "simulated_pages": mm.node_pages * mm.nodes.len() as u64,
                "peak_used_pages": mm.peak_used_frames,
                "tasks": nr_tasks,
            }),
        }
    }
}
