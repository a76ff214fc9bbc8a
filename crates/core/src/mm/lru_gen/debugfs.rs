//! /sys/kernel/debug/lru_gen: the "debugfs interface" section of mm/vmscan.c (v6.18).
//!
//! The read side: each memcg's generations per node (lru_gen_seq_show()), in the report
//! and sampled into a time series.
//!
//! The kernel prints, per memcg and node, one line per generation from the oldest one
//! eviction may take (evictable_min_seq at swappiness 100) to max_seq:
//!
//! ```text
//! memcg     1 /
//!  node     0
//!          12       1540          0       1024
//!          13        212       2048        512
//! ```
//! with the generation's sequence number, its age in milliseconds and its anon and file
//! pages. The report carries the same rows as data: (memcg id, path, node, seq, age_ms,
//! nr_anon, nr_file). Memcg ids are the kernel's (mem_cgroup_id: the root is 1, then the
//! scenario's cgroups in order); ages are virtual time.
//!
//! The write side (lru_gen_seq_write(): `+ memcg_id node_id gen [swappiness [force_scan]]`
//! ages, `- memcg_id node_id gen [swappiness [nr_to_reclaim]]` evicts) is modeled one
//! command at a time, already parsed: [`Sim::lru_gen_seq_write`].

use super::{
    evictable_min_seq, lru_gen_from_seq, ANON_AND_FILE, MAX_SWAPPINESS, MIN_NR_GENS,
    SWAPPINESS_ANON_ONLY,
};
use crate::mm::memcontrol::Errno;
use crate::mm::vmscan::ScanControl;
use crate::mm::{LruvecId, MemcgId, Mm};
use crate::report::{SeqOut, TableOut};
use crate::sim::Sim;
use serde_json::{json, Value};

/// The command of a lru_gen_seq_write() line (a `[[lru_gen]]` entry's `cmd`): `"+"` ages
/// (run_aging), `"-"` evicts (run_eviction). The scenario parses it (scenario/schedules.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LruGenCmd {
    Age,
    Evict,
}

impl LruGenCmd {
    /// The command character written to debugfs.
    pub fn as_char(self) -> char {
        match self {
            LruGenCmd::Age => '+',
            LruGenCmd::Evict => '-',
        }
    }
}

/// Columns of the lru_gen rows, in the report and its time series (after `t_ns`).
pub const LRU_GEN_COLUMNS: [&str; 7] = [
    "memcg_id", "cgroup", "node", "seq", "age_ms", "nr_anon", "nr_file",
];

/// One line of lru_gen_seq_show(): a generation of one lruvec, as the report writes it
/// (LRU_GEN_COLUMNS; the cgroup's path is looked up when written).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenRow {
    pub memcg: MemcgId,
    pub node: u32,
    pub seq: u64,
    pub age_ms: u64,
    /// Anon and file pages.
    pub nr: [u64; ANON_AND_FILE],
}

impl Mm {
    /// lru_gen_seq_show() of one lruvec at virtual time `now`: one row per generation,
    /// from evictable_min_seq at swappiness 100 to max_seq.
    pub fn lru_gen_seq_show(&self, lv: LruvecId, now: u64) -> impl Iterator<Item = LruGenRow> + '_ {
        let l = &self.lruvecs[lv as usize];
        let g = &l.lrugen;
        let first = evictable_min_seq(g.min_seq, MAX_SWAPPINESS / 2);
        (first..=g.max_seq).map(move |seq| {
            let gen = lru_gen_from_seq(seq);
            LruGenRow {
                memcg: l.memcg,
                node: l.node,
                seq,
                age_ms: now.saturating_sub(g.timestamps[gen]) / 1_000_000,
                nr: std::array::from_fn(|ty| g.nr_pages[gen][ty].max(0) as u64),
            }
        })
    }

    /// /sys/kernel/debug/lru_gen as a whole: every memcg (pre-order) and node; empty with
    /// the classic LRU.
    pub fn lru_gen_debugfs(&self, now: u64) -> Vec<LruGenRow> {
        if !self.lru_gen_enabled() {
            return Vec::new();
        }
        let mut rows = Vec::new();
        for &m in &self.memcg_preorder {
            for &lv in &self.memcgs[m as usize].lruvecs {
                rows.extend(self.lru_gen_seq_show(lv, now));
            }
        }
        rows
    }

    /// A row as the report writes it: (memcg id, path, node, seq, age_ms, nr_anon,
    /// nr_file); the memcg id is mem_cgroup_id (the root is 1).
    pub fn lru_gen_row_json(&self, r: &LruGenRow) -> Value {
        json!([
            r.memcg as u32 + 1,
            self.memcgs[r.memcg as usize].path,
            r.node,
            r.seq,
            r.age_ms,
            r.nr[0],
            r.nr[1]
        ])
    }
}

/// The lru_gen rows of a run: sampled every sample interval (each row prefixed with its
/// time) and as at the end. Kept as [`LruGenRow`]s (48 bytes) and written out by the
/// report without building a JSON value per row: a full-scale seed 001 run samples
/// 2,064 rows a second for 4,210 seconds.
#[derive(Default)]
pub struct LruGenSamples {
    rows: Vec<LruGenRow>,
    /// Each sample's time and its first row.
    times: Vec<(u64, usize)>,
}

impl LruGenSamples {
    /// Append the debugfs file as read at `now`.
    pub fn sample(&mut self, now: u64, mm: &Mm) {
        self.times.push((now, self.rows.len()));
        self.rows.extend(mm.lru_gen_debugfs(now));
    }

    /// The report's `lru_gen` section (null with the classic LRU), taking the samples.
    pub fn report(&mut self, mm: &Mm, end: u64) -> LruGenReport {
        if !mm.lru_gen_enabled() {
            return LruGenReport(None);
        }
        LruGenReport(Some(LruGenTables {
            paths: mm.memcgs.iter().map(|m| m.path.clone()).collect(),
            end: mm.lru_gen_debugfs(end),
            samples: std::mem::take(self),
        }))
    }
}

/// The report's `lru_gen` section: null with the classic LRU, else `{"columns", "rows"
/// (the file at the end), "timeseries": {"columns", "rows"}}`, each row an array in
/// LRU_GEN_COLUMNS order (the time series' rows led by `t_ns`).
pub struct LruGenReport(Option<LruGenTables>);

pub struct LruGenTables {
    /// Each memcg's path, by index.
    paths: Vec<String>,
    end: Vec<LruGenRow>,
    samples: LruGenSamples,
}

/// A row written as a JSON array, led by its sample time when it has one.
struct RowOut<'a>(Option<u64>, &'a LruGenRow, &'a [String]);

impl serde::Serialize for RowOut<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeSeq;
        let RowOut(t, r, paths) = self;
        let mut q = s.serialize_seq(Some(7 + t.is_some() as usize))?;
        if let Some(t) = t {
            q.serialize_element(t)?;
        }
        q.serialize_element(&(r.memcg as u32 + 1))?;
        q.serialize_element(&paths[r.memcg as usize])?;
        q.serialize_element(&r.node)?;
        q.serialize_element(&r.seq)?;
        q.serialize_element(&r.age_ms)?;
        q.serialize_element(&r.nr[0])?;
        q.serialize_element(&r.nr[1])?;
        q.end()
    }
}

impl serde::Serialize for LruGenReport {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let Some(t) = &self.0 else {
            return s.serialize_none();
        };
        let paths = &t.paths[..];
        let end = SeqOut(t.end.iter().map(|r| RowOut(None, r, paths)));
        let sm = &t.samples;
        let timed = sm
            .times
            .iter()
            .enumerate()
            .flat_map(move |(i, &(at, first))| {
                let last = sm.times.get(i + 1).map_or(sm.rows.len(), |n| n.1);
                sm.rows[first..last]
                    .iter()
                    .map(move |r| RowOut(Some(at), r, paths))
            });
        let mut ts_cols = vec!["t_ns"];
        ts_cols.extend(LRU_GEN_COLUMNS);
        let mut m = s.serialize_map(Some(3))?;
        m.serialize_entry("columns", &LRU_GEN_COLUMNS)?;
        m.serialize_entry("rows", &end)?;
        let timeseries = TableOut {
            interval_ns: None,
            columns: &ts_cols,
            rows: SeqOut(timed),
        };
        m.serialize_entry("timeseries", &timeseries)?;
        m.end()
    }
}

// ---------------------------------------------------------------------------------------
// The write side
// ---------------------------------------------------------------------------------------

/// One command line of a write to /sys/kernel/debug/lru_gen, as sscanf() leaves it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenCommand {
    pub cmd: LruGenCmd,
    /// The kernel memcg id (mem_cgroup_id: the root is 1).
    pub memcg_id: u32,
    pub nid: u32,
    pub seq: u64,
    /// The swappiness field (None: omitted, the kernel's -1; "max" is 201).
    pub swappiness: Option<u32>,
    /// The last field: force_scan for "+", nr_to_reclaim for "-" (None: omitted, -1).
    pub opt: Option<u64>,
}

/// What a write did: its return value and the pages its eviction reclaimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LruGenWrite {
    pub result: Result<(), Errno>,
    pub nr_reclaimed: u64,
}

impl Mm {
    /// The swappiness run_cmd() works with: the field as given, else get_swappiness() of a
    /// reclaim that may swap (the memcg's swappiness, 0 without swap space). Above
    /// SWAPPINESS_ANON_ONLY: None (the kernel's -EINVAL).
    pub fn lru_gen_cmd_swappiness(&self, lv: LruvecId, field: Option<u32>) -> Option<u32> {
        match field {
            None => Some(self.lru_gen_swappiness(lv, &ScanControl::new(0, None, false))),
            Some(s) if s > SWAPPINESS_ANON_ONLY => None,
            Some(s) => Some(s),
        }
    }

    /// The generation a script that reads debugfs just before writing puts in its command:
    /// max_seq for "+", for "-" the oldest generation evictable at the swappiness the
    /// command runs with (evict one generation).
    pub fn lru_gen_current_gen(&self, cmd: LruGenCmd, lv: LruvecId, field: Option<u32>) -> u64 {
        let g = &self.lruvecs[lv as usize].lrugen;
        match cmd {
            LruGenCmd::Age => g.max_seq,
            LruGenCmd::Evict => {
                let sw = self.lru_gen_cmd_swappiness(lv, field).unwrap_or(0);
                evictable_min_seq(g.min_seq, sw)
            }
        }
    }
}

impl Sim {
    /// lru_gen_seq_write() of one command: a proactive scan_control that may write, unmap
    /// and swap, then run_cmd(). sc.priority stays 0 and sc.nr_to_reclaim 0, as the kernel
    /// leaves them.
    ///
    /// Simplified: the text is not parsed (the command comes as sscanf() leaves it), a
    /// write carries one command, and the write(2) itself costs nothing.
    pub async fn lru_gen_seq_write(&self, c: &LruGenCommand) -> LruGenWrite {
        let mut sc = ScanControl::new(0, None, false);
        sc.proactive = true;
        sc.priority = 0;
        let result = self.lru_gen_run_cmd(c, &mut sc).await;
        LruGenWrite {
            result,
            nr_reclaimed: sc.nr_reclaimed,
        }
    }

    /// run_cmd(): -EINVAL for a node or memcg id that does not exist or a swappiness above
    /// 201; the memcg becomes the reclaim's target (its statistics count the eviction);
    /// then run_aging or run_eviction on the memcg's lruvec of the node.
    async fn lru_gen_run_cmd(&self, c: &LruGenCommand, sc: &mut ScanControl) -> Result<(), Errno> {
        let (lv, swappiness) = {
            let mm = self.mm.borrow();
            let memcg = (c.memcg_id as usize)
                .checked_sub(1)
                .filter(|&m| m < mm.memcgs.len())
                .ok_or(Errno::Einval)?;
            if c.nid as usize >= mm.nodes.len() {
                return Err(Errno::Einval);
            }
            sc.target = Some(memcg as MemcgId);
            let lv = mm.lruvec_of(memcg as MemcgId, c.nid);
            let sw = mm.lru_gen_cmd_swappiness(lv, c.swappiness);
            (lv, sw.ok_or(Errno::Einval)?)
        };
        match c.cmd {
            LruGenCmd::Age => {
                let force_scan = c.opt.is_none_or(|o| o != 0);
                self.run_aging(lv, c.seq, swappiness, force_scan).await
            }
            LruGenCmd::Evict => {
                let nr_to_reclaim = c.opt.unwrap_or(u64::MAX);
                self.run_eviction(lv, c.seq, sc, swappiness, nr_to_reclaim)
                    .await
            }
        }
    }

    /// run_aging(): -EINVAL for a generation beyond max_seq; otherwise age from the current
    /// max_seq (whatever older generation was written), -EEXIST when try_to_inc_max_seq
    /// fails (another aging got there first).
    async fn run_aging(
        &self,
        lv: LruvecId,
        seq: u64,
        swappiness: u32,
        force_scan: bool,
    ) -> Result<(), Errno> {
        let max_seq = self.mm.borrow().lruvecs[lv as usize].lrugen.max_seq;
        if seq > max_seq {
            return Err(Errno::Einval);
        }
        if self
            .try_to_inc_max_seq(lv, max_seq, swappiness, force_scan, &mut true)
            .await
        {
            Ok(())
        } else {
            Err(Errno::Eexist)
        }
    }

    /// run_eviction(): -EINVAL unless `seq` is at least MIN_NR_GENS older than max_seq;
    /// then evict_folios() of what is left of nr_to_reclaim (v6.16+; each call takes at
    /// most MAX_LRU_BATCH of it and isolates at most MIN_LRU_BATCH) until the evictable
    /// min_seq has passed `seq`, nr_to_reclaim is met, or evict_folios finds nothing.
    ///
    /// Simplified: no signals, so never -EINTR.
    async fn run_eviction(
        &self,
        lv: LruvecId,
        seq: u64,
        sc: &mut ScanControl,
        swappiness: u32,
        nr_to_reclaim: u64,
    ) -> Result<(), Errno> {
        if seq + MIN_NR_GENS > self.mm.borrow().lruvecs[lv as usize].lrugen.max_seq {
            return Err(Errno::Einval);
        }
        sc.nr_reclaimed = 0;
        loop {
            let min_seq = self.mm.borrow().lruvecs[lv as usize].lrugen.min_seq;
            if seq < evictable_min_seq(min_seq, swappiness) || sc.nr_reclaimed >= nr_to_reclaim {
                return Ok(());
            }
            let left = nr_to_reclaim - sc.nr_reclaimed;
            if self.evict_folios(left, lv, sc, swappiness).await == 0 {
                return Ok(());
            }
            self.e.sync().await;
        }
    }
}
