//! The vmscan tracepoints the model fires, counted as a hist trigger counts them.
//!
//! Models include/trace/events/vmscan.h's mm_vmscan_lru_shrink_inactive,
//! mm_vmscan_lru_shrink_active and mm_vmscan_lru_isolate, fired where mm/vmscan.c fires
//! them: at the end of shrink_inactive_list (after the putback; not when nothing was
//! isolated, which returns first), of shrink_active_list, and of isolate_lru_folios. `kernel-run --vm --trace-hist` puts a hist trigger on
//! the kernel's events; with the scenario's `tracepoints = true` the model keeps the same
//! table for the same events, so the two can be set side by side row by row (the front's
//! tracehist.py sums this table over the keys a trigger names).
//!
//! Why a table and not a log: a hist trigger keeps one entry per distinct key with its
//! hit count and the sums of its value fields, and so does this, keyed by every field the
//! model gives a value that a trigger could key on: nid and priority for the shrink
//! events (the kernel's reclaim_flags carry the file bit and the writeback mode, left
//! out), lru and order for mm_vmscan_lru_isolate (order is 0: the model reclaims for
//! order-0 pages only; its highest_zoneidx, and 6.1's isolate_mode, are left out: the
//! model has one zone per node, and never clears may_unmap).
//!
//! MGLRU has no active list, so no mm_vmscan_lru_shrink_active; from 6.12 on (rule
//! mglru_vmscan_tracepoints; 6.1's MGLRU fires no vmscan event) its evict_folios fires
//! mm_vmscan_lru_shrink_inactive once per shrink_folio_list pass, the retry pass
//! included, and its scan_folios fires mm_vmscan_lru_isolate once per pass that reached
//! the lists (not when only MIN_NR_GENS generations are left), with lru the inactive list
//! of its type, nr_requested the budget it was handed (MAX_LRU_BATCH before the scan
//! budget rule, so 6.12's constant), nr_scanned every folio it looked at, sorted ones
//! included, and nr_skipped the folios isolate_folio refused (mm/lru_gen/eviction.rs).
//! The classic isolate_lru_folios' nr_skipped counts folios of zones above the
//! reclaim's highest zone, which the model, one zone per node, never has: always 0.
//!
//! shrink_slab's do_shrink_slab fires mm_shrink_slab_start once the shrinker counted
//! something to free (after count_objects, with the deferred work it took, the count, the
//! new work and the scan total it settled on) and mm_shrink_slab_end after its batches
//! (what it freed, the deferred work it took and left, the scan it did not do), both
//! keyed by the shrinker's scan function as a `.sym` key prints it: the model has one
//! shrinker, the shadow nodes' (mm/workingset.c's scan_shadow_nodes); the kernel's
//! other memcg-aware shrinkers (a filesystem's dentries and inodes) are not modeled.
//! Simplified: these five events only; the rest are not fired, and the front says so.

use std::collections::BTreeMap;

/// A tracepoint the model fires.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tracepoint {
    /// mm_vmscan_lru_shrink_inactive: nr_scanned, nr_reclaimed.
    LruShrinkInactive,
    /// mm_vmscan_lru_shrink_active: nr_taken, nr_active, nr_deactivated, nr_referenced.
    LruShrinkActive,
    /// mm_vmscan_lru_isolate: nr_requested, nr_scanned, nr_skipped, nr_taken.
    LruIsolate,
    /// mm_shrink_slab_start: nr_objects_to_shrink, cache_items, delta, total_scan.
    ShrinkSlabStart,
    /// mm_shrink_slab_end: unused_scan, new_scan, retval, total_scan.
    ShrinkSlabEnd,
}

/// The `shrink` field of the shrinker events (shr->scan_objects, printed by a `.sym` key):
/// the one shrinker the model has.
pub const SHADOW_SHRINKER: &str = "scan_shadow_nodes";

impl Tracepoint {
    /// The event's name under tracing/events/vmscan.
    pub fn name(self) -> &'static str {
        match self {
            Tracepoint::LruShrinkInactive => "mm_vmscan_lru_shrink_inactive",
            Tracepoint::LruShrinkActive => "mm_vmscan_lru_shrink_active",
            Tracepoint::LruIsolate => "mm_vmscan_lru_isolate",
            Tracepoint::ShrinkSlabStart => "mm_shrink_slab_start",
            Tracepoint::ShrinkSlabEnd => "mm_shrink_slab_end",
        }
    }

    /// The numeric key fields, in the order `hit` takes them (the rest of its key 0).
    pub fn keys(self) -> &'static [&'static str] {
        match self {
            Tracepoint::LruShrinkInactive | Tracepoint::LruShrinkActive => &["nid", "priority"],
            Tracepoint::LruIsolate => &["lru", "order"],
            Tracepoint::ShrinkSlabStart => &["nid", "priority"],
            Tracepoint::ShrinkSlabEnd => &["nid"],
        }
    }

    /// The shrinker events' `shrink` key (the same in every entry: one shrinker).
    fn shrink(self) -> Option<&'static str> {
        matches!(
            self,
            Tracepoint::ShrinkSlabStart | Tracepoint::ShrinkSlabEnd
        )
        .then_some(SHADOW_SHRINKER)
    }

    /// The value fields, in the order `hit` takes them.
    pub fn vals(self) -> &'static [&'static str] {
        match self {
            Tracepoint::LruShrinkInactive => &["nr_scanned", "nr_reclaimed"],
            Tracepoint::LruShrinkActive => {
                &["nr_taken", "nr_active", "nr_deactivated", "nr_referenced"]
            }
            Tracepoint::LruIsolate => &["nr_requested", "nr_scanned", "nr_skipped", "nr_taken"],
            Tracepoint::ShrinkSlabStart => {
                &["nr_objects_to_shrink", "cache_items", "delta", "total_scan"]
            }
            Tracepoint::ShrinkSlabEnd => &["unused_scan", "new_scan", "retval", "total_scan"],
        }
    }
}

/// The key of one table entry: the event and its key fields (in `keys()` order).
type Key = (Tracepoint, [i64; 2]);

/// The hit counts and value sums of the events fired, per event and key.
#[derive(Default)]
pub struct TraceHist {
    entries: BTreeMap<Key, (u64, [u64; 4])>,
}

impl TraceHist {
    /// One firing of `tp` with its key fields (in `tp.keys()` order: the shrink events'
    /// nid and priority, mm_vmscan_lru_isolate's lru and order, mm_shrink_slab_end's nid
    /// and 0) and its value fields (in `tp.vals()` order; the rest 0).
    pub fn hit(&mut self, tp: Tracepoint, key: [i64; 2], vals: [u64; 4]) {
        let e = self.entries.entry((tp, key)).or_default();
        e.0 += 1;
        for (s, v) in e.1.iter_mut().zip(vals) {
            *s += v;
        }
    }

    /// The result's `tracepoints` table: one row per entry, keys then sums.
    pub fn report(&self) -> Vec<serde_json::Value> {
        self.entries
            .iter()
            .map(|(&(tp, key), &(hits, sums))| {
                let mut row = serde_json::json!({ "event": tp.name() });
                if let Some(shrink) = tp.shrink() {
                    row["shrink"] = shrink.into();
                }
                for (name, k) in tp.keys().iter().zip(key) {
                    row[*name] = k.into();
                }
                row["hitcount"] = hits.into();
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
        t.hit(Tracepoint::LruShrinkInactive, [0, 12], [2, 1, 0, 0]);
        t.hit(Tracepoint::LruShrinkActive, [0, 11], [4, 0, 4, 0]);
        t.hit(Tracepoint::LruShrinkInactive, [0, 12], [3, 3, 0, 0]);
        t.hit(Tracepoint::LruShrinkInactive, [1, 11], [8, 5, 0, 0]);
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
