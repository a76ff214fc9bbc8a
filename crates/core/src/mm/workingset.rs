//! Workingset detection: shadow entries and refault distance.
//!
//! Models mm/workingset.c (classic LRU). Each lruvec has a clock, `nonresident_age`, that
//! ticks on every eviction and activation. An evicted folio leaves a shadow entry in its
//! page-cache or swap slot recording the clock of the lruvec it was evicted from:
//!
//! ```text
//!   evict (age E) ........ refault (age R)      distance = R - E
//!   distance <= workingset_size (active file [+ inactive file for anon]
//!                                [+ anon lists if swap is available])  => activate
//! ```
//! The folio would have stayed resident had the active list been `distance` smaller, so it
//! is activated on refault; if it was part of the workingset (PG_workingset) before
//! eviction it is a *restore*, and its IO is charged to the LRU cost (lru_note_cost_refault).
//!
//! Shadow layout (u62): `eviction (42 bits) | memcg id (16) | node (3) | workingset (1)`.
//! Simplified: bucket_order is 0 (the eviction counter is wide enough), and shadow nodes are
//! never reclaimed (no shadow shrinker), so every shadow survives until its slot is reused.

use super::mm_types::{PG_ACTIVE, PG_WORKINGSET};
use super::vmstat::NodeStat;
use super::{LruvecId, MemcgId, Mm, Pfn};
use crate::sim::Sim;

pub const EVICTION_BITS: u32 = 42;
pub const EVICTION_MASK: u64 = (1 << EVICTION_BITS) - 1;

/// pack_shadow().
pub fn pack_shadow(memcg: MemcgId, node: u32, eviction: u64, workingset: bool) -> u64 {
    ((eviction & EVICTION_MASK) << 20)
        | ((memcg as u64) << 4)
        | ((node as u64 & 7) << 1)
        | workingset as u64
}

/// unpack_shadow(): (memcg, node, eviction, workingset).
pub fn unpack_shadow(s: u64) -> (MemcgId, u32, u64, bool) {
    (
        ((s >> 4) & 0xffff) as MemcgId,
        ((s >> 1) & 7) as u32,
        (s >> 20) & EVICTION_MASK,
        s & 1 != 0,
    )
}

impl Mm {
    /// workingset_age_nonresident(): advance the clock of `lv` and every ancestor's lruvec on
    /// the same node.
    pub fn workingset_age_nonresident(&mut self, lv: LruvecId, nr: u64) {
        let mut l = Some(lv);
        while let Some(id) = l {
            let v = &mut self.lruvecs[id as usize];
            v.nonresident_age += nr;
            l = v.parent;
        }
    }

    /// workingset_eviction(): the shadow for a folio being evicted by reclaim targeting
    /// `target` (the root for global reclaim). Ages the target's lruvec.
    pub fn workingset_eviction(&mut self, pfn: Pfn, target: MemcgId) -> u64 {
        let node = self.pfn_node(pfn);
        let lv = self.lruvec_of(target, node);
        let eviction = self.lruvecs[lv as usize].nonresident_age;
        self.workingset_age_nonresident(lv, 1);
        pack_shadow(
            target,
            node,
            eviction,
            self.pages[pfn as usize].test(PG_WORKINGSET),
        )
    }

    /// workingset_test_recent(): is the refault distance within the workingset size of the
    /// lruvec the folio was evicted from? Reads hierarchical, last-flushed sizes.
    pub fn workingset_test_recent(&mut self, shadow: u64, file: bool, now: u64) -> bool {
        let (memcg, node, eviction, _) = unpack_shadow(shadow);
        if memcg as usize >= self.memcgs.len() {
            return false;
        }
        self.flush_stats_ratelimited(now);
        let lv = &self.lruvecs[self.lruvec_of(memcg, node) as usize];
        let distance = lv.nonresident_age.wrapping_sub(eviction) & EVICTION_MASK;
        let mut size = lv.page_state(NodeStat::NrActiveFile);
        if !file {
            size += lv.page_state(NodeStat::NrInactiveFile);
        }
        if self.mem_cgroup_get_nr_swap_pages(memcg) > 0 {
            size += lv.page_state(NodeStat::NrActiveAnon);
            if file {
                size += lv.page_state(NodeStat::NrInactiveAnon);
            }
        }
        distance <= size
    }

    /// workingset_activation(): a folio activated by folio_mark_accessed ages its lruvec.
    pub fn workingset_activation(&mut self, pfn: Pfn) {
        let lv = self.folio_lruvec(pfn);
        self.workingset_age_nonresident(lv, 1);
    }
}

impl Sim {
    /// workingset_refault(): a folio is being faulted or read back in; `shadow` is what its
    /// slot held. Counts the refault on the folio's lruvec; if the distance says the folio
    /// would have been resident with a smaller active list, activates it, and if it was
    /// workingset before eviction, records it as a restore and charges the IO cost
    /// (lru_note_cost_refault, which takes the lruvec's lru_lock and its ancestors').
    /// Called before the folio is added to the LRU.
    pub async fn workingset_refault(&self, pfn: Pfn, shadow: u64) {
        let restore = {
            let mut mm = self.mm.borrow_mut();
            let file = mm.pages[pfn as usize].is_file_lru();
            let lv = mm.folio_lruvec(pfn);
            let (rf, act, rs) = if file {
                (
                    NodeStat::WorkingsetRefaultFile,
                    NodeStat::WorkingsetActivateFile,
                    NodeStat::WorkingsetRestoreFile,
                )
            } else {
                (
                    NodeStat::WorkingsetRefaultAnon,
                    NodeStat::WorkingsetActivateAnon,
                    NodeStat::WorkingsetRestoreAnon,
                )
            };
            mm.lruvecs[lv as usize].mod_state(rf, 1);
            mm.stats_updates += 1;
            let now = self.e.now();
            if !mm.workingset_test_recent(shadow, file, now) {
                return;
            }
            mm.pages[pfn as usize].set(PG_ACTIVE);
            mm.workingset_age_nonresident(lv, 1);
            mm.lruvecs[lv as usize].mod_state(act, 1);
            let (_, _, _, ws) = unpack_shadow(shadow);
            if ws {
                mm.pages[pfn as usize].set(PG_WORKINGSET);
                mm.lruvecs[lv as usize].mod_state(rs, 1);
                Some((lv, file))
            } else {
                None
            }
        };
        if let Some((lv, file)) = restore {
            self.lru_note_cost(lv, file, 1, 0, crate::engine::Site::WorkingsetRefault)
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shadow_round_trips() {
        let s = pack_shadow(513, 5, 123_456_789_012, true);
        assert_eq!(unpack_shadow(s), (513, 5, 123_456_789_012, true));
        let s = pack_shadow(0, 0, EVICTION_MASK + 5, false);
        assert_eq!(unpack_shadow(s), (0, 0, 4, false));
        assert!(s < (1 << 62));
    }
}
