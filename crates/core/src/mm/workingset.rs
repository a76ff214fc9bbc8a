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
//! Simplified: bucket_order is 0 (the eviction counter is wide enough).
//!
//! Shadow entries cost memory: a page-cache xarray node whose 64 slots hold only shadows
//! stays allocated for them. Such nodes sit on a list (shadow_nodes, per memcg), and a
//! shrinker run from reclaim (shrink_slab) frees the oldest once there are more than one
//! node per 8 pages of the memcg's LRU and slab (count_shadow_nodes: 1/8 is the density
//! below which the kernel gives up detecting every refault), counting
//! WORKINGSET_NODERECLAIM; the refaults of their pages then go undetected. The LRU pages
//! it counts are the memcg's statistics as last flushed (6.2 on), not its lists' sizes now.
//! The swap cache's leaves join the root's list where the version has them there
//! (swap_shadow_nodes_shrinkable, swap_state.rs). Simplified: one list per memcg (not per
//! memcg and node).

use super::mm_types::{PG_ACTIVE, PG_WORKINGSET};
use super::swap_state::SWAP_CACHE;
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

/// Objects a shrinker scans per call of its scan function (SHRINK_BATCH).
const SHRINK_BATCH: u64 = 128;

impl Mm {
    /// Store a page-cache entry and keep the shadow-node list of the file's memcg
    /// (workingset_update_node: a leaf holding shadows only joins it, one holding a page
    /// again leaves it).
    pub fn page_cache_store(&mut self, file: u32, index: u32, entry: u64) {
        let f = &mut self.files[file as usize];
        let m = f.memcg as usize;
        match f.set_entry(index, entry) {
            super::ShadowNode::Joined(leaf, gen) => {
                let mc = &mut self.memcgs[m];
                mc.shadow_nodes.push_back((file, leaf, gen));
                mc.nr_shadow_nodes += 1;
            }
            super::ShadowNode::Left => self.memcgs[m].nr_shadow_nodes -= 1,
            super::ShadowNode::Unchanged => {}
        }
    }

    /// count_shadow_nodes(): how many shadow nodes of `m` exceed the limit of one per
    /// 8 pages of its local LRU and slab (pages >> (XA_CHUNK_SHIFT - 3)), at `now`.
    /// Which LRU pages (rule `shadow_count_flushed_stats`): from 6.2 on the local
    /// statistics as last flushed (lruvec_page_state_local reads rstat's state_local),
    /// after a flush only when the periodic one is late (mem_cgroup_flush_stats_ratelimited,
    /// 417dbd7be383 in 6.8): right after a reclaim that emptied the memcg they can still
    /// show the pages it had, which keeps its shadows. 6.1 sums the per-CPU counters: the
    /// lists' sizes now. Simplified: the slab pages are the memcg's exact count.
    pub fn count_shadow_nodes(&mut self, m: MemcgId, now: crate::engine::Time) -> u64 {
        let flushed = self.rules.shadow_count_flushed_stats;
        if flushed {
            self.flush_stats_ratelimited(m, now);
        }
        let mc = &self.memcgs[m as usize];
        let mut pages = (mc.slab_reclaimable_bytes / super::PAGE_SIZE) as i64;
        for &lv in &mc.lruvecs {
            let l = &self.lruvecs[lv as usize];
            pages += if flushed {
                l.lru_flushed_local.iter().sum::<i64>()
            } else {
                l.stat[..super::mmzone::NR_LRU_LISTS].iter().sum::<i64>()
            };
        }
        let max_nodes = pages.max(0) as u64 >> (super::XA_CHUNK_SHIFT - 3);
        mc.nr_shadow_nodes.saturating_sub(max_nodes)
    }

    /// shadow_lru_isolate() for up to `nr` of `m`'s oldest shadow nodes: their shadow
    /// entries are dropped, the node is freed (a page-cache node's slab object uncharged,
    /// and its ancestors left empty with it) and counted in WORKINGSET_NODERECLAIM. The
    /// root's list also holds the swap cache's leaves (swap_state.rs). Returns how many
    /// list nodes were freed and how many slab pages their frees released (slub.rs). The
    /// shrinker runs on `cpu`, whose charge stock takes the freed objects' pages.
    pub fn scan_shadow_nodes(&mut self, cpu: u32, m: MemcgId, nr: u64) -> (u64, u64) {
        let (mut freed, mut slab_pages) = (0, 0);
        let mut scanned = 0;
        while scanned < nr {
            let Some((file, leaf, gen)) = self.memcgs[m as usize].shadow_nodes.pop_front() else {
                break;
            };
            if file == SWAP_CACHE {
                if !self
                    .swap
                    .as_ref()
                    .is_some_and(|s| s.leaf_shadow_only(leaf, gen))
                {
                    continue; // stale
                }
                self.swap_cache_drop_shadows(leaf);
            } else {
                if !self.files[file as usize].leaf_shadow_only(leaf, gen) {
                    continue; // stale: the leaf holds a page again, or left and rejoined
                }
                slab_pages += self.page_cache_drop_shadows(cpu, file, leaf, m);
            }
            scanned += 1;
            let lv = self.lruvec_of(m, 0) as usize;
            self.lruvecs[lv].mod_state(NodeStat::WorkingsetNodereclaim, 1);
            freed += 1;
        }
        (freed, slab_pages)
    }

    /// shadow_lru_isolate() of the page-cache leaf `leaf` of `file` on `m`'s list: its
    /// shadows are dropped and the node freed with any ancestor it leaves empty
    /// (xa_delete_node), each object uncharged. Returns the slab pages freed.
    fn page_cache_drop_shadows(&mut self, cpu: u32, file: u32, leaf: u32, m: MemcgId) -> u64 {
        let first = leaf << super::XA_CHUNK_SHIFT;
        let end = (first + (1 << super::XA_CHUNK_SHIFT))
            .min(self.files[file as usize].cache.len() as u32);
        for i in first..end {
            if self.files[file as usize].cache[i as usize] != 0 {
                self.page_cache_store(file, i, 0);
            }
        }
        let Mm {
            files,
            radix_tree_node_cachep,
            ..
        } = self;
        let (nodes, pages) = files[file as usize].xa_delete_leaf(leaf, radix_tree_node_cachep);
        for _ in 0..nodes {
            self.mod_objcg_state(m, -(super::memcontrol::XA_NODE_SIZE as i64));
        }
        self.memcg_kmem_uncharge(
            cpu,
            m,
            nodes * super::memcontrol::XA_NODE_SIZE,
            super::memcontrol::KmemKind::SlabReclaimable,
        );
        pages
    }

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
    /// `target` (the root for global reclaim). Ages the target's lruvec. With MGLRU:
    /// lru_gen_eviction's token, on the folio's own lruvec, with no aging.
    pub fn workingset_eviction(&mut self, pfn: Pfn, target: MemcgId) -> u64 {
        if self.lru_gen_enabled() {
            let lv = self.folio_lruvec(pfn);
            let Mm {
                pages,
                lruvecs,
                rules,
                ..
            } = self;
            return super::lru_gen::lru_gen_eviction(pages, &mut lruvecs[lv as usize], pfn, rules);
        }
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
        self.flush_stats_ratelimited(memcg, now);
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

    /// lru_gen_refault() (workingset_refault with MGLRU): nothing unless the shadow's
    /// lruvec (the root's when its memcg is gone) is the refaulting folio's; then
    /// WORKINGSET_REFAULT, and for a folio evicted less than MAX_NR_GENS generations ago
    /// the refaulted counter of its tier, WORKINGSET_ACTIVATE in a page fault (where
    /// folio_add_lru activates it), and PG_workingset with WORKINGSET_RESTORE, or else its
    /// refs restored.
    pub fn lru_gen_refault(&mut self, pfn: Pfn, shadow: u64, in_fault: bool) {
        let (memcg, node, _, _) = unpack_shadow(shadow);
        let memcg = if (memcg as usize) < self.memcgs.len() {
            memcg
        } else {
            0
        };
        let lv = self.lruvec_of(memcg, node.min(self.nodes.len() as u32 - 1));
        let same = lv == self.folio_lruvec(pfn);
        let file = self.pages[pfn as usize].is_file_lru();
        let lrugen = &self.lruvecs[lv as usize].lrugen;
        let seqs = (lrugen.max_seq, lrugen.min_seq[file as usize]);
        let r = super::lru_gen::lru_gen_refault_decide(shadow, same, seqs, in_fault, &self.rules);
        let Mm { pages, lruvecs, .. } = self;
        super::lru_gen::lru_gen_refault_apply(pages, &mut lruvecs[lv as usize].lrugen, pfn, &r);
        for item in r.items(file) {
            self.mod_lruvec_state(lv, item, 1);
        }
    }

    /// workingset_activation(): a folio activated by folio_mark_accessed ages its lruvec.
    pub fn workingset_activation(&mut self, pfn: Pfn) {
        let lv = self.folio_lruvec(pfn);
        self.workingset_age_nonresident(lv, 1);
    }
}

impl Sim {
    /// shrink_slab() for `m` at `priority`, which here runs the one shrinker modeled, the
    /// shadow nodes' (do_shrink_slab with seeks = 0: half the excess per call, plus
    /// deferred work scaled down by the priority, capped at twice the excess, scanned in
    /// batches of SHRINK_BATCH; what is left is deferred to the next call). Returns the
    /// slab pages the freed nodes released, which the kernel's slab allocator counts in
    /// current->reclaim_state (the caller adds them to its sc.reclaim_state). Fires
    /// mm_shrink_slab_start and mm_shrink_slab_end where do_shrink_slab does, with `node`
    /// (the reclaim's) as their nid.
    pub fn shrink_slab(&self, m: MemcgId, node: u32, priority: i32) -> u64 {
        use super::trace_vmscan::Tracepoint;
        let mut mm = self.mm.borrow_mut();
        let freeable = mm.count_shadow_nodes(m, self.e.now());
        if freeable == 0 {
            return 0;
        }
        let nr = std::mem::take(&mut mm.memcgs[m as usize].shadow_deferred);
        let delta = freeable / 2;
        let mut total_scan = ((nr >> priority.clamp(0, 63)) + delta).min(2 * freeable);
        if let Some(t) = mm.trace_hist.as_mut() {
            let vals = [nr, freeable, delta, total_scan];
            t.hit(
                Tracepoint::ShrinkSlabStart,
                [node.into(), priority.into()],
                vals,
            );
        }
        let (mut scanned, mut freed) = (0, 0);
        let mut slab_pages = 0;
        while total_scan >= SHRINK_BATCH || total_scan >= freeable {
            let n = total_scan.min(SHRINK_BATCH);
            let (nodes, pages) = mm.scan_shadow_nodes(self.e.cpu(), m, n);
            self.e.charge(nodes * self.c.list_op);
            freed += nodes;
            slab_pages += pages;
            total_scan -= n;
            scanned += n;
        }
        let next_deferred = (nr + delta).saturating_sub(scanned).min(2 * freeable);
        mm.memcgs[m as usize].shadow_deferred = next_deferred;
        if let Some(t) = mm.trace_hist.as_mut() {
            let vals = [nr, next_deferred, freed, total_scan];
            t.hit(Tracepoint::ShrinkSlabEnd, [node.into(), 0], vals);
        }
        slab_pages
    }

    /// workingset_refault(): a folio is being faulted or read back in; `shadow` is what its
    /// slot held. Counts the refault on the folio's lruvec; if the distance says the folio
    /// would have been resident with a smaller active list, activates it, and if it was
    /// workingset before eviction, records it as a restore and charges the IO cost
    /// (lru_note_cost_refault, which takes the lruvec's lru_lock and its ancestors').
    /// Called before the folio is added to the LRU.
    pub async fn workingset_refault(&self, pfn: Pfn, shadow: u64, in_fault: bool) {
        let restore = {
            let mut mm = self.mm.borrow_mut();
            if mm.lru_gen_enabled() {
                mm.lru_gen_refault(pfn, shadow, in_fault);
                return;
            }
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
            mm.mod_lruvec_state(lv, rf, 1);
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
