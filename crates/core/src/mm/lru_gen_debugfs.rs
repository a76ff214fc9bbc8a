//! /sys/kernel/debug/lru_gen, read side: each memcg's generations per node (the
//! lru_gen_seq_show() of mm/vmscan.c), in the report and sampled into a time series.
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

use super::lru_gen::{evictable_min_seq, lru_gen_from_seq, ANON_AND_FILE, MAX_SWAPPINESS};
use super::{LruvecId, Mm};
use serde_json::{json, Value};

/// Columns of the lru_gen rows, in the report and its time series (after `t_ns`).
pub const LRU_GEN_COLUMNS: [&str; 7] = [
    "memcg_id", "cgroup", "node", "seq", "age_ms", "nr_anon", "nr_file",
];

impl Mm {
    /// lru_gen_seq_show() of one lruvec at virtual time `now`: one row per generation,
    /// as (memcg id, path, node, seq, age_ms, nr_anon, nr_file).
    pub fn lru_gen_seq_show(&self, lv: LruvecId, now: u64) -> Vec<Value> {
        let l = &self.lruvecs[lv as usize];
        let g = &l.lrugen;
        let memcg = &self.memcgs[l.memcg as usize];
        let first = evictable_min_seq(g.min_seq, MAX_SWAPPINESS / 2);
        (first..=g.max_seq)
            .map(|seq| {
                let gen = lru_gen_from_seq(seq);
                let age_ms = now.saturating_sub(g.timestamps[gen]) / 1_000_000;
                let nr: [u64; ANON_AND_FILE] =
                    std::array::from_fn(|ty| g.nr_pages[gen][ty].max(0) as u64);
                json!([
                    l.memcg as u32 + 1,
                    memcg.path,
                    l.node,
                    seq,
                    age_ms,
                    nr[0],
                    nr[1]
                ])
            })
            .collect()
    }

    /// /sys/kernel/debug/lru_gen as a whole: every memcg (pre-order) and node; empty with
    /// the classic LRU.
    pub fn lru_gen_debugfs(&self, now: u64) -> Vec<Value> {
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
}

/// The lru_gen rows of a run: sampled every sample interval (each row prefixed with its
/// time) and as at the end.
#[derive(Default)]
pub struct LruGenSamples {
    pub rows: Vec<Value>,
}

impl LruGenSamples {
    /// Append the debugfs file as read at `now`.
    pub fn sample(&mut self, now: u64, mm: &Mm) {
        for r in mm.lru_gen_debugfs(now) {
            let mut row = vec![json!(now)];
            row.extend(r.as_array().into_iter().flatten().cloned());
            self.rows.push(Value::Array(row));
        }
    }

    /// The report's `lru_gen` section (null with the classic LRU).
    pub fn report(&self, mm: &Mm, end: u64) -> Value {
        if !mm.lru_gen_enabled() {
            return Value::Null;
        }
        let mut ts_cols = vec!["t_ns"];
        ts_cols.extend(LRU_GEN_COLUMNS);
        json!({
            "columns": LRU_GEN_COLUMNS,
            "rows": mm.lru_gen_debugfs(end),
            "timeseries": { "columns": ts_cols, "rows": self.rows },
        })
    }
}
