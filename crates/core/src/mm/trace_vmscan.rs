//! The vmscan tracepoints the model fires, counted as a hist trigger counts them.
//!
//! Models include/trace/events/vmscan.h's mm_vmscan_lru_shrink_inactive and
//! mm_vmscan_lru_shrink_active, fired where mm/vmscan.c fires them: at the end of
//! shrink_inactive_list (after the putback; not when nothing was isolated, which returns
//! first) and of shrink_active_list. `kernel-run --vm --trace-hist` puts a hist trigger on
//! the kernel's events; with the scenario's `tracepoints = true` the model keeps the same
//! table for the same events, so the two can be set side by side row by row (the front's
//! tracehist.py sums this table over the keys a trigger names).
//!
//! Why a table and not a log: a hist trigger keeps one entry per distinct key with its
//! hit count and the sums of its value fields, and so does this, keyed by every field the
//! model gives a value that a trigger could key on (nid and priority; the kernel's
//! reclaim_flags carry the file bit and the writeback mode, left out).
//!
//! MGLRU has no active list, so no mm_vmscan_lru_shrink_active; its evict_folios fires
//! mm_vmscan_lru_shrink_inactive from 6.12 on (rule mglru_vmscan_tracepoints; 6.1's MGLRU
//! fires no vmscan event), once per shrink_folio_list pass, the retry pass included
//! (mm/lru_gen/eviction.rs). Simplified: these two events only; mm_vmscan_lru_isolate
//! (isolate_lru_folios, and MGLRU's scan_folios) and the rest are not fired, and the
//! front says so.

use std::collections::BTreeMap;

/// A tracepoint the model fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tracepoint {
    /// mm_vmscan_lru_shrink_inactive: nr_scanned, nr_reclaimed.
    LruShrinkInactive,
    /// mm_vmscan_lru_shrink_active: nr_taken, nr_active, nr_deactivated, nr_referenced.
    LruShrinkActive,
}

impl Tracepoint {
    /// The event's name under tracing/events/vmscan.
    pub fn name(self) -> &'static str {
        match self {
            Tracepoint::LruShrinkInactive => "mm_vmscan_lru_shrink_inactive",
            Tracepoint::LruShrinkActive => "mm_vmscan_lru_shrink_active",
        }
    }

    /// The value fields, in the order `hit` takes them.
    pub fn vals(self) -> &'static [&'static str] {
        match self {
            Tracepoint::LruShrinkInactive => &["nr_scanned", "nr_reclaimed"],
            Tracepoint::LruShrinkActive => {
                &["nr_taken", "nr_active", "nr_deactivated", "nr_referenced"]
            }
        }
    }
}

/// The key of one table entry: the event and its key fields.
type Key = (Tracepoint, u32, i32);

/// The hit counts and value sums of the events fired, per (event, nid, priority).
#[derive(Default)]
pub struct TraceHist {
    entries: BTreeMap<Key, (u64, [u64; 4])>,
}

impl TraceHist {
    /// One firing of `tp` on node `nid` at `priority` with its value fields (in
    /// `tp.vals()` order; the rest 0).
    pub fn hit(&mut self, tp: Tracepoint, nid: u32, priority: i32, vals: [u64; 4]) {
        let e = self.entries.entry((tp, nid, priority)).or_default();
        e.0 += 1;
        for (s, v) in e.1.iter_mut().zip(vals) {
            *s += v;
        }
    }

    /// The result's `tracepoints` table: one row per entry, keys then sums.
    pub fn report(&self) -> Vec<serde_json::Value> {
        self.entries
            .iter()
            .map(|(&(tp, nid, priority), &(hits, sums))| {
                let mut row = serde_json::json!({
                    "event": tp.name(),
                    "nid": nid,
                    "priority": priority,
                    "hitcount": hits,
                });
                for (name, s) in tp.vals().iter().zip(sums) {
                    row[*name] = s.into();
                }
                row
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_are_counted_and_summed_per_key_in_key_order() {
        let mut t = TraceHist::default();
        t.hit(Tracepoint::LruShrinkInactive, 0, 12, [2, 1, 0, 0]);
        t.hit(Tracepoint::LruShrinkActive, 0, 11, [4, 0, 4, 0]);
        t.hit(Tracepoint::LruShrinkInactive, 0, 12, [3, 3, 0, 0]);
        t.hit(Tracepoint::LruShrinkInactive, 1, 11, [8, 5, 0, 0]);
        let r = t.report();
        assert_eq!(r.len(), 3);
        assert_eq!(
            r[0],
            serde_json::json!({"event": "mm_vmscan_lru_shrink_inactive", "nid": 0, "priority": 12,
                               "hitcount": 2, "nr_scanned": 5, "nr_reclaimed": 4})
        );
        assert_eq!(r[1]["nid"], 1);
        assert_eq!(
            r[2],
            serde_json::json!({"event": "mm_vmscan_lru_shrink_active", "nid": 0, "priority": 11,
                               "hitcount": 1, "nr_taken": 4, "nr_active": 0, "nr_deactivated": 4,
                               "nr_referenced": 0})
        );
    }
}
