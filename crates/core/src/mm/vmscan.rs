//! Page reclaim, classic LRU: kswapd, direct reclaim, memcg reclaim, and the shrink_* paths.
//!
//! Models mm/vmscan.c (v6.18 structure, with the 7.x lock re-acquisition for the cost
//! update noted in swap.rs). Call graph, as in the kernel:
//!
//! ```text
//!  kswapd -> balance_pgdat ----------------------------\
//!  __alloc_pages_slowpath -> try_to_free_pages ---------+-> do_try_to_free_pages (direct)
//!  try_charge_memcg -> try_to_free_mem_cgroup_pages ---/      |
//!                                                   shrink_zones -> shrink_node
//!     shrink_node: prepare_scan_control, shrink_node_memcgs (mem_cgroup_iter + protection)
//!       shrink_lruvec: get_scan_count, then SWAP_CLUSTER_MAX chunks of
//!         shrink_active_list (deactivate)  /  shrink_inactive_list:
//!            isolate_lru_folios -> shrink_folio_list -> move_folios_to_lru -> lru_note_cost
//! ```
//! Swap writes to a block device leave shrink_folio_list under writeback; shrink_lruvec
//! plugs them (blk_start_plug) until its loop ends, and cgroup v1 limit reclaim that meets
//! one again waits for it (shrink_folio_list's case 3). MGLRU's reclaim is lru_gen/eviction.rs.
//! Elsewhere, each in the file of its kernel file: the rmap walks reclaim calls
//! (folio_referenced, try_to_unmap) are rmap.rs, the plug engine/blk.rs, the end of a swap
//! write's writeback filemap.rs.
//! Simplified: one zone per node (no zone skipping or lowmem reserves), no slab shrinkers,
//! no compaction or high-order reclaim, no dirty file folios (file pages are written
//! before the run and stay clean), no writeback throttling (PGDAT_WRITEBACK, case 1 of the
//! writeback handling, reclaim_throttle on WRITEBACK/CONGESTED/NOPROGRESS are not modeled;
//! the ISOLATED throttle is), no vmpressure, no demotion, no VM_LOCKED mappings. VM_EXEC
//! file folios (a workload's `text`) get the kernel's protection: activated on their
//! first young PTE, and rotated on the active list while referenced.

use super::lru_gen::FolioRef;
use super::mm_inline::{lruvec_add_folio_untracked, lruvec_del_folio_untracked};
use super::mm_types::*;
use super::mmzone::*;
use super::trace_vmscan::Tracepoint;
use super::vmstat::{NodeStat, VmEvent};
use super::{
    LruvecId, MemcgId, Mm, Pfn, BLK_MAX_REQUEST_COUNT, DEF_PRIORITY, NIL, SWAP_CLUSTER_MAX,
};
use crate::engine::Site;
use crate::sim::Sim;

/// may_deactivate bits.
pub const DEACTIVATE_ANON: u8 = 1;
pub const DEACTIVATE_FILE: u8 = 2;

/// reclaim_options of try_to_free_mem_cgroup_pages (include/linux/swap.h).
pub const MEMCG_RECLAIM_MAY_SWAP: u32 = 1 << 1;
pub const MEMCG_RECLAIM_PROACTIVE: u32 = 1 << 2;

/// Per-call statistics of shrink_folio_list (struct reclaim_stat) accumulated in sc->nr.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReclaimStat {
    pub nr_reclaimed: u64,
    pub nr_pageout: u64,
    pub nr_writeback: u64,
    pub nr_activate: [u64; 2],
    pub nr_ref_keep: u64,
    pub nr_unmap_fail: u64,
}

/// struct scan_control: one reclaim invocation's parameters and progress.
#[derive(Debug, Clone)]
pub struct ScanControl {
    /// How many pages shrink_list() should reclaim.
    pub nr_to_reclaim: u64,
    /// The memcg whose limit is being reclaimed; None = global (node) reclaim.
    pub target: Option<MemcgId>,
    /// Snapshot of the target lruvec's anon_cost / file_cost (prepare_scan_control).
    pub anon_cost: u64,
    pub file_cost: u64,
    /// Can active folios be deactivated as part of reclaim? (DEACTIVATE_ANON | _FILE)
    pub may_deactivate: u8,
    pub force_deactivate: bool,
    pub skipped_deactivate: bool,
    /// Writepage batching in laptop mode; otherwise always allowed here.
    pub may_writepage: bool,
    /// Can mapped folios be reclaimed?
    pub may_unmap: bool,
    /// Can folios be swapped as part of reclaim?
    pub may_swap: bool,
    /// Proactive reclaim (memory.reclaim); swappiness override.
    pub proactive: bool,
    pub swappiness: Option<u32>,
    /// Cgroups below memory.low are reclaimed only when this is set (second pass).
    pub memcg_low_reclaim: bool,
    pub memcg_low_skipped: bool,
    /// Walk every memcg instead of a shared, partial walk.
    pub memcg_full_walk: bool,
    /// current->reclaim_state->mm_walk is set (MGLRU): kswapd's and proactive reclaim's
    /// from the start of lru_gen_shrink_node/lru_gen_shrink_lruvec (set_mm_walk), any
    /// reclaimer's once try_to_inc_max_seq has walked page tables, until the end of that
    /// function (clear_mm_walk). With it, look-around promotes folios in place.
    pub mm_walk: bool,
    /// Reclaim only file (plenty of inactive file, no refaults).
    pub cache_trim_mode: bool,
    pub cache_trim_mode_failed: bool,
    pub no_cache_trim_mode: bool,
    /// File is too small to sustain reclaim: scan anon.
    pub file_is_tiny: bool,
    /// Scan (total_size >> priority) pages at once.
    pub priority: i32,
    /// Is this kswapd?
    pub kswapd: bool,
    /// 6.1's MGLRU (rule mglru_v61_kswapd_ages_memcgs): cleared when an lruvec gave up
    /// MIN_LRU_BATCH without needing aging, so kswapd's next lru_gen_age_node skips its
    /// aging pass once.
    pub memcgs_need_aging: bool,
    /// 6.1's MGLRU: nr_reclaimed when kswapd's lru_gen_age_node last ran (its
    /// should_abort_scan measures progress from there).
    pub last_reclaimed: u64,
    /// Incremented by the number of inactive pages that were scanned.
    pub nr_scanned: u64,
    /// Number of pages freed so far during a call to shrink_zones().
    pub nr_reclaimed: u64,
    /// Pages taken off the LRUs by isolate in this shrink_node pass (sc->nr.taken).
    pub nr_taken: u64,
    pub nr_writeback: u64,
    /// sc->reclaim_state.reclaimed (reclaimed_slab in 6.1), where current->reclaim_state
    /// points: pages this reclaimer freed outside the LRUs (discarded slabs, slub.rs),
    /// until flush_reclaim_state adds them to nr_reclaimed.
    pub reclaim_state: u64,
    /// current->plug: while Some, swap writes (their folios already under writeback) are
    /// held here instead of reaching the device, until blk_finish_plug, a sleep, or
    /// BLK_MAX_REQUEST_COUNT of them (blk_start_plug in shrink_lruvec).
    pub plug: Option<Vec<Pfn>>,
}

impl ScanControl {
    pub fn new(nr_to_reclaim: u64, target: Option<MemcgId>, kswapd: bool) -> Self {
        ScanControl {
            nr_to_reclaim,
            target,
            anon_cost: 0,
            file_cost: 0,
            may_deactivate: 0,
            force_deactivate: false,
            skipped_deactivate: false,
            may_writepage: true,
            may_unmap: true,
            may_swap: true,
            proactive: false,
            swappiness: None,
            memcg_low_reclaim: false,
            memcg_low_skipped: false,
            memcg_full_walk: false,
            mm_walk: false,
            memcgs_need_aging: false,
            last_reclaimed: 0,
            cache_trim_mode: false,
            cache_trim_mode_failed: false,
            no_cache_trim_mode: false,
            file_is_tiny: false,
            priority: DEF_PRIORITY,
            kswapd,
            nr_scanned: 0,
            nr_reclaimed: 0,
            nr_taken: 0,
            nr_writeback: 0,
            reclaim_state: 0,
            plug: None,
        }
    }

    /// cgroup_reclaim(): reclaim on behalf of a memcg limit.
    #[inline]
    pub fn cgroup_reclaim(&self) -> bool {
        self.target.is_some()
    }

    /// root_reclaim(): global reclaim, or reclaim on behalf of the root memcg
    /// (memory.reclaim on the root).
    #[inline]
    pub fn root_reclaim(&self) -> bool {
        matches!(self.target, None | Some(0))
    }

    /// The memcg a walk starts from (root for global reclaim).
    #[inline]
    pub fn target_memcg(&self) -> MemcgId {
        self.target.unwrap_or(0)
    }

    /// reclaimer_offset(): whose pgscan/pgsteal items count this reclaim: kswapd's,
    /// proactive reclaim's (memory.reclaim: the PROACTIVE items, rule pgscan_proactive;
    /// before it, 6.1 and 6.12, memory.reclaim counts as direct reclaim) or else direct
    /// reclaim's. Simplified: no khugepaged.
    #[inline]
    pub fn reclaimer_offset(&self, rules: &crate::versions::Rules) -> Reclaimer {
        if self.kswapd {
            Reclaimer::Kswapd
        } else if self.proactive && rules.pgscan_proactive {
            Reclaimer::Proactive
        } else {
            Reclaimer::Direct
        }
    }
}

/// The reclaimer a pgscan/pgsteal count goes to (the kernel's offset from the KSWAPD items).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reclaimer {
    Kswapd,
    Direct,
    Proactive,
}

impl Reclaimer {
    /// PGSCAN_KSWAPD + reclaimer_offset().
    pub fn pgscan(self) -> VmEvent {
        match self {
            Reclaimer::Kswapd => VmEvent::PgscanKswapd,
            Reclaimer::Direct => VmEvent::PgscanDirect,
            Reclaimer::Proactive => VmEvent::PgscanProactive,
        }
    }

    /// PGSTEAL_KSWAPD + reclaimer_offset().
    pub fn pgsteal(self) -> VmEvent {
        match self {
            Reclaimer::Kswapd => VmEvent::PgstealKswapd,
            Reclaimer::Direct => VmEvent::PgstealDirect,
            Reclaimer::Proactive => VmEvent::PgstealProactive,
        }
    }
}

/// reclaim_throttle()'s timeouts [ns]: HZ/50 for VMSCAN_THROTTLE_ISOLATED, and kswapd's
/// short nap of HZ/10 (kswapd_try_to_sleep).
const THROTTLE_ISOLATED_TIMEOUT: u64 = 20 * super::memcontrol::JIFFY_NS;
const KSWAPD_NAP: u64 = 100 * super::memcontrol::JIFFY_NS;

/// get_scan_count()'s choice of balance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanBalance {
    Equal,
    Fract,
    File,
    Anon,
}

impl Mm {
    /// can_reclaim_anon_pages(): is there swap space the memcg may use?
    pub fn can_reclaim_anon_pages(&self, memcg: MemcgId) -> bool {
        self.mem_cgroup_get_nr_swap_pages(memcg) > 0
    }

    /// writeback_throttling_sane(): can reclaim rely on the dirty throttling of the
    /// writers? Always for global reclaim and on cgroup v2; not for cgroup v1 limit
    /// reclaim, which therefore skips reclaim_throttle(VMSCAN_THROTTLE_ISOLATED).
    pub fn writeback_throttling_sane(&self, sc: &ScanControl) -> bool {
        !sc.cgroup_reclaim() || self.memory_cgrp_on_dfl
    }

    /// The test of shrink_folio_list()'s Case 3 for a folio under writeback: limit reclaim
    /// that cannot rely on dirty throttling (cgroup v1) waits for a folio it already marked
    /// PG_reclaim, where Case 2 would activate it. Simplified: may_enter_fs() always holds
    /// (a swap device without SWP_FS_OPS, a fault's GFP_HIGHUSER_MOVABLE), and Case 1
    /// (kswapd meeting PG_reclaim folios on a PGDAT_WRITEBACK node) is not modeled.
    pub fn folio_wait_writeback_needed(&self, pfn: Pfn, sc: &ScanControl) -> bool {
        let p = self.pages[pfn as usize];
        p.test(PG_OWNED)
            && p.test(PG_WRITEBACK)
            && p.test(PG_RECLAIM)
            && !self.writeback_throttling_sane(sc)
    }

    /// folio_start_writeback() of a swap write from pageout(), with the PG_reclaim pageout
    /// sets first: the folio is under writeback (NR_WRITEBACK) until folio_end_writeback.
    pub fn folio_start_writeback(&mut self, pfn: Pfn) {
        self.pages[pfn as usize].set(PG_WRITEBACK | PG_RECLAIM);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrWriteback, 1);
    }

    /// too_many_isolated(): more folios of this type isolated on the node than an eighth
    /// of its inactive list (callers with __GFP_IO|__GFP_FS, as every caller here).
    /// kswapd and cgroup v1 limit reclaim are never throttled. Finding the count below
    /// the limit wakes the reclaimers throttled on it (wake_throttle_isolated).
    pub fn too_many_isolated(&self, node: u32, file: bool, sc: &ScanControl) -> bool {
        if sc.kswapd || !self.writeback_throttling_sane(sc) {
            return false;
        }
        let (inactive, isolated) = if file {
            (
                self.node_page_state(node, NodeStat::NrInactiveFile),
                self.node_page_state(node, NodeStat::NrIsolatedFile),
            )
        } else {
            (
                self.node_page_state(node, NodeStat::NrInactiveAnon),
                self.node_page_state(node, NodeStat::NrIsolatedAnon),
            )
        };
        isolated > inactive >> 3
    }

    /// can_age_anon_pages(): is aging the anon lists worth it? Whenever swap exists
    /// (total_swap_pages, not free slots: a full swap device still gets its anon aged, so
    /// that slots freed later find cold folios at the tail). No demotion is modeled.
    pub fn can_age_anon_pages(&self) -> bool {
        self.swap.as_ref().is_some_and(|s| s.nr_slots() > 0)
    }

    /// mem_cgroup_swappiness(): the memcg's (v1 knob, inherited) or vm.swappiness.
    pub fn mem_cgroup_swappiness(&self, memcg: MemcgId) -> u32 {
        self.memcgs[memcg as usize].swappiness
    }

    /// inactive_is_low(): is the inactive list too small relative to the active list?
    ///
    /// Reads lruvec_page_state (hierarchical, last flushed). The target ratio is
    /// int_sqrt(10 * size_in_GiB), so 1 GiB -> 3:1, 10 GiB -> 10:1, 100 GiB -> 31:1,
    /// and 1 for less than a GiB.
    pub fn inactive_is_low(&self, lv: LruvecId, inactive_lru: usize) -> bool {
        let l = &self.lruvecs[lv as usize];
        let inactive = l.page_state(super::vmstat::LRU_STAT[inactive_lru]);
        let active = l.page_state(super::vmstat::LRU_STAT[inactive_lru + 1]);
        inactive_is_low_ratio(inactive, active)
    }

    /// get_scan_count(): how many folios of each evictable list to scan at this priority.
    ///
    /// The first matching case picks the balance: no swap (or !may_swap) -> file only;
    /// cgroup reclaim with swappiness 0 -> file only; priority 0 -> equal pressure;
    /// file_is_tiny -> anon; cache_trim_mode -> file; otherwise a fraction from the
    /// recorded reclaim costs weighted by swappiness. memory.low/min protection scales each
    /// list's size down by the protected share of the cgroup's usage.
    pub fn get_scan_count(&self, lv: LruvecId, sc: &mut ScanControl) -> ([u64; 4], ScanBalance) {
        let memcg = self.lruvecs[lv as usize].memcg;
        let swappiness = sc
            .swappiness
            .unwrap_or_else(|| self.mem_cgroup_swappiness(memcg)) as u64;
        let mut fraction = [0u64; 2];
        let mut denominator = 0u64;
        let balance = if !sc.may_swap || !self.can_reclaim_anon_pages(memcg) {
            // If we have no swap space, do not bother scanning anon folios.
            ScanBalance::File
        } else if sc.cgroup_reclaim() && swappiness == 0 {
            // Global reclaim ignores swappiness 0 so that OOM is not declared with swap left;
            // a memcg asking for no swap gets file only.
            ScanBalance::File
        } else if swappiness == super::lru_gen::SWAPPINESS_ANON_ONLY as u64 {
            // Proactive reclaim with "swappiness=max": anon only.
            ScanBalance::Anon
        } else if sc.priority == 0 && swappiness != 0 {
            // Near OOM: scan everything equally to make sure nothing is missed.
            ScanBalance::Equal
        } else if sc.file_is_tiny {
            // File LRU too small to sustain reclaim: force anon.
            ScanBalance::Anon
        } else if sc.cache_trim_mode {
            // Plenty of inactive file and no refaults: trim the cache only.
            ScanBalance::File
        } else {
            // Balance by cost: each list's share of the total within [1/3, 2/3], pushed
            // further by swappiness.
            let mut total = sc.anon_cost + sc.file_cost;
            let anon_cost = total + sc.anon_cost;
            let file_cost = total + sc.file_cost;
            total = anon_cost + file_cost;
            let ap = swappiness * (total + 1) / (anon_cost + 1);
            let fp = (200 - swappiness) * (total + 1) / (file_cost + 1);
            fraction = [ap, fp];
            denominator = ap + fp;
            ScanBalance::Fract
        };
        let mut nr = [0u64; 4];
        for lru in EVICTABLE_LRUS {
            let file = is_file_lru(lru);
            let lruvec_size = self.lruvecs[lv as usize].lru_size(lru);
            // Scan pressure falls with the protected share of the usage; a floor of
            // SWAP_CLUSTER_MAX keeps reclaim moving when just above the protection.
            let mut scan = self.apply_proportional_protection(lv, sc, lruvec_size);
            scan >>= sc.priority;
            scan = match balance {
                ScanBalance::Equal => scan,
                ScanBalance::Fract => {
                    (scan as u128 * fraction[file as usize] as u128 / denominator.max(1) as u128)
                        as u64
                }
                ScanBalance::File | ScanBalance::Anon => {
                    if (balance == ScanBalance::File) != file {
                        0
                    } else {
                        scan
                    }
                }
            };
            nr[lru] = scan;
        }
        (nr, balance)
    }

    /// isolate_lru_folios(): take up to `nr_to_scan` folios off the tail of `lru` into
    /// `dst` (oldest first). Folios whose PG_lru cannot be cleared (a per-CPU batch holds
    /// it, rule lru_batch_clears_pg_lru) or that are dying rotate to the head. Returns
    /// (nr_taken, nr_scanned), and fires mm_vmscan_lru_isolate. Caller holds lru_lock.
    pub fn isolate_lru_folios(
        &mut self,
        nr_to_scan: u64,
        lv: LruvecId,
        dst: &mut Vec<Pfn>,
        lru: usize,
    ) -> (u64, u64) {
        let mut scan = 0;
        let mut taken = 0;
        debug_assert!(lru < LRU_UNEVICTABLE, "only evictable lists are scanned");
        while scan < nr_to_scan {
            let pfn = self.lruvecs[lv as usize].lists[lru].tail;
            if pfn == NIL {
                break;
            }
            scan += 1;
            let Mm {
                pages,
                lruvecs,
                rules,
                ..
            } = self;
            let l = &mut lruvecs[lv as usize];
            if l.prefetch_cursor[lru] == pfn {
                // Reclaim caught up with the read-ahead: it restarts from the new tail.
                l.prefetch_cursor[lru] = NIL;
            }
            lruvec_del_folio_untracked(pages, l, pfn);
            let p = &pages[pfn as usize];
            if p.test(PG_DYING) || !super::swap::folio_test_lru(p, rules) {
                // folio_try_get failed (its refcount already reached zero) or
                // test_clear_lru did (a batch holds PG_lru, rule lru_batch_clears_pg_lru):
                // leave it.
                lruvec_add_folio_untracked(pages, l, pfn);
                continue;
            }
            pages[pfn as usize].clear(PG_LRU);
            pages[pfn as usize].set(PG_ISOLATED);
            dst.push(pfn);
            taken += 1;
        }
        let l = &mut self.lruvecs[lv as usize];
        l.prefetch_ahead[lru] = l.prefetch_ahead[lru].saturating_sub(scan as u32);
        // trace_mm_vmscan_lru_isolate(reclaim_idx, order, nr_to_scan, total_scan, skipped,
        // nr_taken, lru): nothing is skipped for its zone here (one zone per node).
        if let Some(t) = self.trace_hist.as_mut() {
            let vals = [nr_to_scan, scan, 0, taken];
            t.hit(Tracepoint::LruIsolate, [lru as i64, 0], vals);
        }
        (taken, scan)
    }

    /// Advance the read-ahead of reclaim along the evictable lists of `lv` by one folio
    /// each, prefetching that folio and its list links. A performance hint, no behavior:
    /// isolate_lru_folios walks a list from its tail one dependent load at a time (the
    /// inactive lists for shrink_inactive_list, the active ones for shrink_active_list),
    /// and the folios there were last touched long ago; stepping ahead of it by one folio
    /// at each allocation, between which there is other work, brings them in before
    /// reclaim asks. One step per allocation measured best: steps in a row stall on the
    /// load the step before prefetched.
    pub fn lru_prefetch_step(&mut self, lv: LruvecId) {
        if self.lruvecs[lv as usize].lrugen.enabled {
            return; // the classic lists are empty
        }
        for lru in EVICTABLE_LRUS {
            let l = &self.lruvecs[lv as usize];
            let ahead = l.prefetch_ahead[lru];
            if ahead >= super::mmzone::LRU_PREFETCH_AHEAD || l.nr[lru] == 0 {
                continue;
            }
            let c = l.prefetch_cursor[lru];
            // Restart from the tail when reclaim took the cursor's folio or it moved.
            let valid = c != NIL && {
                let p = &self.pages[c as usize];
                p.test(PG_LRU) && p.lru_list() == lru && self.folio_lruvec(c) == lv
            };
            let mut next = if valid {
                self.pages.links[c as usize].prev
            } else {
                l.lists[lru].tail
            };
            if next == NIL {
                // Walked to the head: start over from the tail.
                next = l.lists[lru].tail;
            }
            super::prefetch(&self.pages[next as usize]);
            super::prefetch(&self.pages.links[next as usize]);
            let l = &mut self.lruvecs[lv as usize];
            l.prefetch_cursor[lru] = next;
            l.prefetch_ahead[lru] = if valid { ahead + 1 } else { 1 };
        }
    }

    /// move_folios_to_lru(): put isolated folios back at the head of the list matching
    /// their flags; active ones age the workingset clock. Folios whose last reference went
    /// while isolated are appended to `dead` for freeing. Caller holds lru_lock.
    pub fn move_folios_to_lru(&mut self, lv: LruvecId, list: &[Pfn], dead: &mut Vec<Pfn>) -> u64 {
        let mut moved = 0;
        for &pfn in list {
            // Drop the isolation reference; a folio nobody else holds is freed.
            self.pages[pfn as usize].clear(PG_ISOLATED);
            if !self.pages[pfn as usize].test(PG_HELD) {
                dead.push(pfn);
                continue;
            }
            debug_assert_eq!(self.folio_lruvec(pfn), lv);
            self.lruvec_add_folio(pfn);
            moved += 1;
            // MGLRU clears PG_active as it places the folio: no aging there.
            if self.pages[pfn as usize].test(PG_ACTIVE) {
                self.workingset_age_nonresident(lv, 1);
            }
        }
        moved
    }

    /// snapshot_refaults(): remember WORKINGSET_ACTIVATE at the end of reclaim so the next
    /// prepare_scan_control can tell whether refaults happened since.
    pub fn snapshot_refaults(&mut self, target: MemcgId, node: u32) {
        if self.lru_gen_enabled() {
            return;
        }
        let lv = self.lruvec_of(target, node) as usize;
        let l = &mut self.lruvecs[lv];
        l.refaults[0] = l.page_state(NodeStat::WorkingsetActivateAnon);
        l.refaults[1] = l.page_state(NodeStat::WorkingsetActivateFile);
    }

    /// pgdat_balanced(): is the node's zone above its HIGH watermark?
    pub fn pgdat_balanced(&self, node: u32) -> bool {
        self.nodes[node as usize].watermark_ok(WMARK_HIGH)
    }

    /// The node's NR_ISOLATED_ANON/FILE (__mod_node_page_state in isolate_lru_folios and at
    /// the putback), kept on the lruvec: a node's item, no memcg statistics update.
    pub(crate) fn count_isolated(&mut self, lv: LruvecId, file: bool, delta: i64) {
        let item = if file {
            NodeStat::NrIsolatedFile
        } else {
            NodeStat::NrIsolatedAnon
        };
        self.lruvecs[lv as usize].mod_node_state(item, delta);
    }
}

impl Mm {
    /// apply_proportional_protection(): shared by get_scan_count and, since v6.16, MGLRU's
    /// get_nr_to_scan (lru_gen/eviction.rs): `scan` pages of lruvec `lv` scaled down by the
    /// protected share of its memcg's usage (`protected_scan`), sc->memcg_low_skipped set
    /// when memory.low was what counted.
    #[inline]
    pub fn apply_proportional_protection(
        &self,
        lv: LruvecId,
        sc: &mut ScanControl,
        scan: u64,
    ) -> u64 {
        let memcg = self.lruvecs[lv as usize].memcg;
        let (min, low) = self.mem_cgroup_protection(sc.target_memcg(), memcg);
        let usage = self.memcgs[memcg as usize].usage;
        let (n, low_skipped) = protected_scan(scan, min, low, usage, sc.memcg_low_reclaim);
        sc.memcg_low_skipped |= low_skipped;
        n
    }
}

/// apply_proportional_protection()'s arithmetic: scale `scan` down by the protected share
/// of the memcg's usage. memory.low counts unless this is the pass that overrides it
/// (`memcg_low_reclaim`) or min is larger; then memory.min. At least SWAP_CLUSTER_MAX
/// stays. Returns the scaled count and whether memory.low was honoured
/// (sc->memcg_low_skipped = 1).
pub fn protected_scan(
    scan: u64,
    min: u64,
    low: u64,
    usage: u64,
    memcg_low_reclaim: bool,
) -> (u64, bool) {
    if min == 0 && low == 0 {
        return (scan, false);
    }
    let (protection, low_skipped) = if !memcg_low_reclaim && low > min {
        (low, true)
    } else {
        (min, false)
    };
    let usage = usage.max(protection);
    let cut = (scan as u128 * protection as u128 / (usage as u128 + 1)) as u64;
    ((scan - cut).max(SWAP_CLUSTER_MAX), low_skipped)
}

/// The inactive:active target of inactive_is_low() for the given list sizes [pages].
pub fn inactive_is_low_ratio(inactive: u64, active: u64) -> bool {
    let gb = (inactive + active) >> 18;
    let ratio = if gb > 0 { int_sqrt(10 * gb) } else { 1 };
    inactive * ratio < active
}

impl Sim {
    /// reclaim_throttle(pgdat, VMSCAN_THROTTLE_ISOLATED): sleep until a reclaimer finds
    /// isolation back under the limit, at most HZ/50.
    async fn reclaim_throttle_isolated(&self, node: u32) {
        let wq = self.mm.borrow().nodes[node as usize]
            .reclaim_wait_isolated
            .clone();
        self.wait_event_timeout(&wq, Some(THROTTLE_ISOLATED_TIMEOUT))
            .await;
    }

    /// wake_throttle_isolated(): wake the reclaimers throttled on isolation.
    fn wake_throttle_isolated(&self, node: u32) {
        let wq = self.mm.borrow().nodes[node as usize]
            .reclaim_wait_isolated
            .clone();
        if wq.active() {
            self.wake_up_all(&wq);
        }
    }

    /// mem_cgroup_uncharge_folios() and free_unref_folios() of the folios a reclaim pass
    /// freed, after it dropped lru_lock.
    pub(crate) fn free_unref_folios(&self, dead: Vec<Pfn>) {
        {
            let mut mm = self.mm.borrow_mut();
            for &pfn in &dead {
                mm.free_folio(pfn);
            }
            mm.put_pfn_vec(dead);
        }
        self.flush_stat_pending(false);
    }

    /// spin_lock_irq(&lruvec->lru_lock); list operations from here write cache lines
    /// as this CPU (lru_lines.rs).
    pub(crate) async fn lock_lruvec(&self, lv: LruvecId, site: Site) {
        let lock = self.mm.borrow().lruvecs[lv as usize].lock;
        self.e.lock(lock, site).await;
        self.mm.borrow_mut().lines.arm(self.e.cpu());
    }

    /// spin_unlock_irq(&lruvec->lru_lock), after the transfers of the lines the hold's
    /// list operations took from other CPUs (they lengthen the hold). Simplified: they are
    /// charged in one sum at the end of the hold, not at each list operation.
    pub(crate) fn unlock_lruvec(&self, lv: LruvecId) {
        let (lock, (sibling, local, remote)) = {
            let mut mm = self.mm.borrow_mut();
            (mm.lruvecs[lv as usize].lock, mm.lines.disarm())
        };
        self.e.charge(
            sibling * self.c.cacheline_transfer_smt
                + local * self.c.cacheline_transfer
                + remote * self.c.cacheline_transfer_remote,
        );
        self.flush_stat_pending(true);
        self.e.unlock(lock);
    }

    /// shrink_active_list(): move folios from the active list to the inactive list.
    ///
    /// Every isolated folio is deactivated, referenced or not (young bits are cleared by
    /// the rmap walk), except referenced executable file folios (a program's text), which
    /// go back to the active list and count as rotated (lru_note_cost). Deactivated folios
    /// get PG_workingset.
    async fn shrink_active_list(
        &self,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
        lru: usize,
    ) {
        let file = is_file_lru(lru);
        self.lru_add_drain().await;
        self.lock_lruvec(lv, Site::ShrinkActiveList).await;
        let mut hold = self.mm.borrow_mut().pfn_vec();
        let (taken, scanned) = {
            let mut mm = self.mm.borrow_mut();
            let r = mm.isolate_lru_folios(nr_to_scan, lv, &mut hold, lru);
            mm.count_isolated(lv, file, r.0 as i64);
            let memcg = mm.lruvecs[lv as usize].memcg;
            mm.count_reclaim_event(memcg, VmEvent::Pgrefill, r.1, !sc.cgroup_reclaim());
            r
        };
        self.e.charge(scanned * self.c.isolate_folio);
        self.unlock_lruvec(lv);
        // Nothing taken does not end it: as in the kernel, the putback below still takes
        // its lru_lock hold (before 7.x) and the tracepoint fires with zeros.
        let mut nr_rotated = 0;
        let mut l_active = self.mm.borrow_mut().pfn_vec();
        {
            // folio_referenced() clears the young bits. A program's text that was run
            // since the last look goes back to the active list (l_active); every other
            // folio is deactivated.
            let mut mm = self.mm.borrow_mut();
            for (i, &pfn) in hold.iter().enumerate() {
                if let Some(&next) = hold.get(i + super::RMAP_PREFETCH) {
                    mm.prefetch_rmap(next);
                }
                let young = mm.folio_referenced(pfn);
                self.e.charge(self.c.pte_referenced);
                if young > 0 && mm.folio_exec(pfn) {
                    nr_rotated += 1;
                    l_active.push(pfn);
                    continue;
                }
                let p = &mut mm.pages[pfn as usize];
                p.clear(PG_ACTIVE);
                p.set(PG_WORKINGSET);
            }
            if nr_rotated > 0 {
                // What is left to put back is l_inactive.
                hold.retain(|&pfn| !mm.pages[pfn as usize].test(PG_ACTIVE));
            }
        }
        // move_folios_to_lru() of l_active and l_inactive, then lru_note_cost(lruvec, file,
        // 0, nr_rotated): 6.1 records no rotations (none of its calls), 6.12 calls it only
        // for rotations.
        let note = PutbackNote {
            nr_io: 0,
            nr_rotated,
            always: false,
            putback_site: Site::ShrinkActiveList,
            cost_site: Site::ShrinkActiveList,
        };
        let priority = sc.priority;
        self.putback_and_note_cost(lv, file, &[&l_active, &hold], note, |mm, moved| {
            mm.count_isolated(lv, file, -(taken as i64));
            let memcg = mm.lruvecs[lv as usize].memcg;
            mm.count_event(VmEvent::Pgdeactivate, moved[1]);
            mm.count_memcg_event(memcg, VmEvent::Pgdeactivate, moved[1]);
            // trace_mm_vmscan_lru_shrink_active(nid, nr_taken, nr_activate, nr_deactivate,
            // nr_rotated, priority, file)
            let node = mm.lruvecs[lv as usize].node;
            if let Some(t) = mm.trace_hist.as_mut() {
                let vals = [taken, moved[0], moved[1], nr_rotated];
                t.hit(
                    Tracepoint::LruShrinkActive,
                    [node.into(), priority.into()],
                    vals,
                );
            }
        })
        .await;
        self.mm.borrow_mut().put_pfn_vec(hold);
        self.mm.borrow_mut().put_pfn_vec(l_active);
    }

    /// move_folios_to_lru() of the isolated folios in `lists`, then lru_note_cost of the
    /// pass, with the lru_lock holds each version takes for them:
    ///
    /// ```text
    ///   6.1, 6.12  [putback, every list] then lru_note_cost: [level 0] [level 1] ...
    ///              taken whatever the cost (`note.always`, else only for a cost above 0)
    ///   6.18       [putback, every list + level 0] [level 1] ...    lru_note_cost_unlock_irq
    ///              inside the putback hold; a cost of 0 ends the hold there
    ///   7.2        [putback, list 1] [putback, list 2] [level 0] [level 1] ...
    ///              move_folios_to_lru locks for itself, one hold per non-empty list; the
    ///              lruvec's lock is taken again for the cost (at `note.cost_site`), even at 0
    ///   seed 000   the putback holds of its version; the cost only counted
    /// ```
    /// `stats` counts the folios moved per list (under the putback hold in the kernel
    /// before 7.x, after it since; counters either way). Folios that died while isolated
    /// are freed after the putback.
    async fn putback_and_note_cost(
        &self,
        lv: LruvecId,
        file: bool,
        lists: &[&[Pfn]],
        note: PutbackNote,
        stats: impl FnOnce(&mut Mm, [u64; 2]),
    ) {
        let (in_hold, self_locking) = {
            let r = &self.mm.borrow().rules;
            (
                r.lru_note_cost_unlock_irq,
                r.move_folios_to_lru_self_locking,
            )
        };
        let putback_site = note.putback_site;
        let mut moved = [0u64; 2];
        let mut dead = self.mm.borrow_mut().pfn_vec();
        let mut held = false;
        for (i, list) in lists.iter().enumerate() {
            if self_locking && list.is_empty() {
                continue;
            }
            if !held {
                self.lock_lruvec(lv, putback_site).await;
                held = true;
            }
            moved[i] = self.mm.borrow_mut().move_folios_to_lru(lv, list, &mut dead);
            self.e.charge(list.len() as u64 * self.c.list_op);
            if self_locking {
                self.unlock_lruvec(lv);
                held = false;
            }
        }
        if !self_locking && !held {
            // Before 7.x the putback takes its hold even for nothing to put back.
            self.lock_lruvec(lv, putback_site).await;
            held = true;
        }
        stats(&mut self.mm.borrow_mut(), moved);
        let (nr_io, nr_rotated) = (note.nr_io, note.nr_rotated);
        if self.v.vmstat_scan_cost {
            if held {
                self.unlock_lruvec(lv);
            }
            self.count_reclaim_cost(lv, file, nr_io, nr_rotated);
        } else if self_locking {
            self.lock_lruvec(lv, note.cost_site).await;
            self.lru_note_cost_unlock_irq(lv, file, nr_io, nr_rotated)
                .await;
        } else if in_hold {
            self.lru_note_cost_unlock_irq(lv, file, nr_io, nr_rotated)
                .await;
        } else {
            self.unlock_lruvec(lv);
            if note.always || self.reclaim_cost(nr_io, nr_rotated) > 0 {
                self.lru_note_cost(lv, file, nr_io, nr_rotated, Site::LruNoteCost)
                    .await;
            }
        }
        self.free_unref_folios(dead);
    }

    /// shrink_inactive_list(): isolate a chunk of inactive folios, try to reclaim them,
    /// put the survivors back and record the cost. Returns the number reclaimed.
    async fn shrink_inactive_list(
        &self,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
        lru: usize,
    ) -> u64 {
        let file = is_file_lru(lru);
        // Direct reclaimers back off once when isolation outruns the inactive list.
        let node = self.mm.borrow().lruvecs[lv as usize].node;
        let mut stalled = false;
        loop {
            let (too_many, sane) = {
                let mm = self.mm.borrow();
                let sane = !sc.kswapd && mm.writeback_throttling_sane(sc);
                (mm.too_many_isolated(node, file, sc), sane)
            };
            if !too_many {
                if sane {
                    self.wake_throttle_isolated(node);
                }
                break;
            }
            if stalled {
                return 0;
            }
            stalled = true;
            self.blk_flush_plug(sc).await;
            self.reclaim_throttle_isolated(node).await;
            if self.current_killed() {
                // About to die and free its memory: report progress so the caller stops.
                return SWAP_CLUSTER_MAX;
            }
        }
        self.lru_add_drain().await;
        self.lock_lruvec(lv, Site::ShrinkInactiveList).await;
        let mut list = self.mm.borrow_mut().pfn_vec();
        let (taken, scanned) = {
            let mut mm = self.mm.borrow_mut();
            let r = mm.isolate_lru_folios(nr_to_scan, lv, &mut list, lru);
            mm.count_isolated(lv, file, r.0 as i64);
            let memcg = mm.lruvecs[lv as usize].memcg;
            let item = sc.reclaimer_offset(&mm.rules).pgscan();
            mm.count_reclaim_event(memcg, item, r.1, !sc.cgroup_reclaim());
            mm.count_event(
                if file {
                    VmEvent::PgscanFile
                } else {
                    VmEvent::PgscanAnon
                },
                r.1,
            );
            r
        };
        self.e.charge(scanned * self.c.isolate_folio);
        self.unlock_lruvec(lv);
        sc.nr_taken += taken;
        if taken == 0 {
            self.mm.borrow_mut().put_pfn_vec(list);
            return 0;
        }
        let stat = self.shrink_folio_list(&mut list, lv, sc).await;
        let note = PutbackNote {
            nr_io: stat.nr_pageout,
            nr_rotated: scanned - stat.nr_reclaimed,
            always: true,
            putback_site: Site::MoveFoliosToLru,
            cost_site: Site::ShrinkLruvec,
        };
        let item = sc.reclaimer_offset(&self.mm.borrow().rules).pgsteal();
        let cgroup_reclaim = sc.cgroup_reclaim();
        let priority = sc.priority;
        self.putback_and_note_cost(lv, file, &[&list], note, |mm, _| {
            mm.count_isolated(lv, file, -(taken as i64));
            let memcg = mm.lruvecs[lv as usize].memcg;
            // trace_mm_vmscan_lru_shrink_inactive(nid, nr_scanned, nr_reclaimed, stat,
            // priority, file): fired after the putback, not when nothing was taken.
            let node = mm.lruvecs[lv as usize].node;
            if let Some(t) = mm.trace_hist.as_mut() {
                let vals = [scanned, stat.nr_reclaimed, 0, 0];
                t.hit(
                    Tracepoint::LruShrinkInactive,
                    [node.into(), priority.into()],
                    vals,
                );
            }
            mm.count_reclaim_event(memcg, item, stat.nr_reclaimed, !cgroup_reclaim);
            mm.count_event(
                if file {
                    VmEvent::PgstealFile
                } else {
                    VmEvent::PgstealAnon
                },
                stat.nr_reclaimed,
            );
        })
        .await;
        self.mm.borrow_mut().put_pfn_vec(list);
        sc.nr_writeback += stat.nr_writeback;
        stat.nr_reclaimed
    }

    /// shrink_folio_list(): decide each isolated folio's fate, oldest first.
    ///
    /// Under writeback -> mark PG_reclaim and activate. Referenced (folio_check_references)
    /// -> activate or keep. Anon not in the swap cache -> allocate a slot (none left:
    /// activate). Mapped -> unmap (the PTE becomes a swap entry). Dirty -> pageout: on a
    /// synchronous device the write completes at once and the folio is freed in this pass;
    /// on a block device it stays under writeback and is kept. Clean and unmapped ->
    /// __remove_mapping leaves a shadow (workingset_eviction) and the folio is freed. A
    /// per-CPU batch's reference (a folio isolated while queued) makes pageout and
    /// __remove_mapping fail: kept.
    /// Reclaimed folios are removed from `list`; the rest go back to the LRU.
    pub(crate) async fn shrink_folio_list(
        &self,
        list: &mut Vec<Pfn>,
        lv: LruvecId,
        sc: &mut ScanControl,
    ) -> ReclaimStat {
        let mut stat = ReclaimStat::default();
        let mut keep = self.mm.borrow_mut().pfn_vec();
        let target = sc.target_memcg();
        let mut last_sync = 0;
        let mut ubc = super::rmap::TlbUbc::default();
        for (i, &pfn) in list.iter().enumerate() {
            // Other processes' PTEs are shared state: bound how far ahead we run.
            if self.e.sync_due(last_sync, crate::engine::SKEW_QUANTUM) {
                self.e.sync().await;
                last_sync = self.e.now();
            }
            self.e.charge(self.c.shrink_folio);
            let locked = {
                let mm = self.mm.borrow();
                if let Some(&next) = list.get(i + super::RMAP_PREFETCH) {
                    mm.prefetch_rmap(next);
                }
                mm.pages[pfn as usize].test(PG_LOCKED)
            };
            if locked {
                // folio_trylock() fails (its read is in flight): kept, and not counted in
                // nr_scanned, which the kernel counts after the trylock.
                keep.push(pfn);
                continue;
            }
            sc.nr_scanned += 1;
            let outcome = self
                .shrink_one_folio(pfn, sc, target, &mut stat, &mut ubc)
                .await;
            if outcome {
                stat.nr_reclaimed += 1;
            } else {
                keep.push(pfn);
            }
        }
        // Before the folios are freed, the deferred flush of their PTEs.
        self.try_to_unmap_flush(&mut ubc);
        let mut mm = self.mm.borrow_mut();
        let act = stat.nr_activate[0] + stat.nr_activate[1];
        mm.count_event(VmEvent::Pgactivate, act);
        let memcg = mm.lruvecs[lv as usize].memcg;
        mm.count_memcg_event(memcg, VmEvent::Pgactivate, act);
        mm.put_pfn_vec(std::mem::replace(list, keep));
        stat
    }

    /// shrink_folio_list's keep_locked for a folio folio_update_gen tried to promote (6.1,
    /// 6.12: MGLRU on, rule mglru_promote_second_sighting off): mapped, with PG_referenced.
    /// Checked before the writeback handling and the reference check, as the kernel does.
    fn lru_gen_tried_to_promote(&self, pfn: Pfn) -> bool {
        let mm = self.mm.borrow();
        mm.lru_gen_enabled()
            && !mm.rules.mglru_promote_second_sighting
            && mm.pages[pfn as usize].test(PG_REFERENCED)
            && mm.folio_mapped(pfn)
    }

    /// One folio of shrink_folio_list; true if it was freed.
    async fn shrink_one_folio(
        &self,
        pfn: Pfn,
        sc: &mut ScanControl,
        target: MemcgId,
        stat: &mut ReclaimStat,
        ubc: &mut super::rmap::TlbUbc,
    ) -> bool {
        enum Fate {
            Activate,
            Keep,
            /// Kept under writeback after sleeping this long for a device request.
            KeepThrottled(u64),
            /// Kept under writeback, its write held in the reclaimer's plug.
            KeepPlugged,
            Free,
        }
        // 6.1 and 6.12 under MGLRU (rule mglru_promote_second_sighting off): a mapped folio
        // a page-table walk or look-around found young while it was isolated
        // (folio_update_gen "tried to promote" it: PG_referenced) is kept, unlocked.
        if self.lru_gen_tried_to_promote(pfn) {
            return false;
        }
        // Case 3 of the writeback handling: cgroup v1 limit reclaim meets a folio whose
        // writeback it started (PG_reclaim from pageout) and waits for it, then goes on
        // with the same folio.
        while self.mm.borrow().folio_wait_writeback_needed(pfn, sc) {
            // io_schedule() submits the sleeper's plugged IO first.
            self.blk_flush_plug(sc).await;
            self.folio_wait_writeback(pfn).await;
        }
        let (early, mglru) = {
            let mut mm = self.mm.borrow_mut();
            let p = mm.pages[pfn as usize];
            let early = if !p.test(PG_OWNED) {
                // Freed by its owner while isolated: move_folios_to_lru frees it.
                Some(Fate::Keep)
            } else if p.test(PG_WRITEBACK) {
                // Case 2 of the writeback handling (global reclaim, cgroup v2, or the first
                // meeting): mark for immediate reclaim and move on.
                mm.pages[pfn as usize].set(PG_RECLAIM);
                stat.nr_writeback += 1;
                Some(Fate::Activate)
            } else {
                None
            };
            (early, mm.lru_gen_enabled())
        };
        // folio_check_references(), MGLRU: a young PTE gives a second chance or activation
        // (lru_gen_set_refs); no young PTE: reclaim, PG_referenced or not.
        let mglru_ref = if early.is_none() && mglru {
            Some(self.lru_gen_check_references(pfn, sc.mm_walk).await)
        } else {
            None
        };
        let fate = 'f: {
            if let Some(f) = early {
                break 'f f;
            }
            let mut mm = self.mm.borrow_mut();
            let p = mm.pages[pfn as usize];
            let file = p.is_file_lru();
            let reclaim_clean = if let Some(r) = mglru_ref {
                match r {
                    FolioRef::Activate => break 'f Fate::Activate,
                    FolioRef::Keep => {
                        stat.nr_ref_keep += 1;
                        break 'f Fate::Keep;
                    }
                    FolioRef::Reclaim => false,
                    FolioRef::ReclaimClean => true,
                }
            } else {
                // folio_check_references(), classic
                let referenced_ptes = mm.folio_referenced(pfn);
                self.e.charge(self.c.pte_referenced);
                let referenced_folio = mm.pages[pfn as usize].test_clear(PG_REFERENCED);
                if referenced_ptes > 0 {
                    mm.pages[pfn as usize].set(PG_REFERENCED);
                    // Mapped folios start with a young PTE from the fault: activate only on
                    // a second use (referenced before, or several PTEs), or at once for
                    // executable file folios (a program's text); else one more trip.
                    if referenced_folio || referenced_ptes > 1 || mm.folio_exec(pfn) {
                        break 'f Fate::Activate;
                    }
                    stat.nr_ref_keep += 1;
                    break 'f Fate::Keep;
                }
                referenced_folio && file
            };
            if !file && !p.test(PG_SWAPCACHE) {
                // add_to_swap() -> folio_alloc_swap(): a slot, charged to the memcg's
                // swap counter (memory.swap.max); no slot or no room -> activate.
                let memcg = mm.pages[pfn as usize].memcg;
                if !mm.mem_cgroup_try_charge_swap(memcg) {
                    break 'f Fate::Activate;
                }
                let slot = match mm.add_to_swap_cache(pfn, self.e.cpu()) {
                    Some(s) => s,
                    None => {
                        mm.mem_cgroup_uncharge_swap(memcg);
                        break 'f Fate::Activate;
                    }
                };
                self.e.charge(self.c.swap_cache_op);
                let lvf = mm.folio_lruvec(pfn) as usize;
                mm.lruvecs[lvf].mod_state(NodeStat::NrSwapcache, 1);
                // The swap cache is in NR_FILE_PAGES per node only (node_stat_mod_folio).
                mm.lruvecs[lvf].mod_node_state(NodeStat::NrFilePages, 1);
                let pg = &mut mm.pages[pfn as usize];
                pg.set(PG_SWAPCACHE | PG_DIRTY);
                pg.private = slot;
            }
            // Nothing below changes whether the folio is mapped until it is unmapped.
            let mapped = mm.folio_mapped(pfn);
            if !sc.may_unmap && mapped {
                break 'f Fate::Keep;
            }
            if file && mapped {
                // try_to_unmap() of a mapped file folio: every PTE mapping it goes; the
                // next access faults it back in from the page cache.
                self.try_to_unmap_file(&mut mm, pfn, ubc);
            } else if mapped {
                self.try_to_unmap_anon(&mut mm, pfn, ubc);
            }
            if mm.pages[pfn as usize].test(PG_DIRTY) {
                if file {
                    // Dirty file folios are left to the flushers (none are modeled).
                    mm.pages[pfn as usize].set(PG_RECLAIM);
                    break 'f Fate::Activate;
                }
                if reclaim_clean || !sc.may_writepage {
                    break 'f Fate::Keep;
                }
                // No CPU may write the folio through a stale TLB entry while it is written.
                self.try_to_unmap_flush_dirty(ubc);
                if mm.pages[pfn as usize].test(PG_INBATCH) {
                    // pageout(): is_page_cache_freeable() fails on the batch's reference
                    // (PAGE_KEEP).
                    break 'f Fate::Keep;
                }
                // pageout() -> swap_writeout()
                stat.nr_pageout += 1;
                mm.count_event(VmEvent::Pswpout, 1);
                let now = self.e.now();
                let sync_write = {
                    let s = mm.swap.as_ref().expect("swapcache folio without swap");
                    s.synchronous.then_some(s.zram_write)
                };
                mm.pages[pfn as usize].clear(PG_DIRTY);
                if let Some(ns) = sync_write {
                    // zram: the write completes inside pageout; the folio is clean now.
                    self.e.charge(ns);
                } else {
                    mm.folio_start_writeback(pfn);
                    if sc.plug.is_some() {
                        // submit_bio: the bio waits in the task's plug.
                        break 'f Fate::KeepPlugged;
                    }
                    let io = mm.swap.as_mut().unwrap().dev.submit_write(now);
                    drop(mm);
                    self.submit_swap_write(pfn, io.done_at);
                    // A full device queue makes submit_bio sleep for a free request.
                    break 'f Fate::KeepThrottled(io.submitted_at - now);
                }
            }
            if mm.pages[pfn as usize].test(PG_INBATCH) {
                // __remove_mapping(): folio_ref_freeze() fails on the batch's reference.
                break 'f Fate::Keep;
            }
            // __remove_mapping(): store the shadow and drop the cache reference.
            let shadow = mm.workingset_eviction(pfn, target);
            let pg = mm.pages[pfn as usize];
            let lvf = mm.folio_lruvec(pfn) as usize;
            if pg.test(PG_SWAPCACHE) && mm.swap.as_ref().unwrap().swap_count(pg.private) == Some(0)
            {
                // No swap PTE refers to the slot any more (every sharer has copied or
                // unmapped the page): put_swap_folio() frees it with the cache's reference.
                mm.delete_from_swap_cache(pfn);
            } else if pg.test(PG_SWAPCACHE) {
                mm.swap_cache_set_shadow(pg.private, shadow);
                mm.lruvecs[lvf].mod_state(NodeStat::NrSwapcache, -1);
                mm.lruvecs[lvf].mod_node_state(NodeStat::NrFilePages, -1);
            } else {
                mm.page_cache_store(pg.owner(), pg.index, super::filemap::shadow_entry(shadow));
                mm.lruvecs[lvf].mod_state(NodeStat::NrFilePages, -1);
            }
            let pg = &mut mm.pages[pfn as usize];
            pg.clear(PG_OWNED | PG_SWAPCACHE | PG_ACTIVE | PG_ISOLATED);
            Fate::Free
        };
        match fate {
            Fate::Free => {
                self.mm.borrow_mut().free_folio(pfn);
                self.e.charge(self.c.page_free);
                true
            }
            Fate::Keep => false,
            Fate::KeepThrottled(wait) => {
                if wait > 0 {
                    self.e.sleep(wait).await;
                }
                false
            }
            Fate::KeepPlugged => {
                let full = sc.plug.as_ref().map_or(0, Vec::len) >= BLK_MAX_REQUEST_COUNT;
                if full {
                    self.blk_flush_plug(sc).await;
                }
                if let Some(plug) = sc.plug.as_mut() {
                    plug.push(pfn);
                }
                false
            }
            Fate::Activate => {
                let mut mm = self.mm.borrow_mut();
                let p = mm.pages[pfn as usize];
                // Free the swap slot of an activated folio when swap is getting full.
                if p.test(PG_SWAPCACHE)
                    && !p.test(PG_WRITEBACK)
                    && mm.mem_cgroup_swap_full(p.memcg)
                    && mm.folio_mapped(pfn)
                {
                    mm.folio_free_swap(pfn);
                }
                mm.pages[pfn as usize].set(PG_ACTIVE);
                stat.nr_activate[p.is_file_lru() as usize] += 1;
                false
            }
        }
    }

    /// Submit an asynchronous swap write whose IO completes at `at`: the completion runs
    /// on this CPU (blk-mq completes where it was submitted), in its bio-completion context.
    pub(crate) fn submit_swap_write(&self, pfn: Pfn, at: u64) {
        let cpu = self.e.cpu();
        self.queue_bio_completion(cpu, at, pfn);
    }

    /// shrink_list(): active lists are only deactivated when allowed; inactive lists are
    /// reclaimed.
    async fn shrink_list(
        &self,
        lru: usize,
        nr_to_scan: u64,
        lv: LruvecId,
        sc: &mut ScanControl,
    ) -> u64 {
        if is_active_lru(lru) {
            let bit = if is_file_lru(lru) {
                DEACTIVATE_FILE
            } else {
                DEACTIVATE_ANON
            };
            if sc.may_deactivate & bit != 0 {
                self.shrink_active_list(nr_to_scan, lv, sc, lru).await;
            } else {
                sc.skipped_deactivate = true;
            }
            return 0;
        }
        self.shrink_inactive_list(nr_to_scan, lv, sc, lru).await
    }

    /// shrink_lruvec(): scan the lists in SWAP_CLUSTER_MAX chunks toward get_scan_count's
    /// targets. Once nr_to_reclaim is met, kswapd and memcg reclaim stop the type with less
    /// work left and scale the other to the same proportion of its target, then stop at
    /// the next check (one nudge toward proportionality, as since v6.0's f53af4285d77:
    /// the smaller type's targets are zero by then); global direct reclaim at DEF_PRIORITY
    /// scans its full targets. Finally rebalance anon if its inactive list is low and
    /// anon can be aged.
    pub async fn shrink_lruvec(&self, lv: LruvecId, sc: &mut ScanControl) {
        // Before the memcg LRU (6.1, rule mglru_memcg_lru off) root reclaim comes here too,
        // through shrink_node_memcgs, and every lruvec goes to lru_gen_shrink_lruvec.
        if self.mm.borrow().lru_gen_enabled()
            && (!sc.root_reclaim() || !self.rules().mglru_memcg_lru)
        {
            return self.lru_gen_shrink_lruvec(lv, sc).await;
        }
        self.e.charge(self.c.shrink_lruvec_setup);
        let (mut nr, _) = self.mm.borrow().get_scan_count(lv, sc);
        let targets = nr;
        let proportional_reclaim =
            !sc.cgroup_reclaim() && !sc.kswapd && sc.priority == DEF_PRIORITY;
        let nr_to_reclaim = sc.nr_to_reclaim;
        let mut nr_reclaimed = 0u64;
        let plugged = self.blk_start_plug(sc);
        while nr[LRU_INACTIVE_ANON] > 0 || nr[LRU_ACTIVE_FILE] > 0 || nr[LRU_INACTIVE_FILE] > 0 {
            for lru in EVICTABLE_LRUS {
                if nr[lru] > 0 {
                    let chunk = nr[lru].min(SWAP_CLUSTER_MAX);
                    nr[lru] -= chunk;
                    nr_reclaimed += self.shrink_list(lru, chunk, lv, sc).await;
                }
            }
            if self.current_killed() {
                break;
            }
            if nr_reclaimed < nr_to_reclaim || proportional_reclaim {
                continue;
            }
            let nr_file = nr[LRU_INACTIVE_FILE] + nr[LRU_ACTIVE_FILE];
            let nr_anon = nr[LRU_INACTIVE_ANON] + nr[LRU_ACTIVE_ANON];
            if nr_file == 0 || nr_anon == 0 {
                break;
            }
            let (stop, other, percentage) = if nr_file > nr_anon {
                let t = targets[LRU_INACTIVE_ANON] + targets[LRU_ACTIVE_ANON] + 1;
                (LRU_INACTIVE_ANON, LRU_INACTIVE_FILE, nr_anon * 100 / t)
            } else {
                let t = targets[LRU_INACTIVE_FILE] + targets[LRU_ACTIVE_FILE] + 1;
                (LRU_INACTIVE_FILE, LRU_INACTIVE_ANON, nr_file * 100 / t)
            };
            nr[stop] = 0;
            nr[stop + 1] = 0;
            for l in [other, other + 1] {
                let scanned = targets[l] - nr[l];
                nr[l] = targets[l] * (100 - percentage) / 100;
                nr[l] -= nr[l].min(scanned);
            }
        }
        self.blk_finish_plug(sc, plugged).await;
        sc.nr_reclaimed += nr_reclaimed;
        // Even if the target was met, keep the anon inactive list balanced.
        let age = {
            let mm = self.mm.borrow();
            mm.can_age_anon_pages() && mm.inactive_is_low(lv, LRU_INACTIVE_ANON)
        };
        if age {
            self.shrink_active_list(SWAP_CLUSTER_MAX, lv, sc, LRU_ACTIVE_ANON)
                .await;
        }
    }

    /// prepare_scan_control(): per-shrink_node decisions from the target lruvec: flush the
    /// memcg statistics the heuristics read (ratelimited: only when the periodic flush is
    /// late; before rule reclaim_flush_ratelimited, 6.1, whenever the update threshold is
    /// crossed), snapshot the costs (under lru_lock; with seed 000's vmstat_scan_cost,
    /// fold the cost counters under cost_lock instead), decide which active lists may be
    /// deactivated (refaults since the last snapshot, or inactive too small),
    /// cache_trim_mode and file_is_tiny.
    async fn prepare_scan_control(&self, node: u32, sc: &mut ScanControl) {
        if self.mm.borrow().lru_gen_enabled() {
            return; // MGLRU keeps no scan balance of its own here
        }
        let target = sc.target_memcg();
        let lv = {
            let mut mm = self.mm.borrow_mut();
            let now = self.e.now();
            if mm.rules.reclaim_flush_ratelimited {
                mm.flush_stats_ratelimited(target, now);
            } else {
                mm.mem_cgroup_flush_stats(target, now);
            }
            mm.lruvec_of(target, node)
        };
        if self.v.vmstat_scan_cost {
            // Seed 000: fold the counters' flushed deltas into cost under cost_lock.
            let lock = self.mm.borrow().lruvecs[lv as usize].cost_lock;
            self.e.lock(lock, Site::PrepareScanControl).await;
            {
                use super::vmstat::NodeStat::*;
                let mut mm = self.mm.borrow_mut();
                let l = &mut mm.lruvecs[lv as usize];
                let lrusize = l.page_state(NrInactiveAnon)
                    + l.page_state(NrActiveAnon)
                    + l.page_state(NrInactiveFile)
                    + l.page_state(NrActiveFile);
                let items = [
                    [PgreclaimPageoutAnon, WorkingsetRestoreAnon, PgrotateAnon],
                    [PgreclaimPageoutFile, WorkingsetRestoreFile, PgrotateFile],
                ];
                let mut cost = [0u64; 2];
                for (t, it) in items.iter().enumerate() {
                    let now = it.map(|i| l.page_state(i));
                    let d: [u64; 3] =
                        std::array::from_fn(|k| now[k].saturating_sub(l.cost_seen[t][k]));
                    l.cost_seen[t] = now;
                    cost[t] = self.reclaim_cost(d[0] + d[1], d[2]);
                }
                l.anon_cost += cost[0];
                l.file_cost += cost[1];
                if l.anon_cost + l.file_cost > lrusize / 4 {
                    l.anon_cost /= 2;
                    l.file_cost /= 2;
                }
                sc.anon_cost = l.anon_cost;
                sc.file_cost = l.file_cost;
            }
            self.e.unlock(lock);
        } else {
            self.lock_lruvec(lv, Site::PrepareScanControl).await;
            {
                let mm = self.mm.borrow();
                sc.anon_cost = mm.lruvecs[lv as usize].anon_cost;
                sc.file_cost = mm.lruvecs[lv as usize].file_cost;
            }
            self.unlock_lruvec(lv);
        }
        let mm = self.mm.borrow();
        let l = &mm.lruvecs[lv as usize];
        if sc.force_deactivate {
            sc.may_deactivate = DEACTIVATE_ANON | DEACTIVATE_FILE;
        } else {
            sc.may_deactivate = 0;
            if l.page_state(NodeStat::WorkingsetActivateAnon) != l.refaults[0]
                || mm.inactive_is_low(lv, LRU_INACTIVE_ANON)
            {
                sc.may_deactivate |= DEACTIVATE_ANON;
            }
            if l.page_state(NodeStat::WorkingsetActivateFile) != l.refaults[1]
                || mm.inactive_is_low(lv, LRU_INACTIVE_FILE)
            {
                sc.may_deactivate |= DEACTIVATE_FILE;
            }
        }
        let file = l.page_state(NodeStat::NrInactiveFile);
        sc.cache_trim_mode = (file >> sc.priority) > 0
            && sc.may_deactivate & DEACTIVATE_FILE == 0
            && !sc.no_cache_trim_mode;
        if !sc.cgroup_reclaim() {
            let free = mm.nodes[node as usize].free;
            let file = mm.node_page_state(node, NodeStat::NrActiveFile)
                + mm.node_page_state(node, NodeStat::NrInactiveFile);
            let total_high = mm.nodes[node as usize].wmark[WMARK_HIGH];
            let anon = mm.node_page_state(node, NodeStat::NrInactiveAnon);
            sc.file_is_tiny = file + free <= total_high
                && sc.may_deactivate & DEACTIVATE_ANON == 0
                && (anon >> sc.priority) > 0;
        } else {
            sc.file_is_tiny = false;
        }
    }

    /// shrink_node_memcgs(): walk the target's memcg subtree and shrink each lruvec on this
    /// node, honoring memory.min (skip) and memory.low (skip unless memcg_low_reclaim). A
    /// partial walk (direct and memcg reclaim share a cursor) stops once enough is
    /// reclaimed; kswapd and memcg_full_walk walk everything.
    async fn shrink_node_memcgs(&self, node: u32, sc: &mut ScanControl) {
        let target = sc.target_memcg();
        let partial = !sc.kswapd && !sc.memcg_full_walk;
        let mut cookie = super::memcontrol::ReclaimCookie {
            node,
            generation: 0,
        };
        let mut prev: Option<MemcgId> = None;
        loop {
            let next = {
                let mut mm = self.mm.borrow_mut();
                mm.mem_cgroup_iter(target, prev, if partial { Some(&mut cookie) } else { None })
            };
            let Some(memcg) = next else { break };
            prev = Some(memcg);
            let lv = {
                let mut mm = self.mm.borrow_mut();
                mm.mem_cgroup_calculate_protection(target, memcg);
                if mm.mem_cgroup_below_min(target, memcg) {
                    // Hard protection: never reclaim below memory.min.
                    continue;
                }
                if mm.mem_cgroup_below_low(target, memcg) {
                    // Soft protection: skip unless nothing else was reclaimable.
                    if !sc.memcg_low_reclaim {
                        sc.memcg_low_skipped = true;
                        continue;
                    }
                    mm.memcg_memory_event(memcg, super::memcontrol::MemcgEvent::Low);
                }
                mm.lruvec_of(memcg, node)
            };
            self.shrink_lruvec(lv, sc).await;
            sc.reclaim_state += self.shrink_slab(memcg, node, sc.priority);
            if self.current_killed() {
                break;
            }
            if partial && sc.nr_reclaimed >= sc.nr_to_reclaim {
                break;
            }
        }
    }

    /// shrink_node(): one reclaim pass over a node for the target. Progress resets the
    /// node's kswapd_failures.
    pub async fn shrink_node(&self, node: u32, sc: &mut ScanControl) {
        if self.mm.borrow().lru_gen_enabled() && sc.root_reclaim() && self.rules().mglru_memcg_lru {
            return self.lru_gen_shrink_node(node, sc).await;
        }
        let before = sc.nr_reclaimed;
        sc.nr_taken = 0;
        sc.nr_writeback = 0;
        self.prepare_scan_control(node, sc).await;
        self.shrink_node_memcgs(node, sc).await;
        self.flush_reclaim_state(sc);
        self.after_reclaim_pass();
        let mut mm = self.mm.borrow_mut();
        if sc.nr_reclaimed > before {
            mm.nodes[node as usize].kswapd_failures = 0;
        } else if sc.cache_trim_mode {
            sc.cache_trim_mode_failed = true;
        }
    }

    /// flush_reclaim_state(): the pages this reclaimer freed outside the LRUs since the
    /// last flush (slab pages, slub.rs) join nr_reclaimed. From 6.5 (rule
    /// reclaim_slab_credit_root_only) only for root reclaim: a memcg's reclaim cannot tell
    /// the slab pages it freed from other memcgs' objects. 6.1 added reclaimed_slab in
    /// shrink_node for every reclaim. Called where the kernel calls it: after
    /// shrink_node_memcgs, and after each memcg in MGLRU's shrink_one.
    pub fn flush_reclaim_state(&self, sc: &mut ScanControl) {
        let pages = std::mem::take(&mut sc.reclaim_state);
        if !self.rules().reclaim_slab_credit_root_only || sc.root_reclaim() {
            sc.nr_reclaimed += pages;
        }
    }

    /// do_try_to_free_pages(): the direct-reclaim priority loop over the zonelist, with
    /// the retries of the kernel when nothing was reclaimed: a full memcg walk (from 6.11,
    /// rule memcg_partial_walk), then forced deactivation, then reclaim below memory.low.
    async fn do_try_to_free_pages(&self, zonelist: &[u32], sc: &mut ScanControl) -> u64 {
        let initial_priority = sc.priority;
        // Before rule memcg_partial_walk (6.1) every walk is full, and so there is no
        // retry with a full walk either.
        if !self.rules().memcg_partial_walk {
            sc.memcg_full_walk = true;
        }
        loop {
            if !sc.cgroup_reclaim() {
                self.mm.borrow_mut().count_event(VmEvent::Allocstall, 1);
            }
            loop {
                sc.nr_scanned = 0;
                for &n in zonelist {
                    self.shrink_node(n, sc).await;
                }
                if sc.nr_reclaimed >= sc.nr_to_reclaim || self.current_killed() {
                    break;
                }
                if sc.priority < DEF_PRIORITY - 2 {
                    sc.may_writepage = true;
                }
                sc.priority -= 1;
                if sc.priority < 0 {
                    break;
                }
            }
            {
                let mut mm = self.mm.borrow_mut();
                for &n in zonelist {
                    mm.snapshot_refaults(sc.target_memcg(), n);
                }
            }
            if sc.nr_reclaimed > 0 || self.current_killed() {
                return sc.nr_reclaimed;
            }
            if !sc.memcg_full_walk {
                sc.priority = initial_priority;
                sc.memcg_full_walk = true;
                continue;
            }
            if sc.skipped_deactivate {
                sc.priority = initial_priority;
                sc.force_deactivate = true;
                sc.skipped_deactivate = false;
                continue;
            }
            if sc.memcg_low_skipped {
                sc.priority = initial_priority;
                sc.force_deactivate = false;
                sc.memcg_low_reclaim = true;
                sc.memcg_low_skipped = false;
                continue;
            }
            return 0;
        }
    }

    /// try_to_free_pages(): global direct reclaim from the allocator, SWAP_CLUSTER_MAX
    /// pages, after throttle_direct_reclaim (a task killed while throttled returns 1 so
    /// that the allocator does not OOM-kill on its behalf).
    pub async fn try_to_free_pages(&self, node: u32) -> u64 {
        if self.throttle_direct_reclaim(node).await {
            return 1;
        }
        let mut sc = ScanControl::new(SWAP_CLUSTER_MAX, None, false);
        let zl = self.mm.borrow().zonelist(node);
        let t0 = self.e.now();
        let r = self.do_try_to_free_pages(&zl, &mut sc).await;
        self.note_direct_reclaim(self.e.now() - t0);
        r
    }

    /// try_to_free_mem_cgroup_pages(): reclaim at least max(nr_pages, 32) from `memcg`'s
    /// subtree, over every node (the current node's zonelist). `reclaim_options` is
    /// MEMCG_RECLAIM_MAY_SWAP and/or MEMCG_RECLAIM_PROACTIVE; `swappiness` overrides the
    /// memcg's for proactive reclaim (sc->proactive_swappiness; 201 = SWAPPINESS_ANON_ONLY).
    /// The root memcg is a target like any other (cgroup_reclaim() and root_reclaim() both
    /// hold). Limit and memory.high reclaim add their time to the direct-reclaim totals;
    /// proactive reclaim's is reported per memory.reclaim write instead.
    pub async fn try_to_free_mem_cgroup_pages(
        &self,
        memcg: MemcgId,
        nr_pages: u64,
        reclaim_options: u32,
        swappiness: Option<u32>,
    ) -> u64 {
        let mut sc = ScanControl::new(nr_pages.max(SWAP_CLUSTER_MAX), Some(memcg), false);
        sc.may_swap = reclaim_options & MEMCG_RECLAIM_MAY_SWAP != 0;
        sc.proactive = reclaim_options & MEMCG_RECLAIM_PROACTIVE != 0;
        sc.swappiness = swappiness;
        let node = self.current_node();
        let zl = self.mm.borrow().zonelist(node);
        let t0 = self.e.now();
        let r = self.do_try_to_free_pages(&zl, &mut sc).await;
        if !sc.proactive {
            self.note_direct_reclaim(self.e.now() - t0);
        }
        r
    }

    /// wakeup_kswapd(): wake the node's kswapd if it sleeps (or naps), unless it has given
    /// up on the node or the node is already balanced.
    pub fn wakeup_kswapd(&self, node: u32) {
        let wq = {
            let mm = self.mm.borrow();
            let nd = &mm.nodes[node as usize];
            if !nd.kswapd_wait.active()
                || nd.kswapd_failures >= super::MAX_RECLAIM_RETRIES
                || mm.pgdat_balanced(node)
            {
                return;
            }
            nd.kswapd_wait.clone()
        };
        self.wake_up_all(&wq);
    }

    /// allow_direct_reclaim(): is the node's free memory above half its pfmemalloc
    /// reserve (the MIN watermark)? A node kswapd gave up on always allows it. When not,
    /// kswapd is woken if it sleeps.
    fn allow_direct_reclaim(&self, node: u32) -> bool {
        let (ok, wq) = {
            let mm = self.mm.borrow();
            let nd = &mm.nodes[node as usize];
            if nd.kswapd_failures >= super::MAX_RECLAIM_RETRIES
                || mm.zone_reclaimable_pages(node) == 0
            {
                return true;
            }
            let reserve = nd.wmark[WMARK_MIN];
            if reserve == 0 {
                return true;
            }
            (nd.free > reserve / 2, nd.kswapd_wait.clone())
        };
        if !ok && wq.active() {
            self.wake_up_all(&wq);
        }
        ok
    }

    /// throttle_direct_reclaim(): a direct reclaimer whose first node is below half its
    /// pfmemalloc reserve counts PGSCAN_DIRECT_THROTTLE and waits (killable) until kswapd
    /// restores it. True when the task was killed while waiting.
    async fn throttle_direct_reclaim(&self, node: u32) -> bool {
        if self.current_killed() || self.allow_direct_reclaim(node) {
            return false;
        }
        self.mm
            .borrow_mut()
            .count_event(VmEvent::PgscanDirectThrottle, 1);
        let wq = self.mm.borrow().nodes[node as usize]
            .pfmemalloc_wait
            .clone();
        loop {
            self.wait_event_timeout(&wq, None).await;
            if self.current_killed() {
                return true;
            }
            if self.allow_direct_reclaim(node) {
                return false;
            }
        }
    }

    /// prepare_kswapd_sleep(): wake the throttled direct reclaimers; kswapd may sleep when
    /// it has given up on the node or the node is balanced.
    fn prepare_kswapd_sleep(&self, node: u32) -> bool {
        let wq = self.mm.borrow().nodes[node as usize]
            .pfmemalloc_wait
            .clone();
        if wq.active() {
            self.wake_up_all(&wq);
        }
        let mm = self.mm.borrow();
        mm.nodes[node as usize].kswapd_failures >= super::MAX_RECLAIM_RETRIES
            || mm.pgdat_balanced(node)
    }

    /// kswapd_try_to_sleep(): a short nap of HZ/10 when the node looks balanced; woken
    /// early (wakeup_kswapd) counts KSWAPD_LOW_WMARK_HIT_QUICKLY. After a full nap on a
    /// still balanced node, sleep until woken; a node unbalanced again right after the
    /// nap counts KSWAPD_HIGH_WMARK_HIT_QUICKLY, and so does one never balanced.
    async fn kswapd_try_to_sleep(&self, node: u32) {
        let wq = self.mm.borrow().nodes[node as usize].kswapd_wait.clone();
        let mut remaining = false;
        if self.prepare_kswapd_sleep(node) {
            remaining = self.wait_event_timeout(&wq, Some(KSWAPD_NAP)).await;
        }
        if !remaining && self.prepare_kswapd_sleep(node) {
            self.wait_event_timeout(&wq, None).await;
        } else {
            let ev = if remaining {
                VmEvent::KswapdLowWmarkHitQuickly
            } else {
                VmEvent::KswapdHighWmarkHitQuickly
            };
            self.mm.borrow_mut().count_event(ev, 1);
        }
    }

    /// kswapd(): the per-node reclaim thread: try to sleep, then balance the node.
    /// Simplified: kswapd runs on a CPU of its own (it never waits for one).
    pub async fn kswapd(&self, node: u32) {
        loop {
            self.kswapd_try_to_sleep(node).await;
            let t0 = self.e.now();
            self.note_kswapd_start(node, t0);
            self.balance_pgdat(node).await;
            self.note_kswapd_run(node, self.e.now() - t0);
            self.e.sync().await;
        }
    }

    /// balance_pgdat(): reclaim until the node is above its HIGH watermark, raising the
    /// priority when a pass scanned too little or reclaimed nothing. A run that went
    /// through every priority without reclaiming anything while cache_trim_mode failed
    /// starts over once without it (no_cache_trim_mode). A run that reclaimed nothing
    /// counts a kswapd failure, unless the node was balanced when it looked (the kernel's
    /// `goto out` skips the count). Simplified: no watermark boost, order 0 only.
    pub async fn balance_pgdat(&self, node: u32) {
        self.mm.borrow_mut().count_event(VmEvent::Pageoutrun, 1);
        let mut sc = ScanControl::new(0, None, true);
        'restart: loop {
            sc.priority = DEF_PRIORITY;
            if self.balance_pgdat_pass(node, &mut sc).await {
                break 'restart;
            }
            if sc.nr_reclaimed == 0
                && sc.priority < 1
                && !sc.no_cache_trim_mode
                && sc.cache_trim_mode_failed
            {
                sc.no_cache_trim_mode = true;
                continue 'restart;
            }
            if sc.nr_reclaimed == 0 {
                self.mm.borrow_mut().nodes[node as usize].kswapd_failures += 1;
            }
            break 'restart;
        }
        self.mm.borrow_mut().snapshot_refaults(0, node);
    }

    /// The priority loop of balance_pgdat(), from DEF_PRIORITY down to 1; true when it
    /// found the node balanced (the kernel's `goto out`).
    async fn balance_pgdat_pass(&self, node: u32, sc: &mut ScanControl) -> bool {
        loop {
            sc.nr_scanned = 0;
            let before = sc.nr_reclaimed;
            if self.mm.borrow().pgdat_balanced(node) {
                return true;
            }
            // kswapd_age_node(): keep the anon inactive list balanced across all memcgs
            // (MGLRU: lru_gen_age_node).
            if self.mm.borrow().lru_gen_enabled() {
                self.lru_gen_age_node(node, sc).await;
            }
            let age: Vec<LruvecId> = if self.mm.borrow().lru_gen_enabled() {
                Vec::new()
            } else {
                let mm = self.mm.borrow();
                let root = mm.lruvec_of(0, node);
                if mm.can_age_anon_pages() && mm.inactive_is_low(root, LRU_INACTIVE_ANON) {
                    mm.memcg_preorder
                        .iter()
                        .map(|&m| mm.lruvec_of(m, node))
                        .collect()
                } else {
                    Vec::new()
                }
            };
            for lv in age {
                self.shrink_active_list(SWAP_CLUSTER_MAX, lv, sc, LRU_ACTIVE_ANON)
                    .await;
            }
            if sc.priority < DEF_PRIORITY - 2 {
                sc.may_writepage = true;
            }
            // kswapd_shrink_node()
            sc.nr_to_reclaim = {
                let mm = self.mm.borrow();
                mm.nodes[node as usize].wmark[WMARK_HIGH].max(SWAP_CLUSTER_MAX)
            };
            self.shrink_node(node, sc).await;
            // Throttled direct reclaimers may go on once the reserve is back.
            let wq = self.mm.borrow().nodes[node as usize]
                .pfmemalloc_wait
                .clone();
            if wq.active() && self.allow_direct_reclaim(node) {
                self.wake_up_all(&wq);
            }
            let reclaimed = sc.nr_reclaimed - before;
            let enough = sc.nr_scanned.max(reclaimed) >= sc.nr_to_reclaim;
            if !enough || reclaimed == 0 {
                sc.priority -= 1;
            }
            if sc.priority < 1 {
                return false;
            }
        }
    }
}

/// What a putback notes of its pass (lru_note_cost's arguments), and the call sites of
/// its holds.
struct PutbackNote {
    nr_io: u64,
    nr_rotated: u64,
    /// Before 6.17 the caller calls lru_note_cost whatever the cost (shrink_inactive_list),
    /// or only for a cost above 0 (shrink_active_list's rotations).
    always: bool,
    /// The putback holds.
    putback_site: Site,
    /// 7.2's fresh hold for the cost.
    cost_site: Site,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_reclaim_is_global_or_the_root_memcg() {
        assert!(ScanControl::new(32, None, false).root_reclaim());
        assert!(ScanControl::new(32, Some(0), false).root_reclaim());
        assert!(!ScanControl::new(32, Some(3), false).root_reclaim());
    }

    #[test]
    fn a_mapped_folio_met_young_while_isolated_is_kept_before_6_14() {
        // shrink_folio_list's "folio_update_gen() tried to promote this page?" (6.1, 6.12
        // with MGLRU): a mapped folio with PG_referenced is kept. Not on 6.18 (rule
        // mglru_promote_second_sighting), not with the classic LRU, not without
        // PG_referenced, not once unmapped.
        let kept = |lru: &str, version: &str, referenced: bool, mapped: bool| {
            let extra = format!("lru = \"{lru}\"\nversion = \"{version}\"");
            let s = crate::fixture::one_node_machine("64M", Some("64M"), &extra);
            let (mmid, pfns) = s.fixture_anon_folios(1, 0, 1, false, 0);
            {
                let mut mm = s.mm.borrow_mut();
                if referenced {
                    mm.pages[pfns[0] as usize].set(PG_REFERENCED);
                }
                if !mapped {
                    mm.mms[mmid as usize].ptes[0] = 0;
                }
            }
            s.lru_gen_tried_to_promote(pfns[0])
        };
        assert!(kept("mglru", "6.12", true, true));
        assert!(kept("mglru", "6.1", true, true));
        assert!(!kept("mglru", "6.18", true, true));
        assert!(!kept("classic", "6.12", true, true));
        assert!(!kept("mglru", "6.12", false, true));
        assert!(!kept("mglru", "6.12", true, false));
    }

    #[test]
    fn reclaim_flushes_the_memcg_statistics_on_6_1_even_right_after_a_periodic_flush() {
        // /a's 64 anon folios are active, the last flush saw them inactive, and 300 updates
        // (above MEMCG_CHARGE_BATCH * 4 CPUs) wait. prepare_scan_control of limit reclaim at
        // `at` (before the first periodic flush, at 1.9 s): 6.12+ flushes only when the
        // periodic flush (last at 0) is 2 * FLUSH_TIME late; 6.1 (rule
        // reclaim_flush_ratelimited off) whenever the threshold is crossed. Returns the
        // active anon size the heuristics then read.
        let active_read = |ratelimited: bool, at: u64| -> u64 {
            let s = crate::fixture::one_node_machine("1G", Some("1G"), "");
            s.fixture_anon_folios(1, 0, 64, false, crate::mm::mm_types::PG_ACTIVE);
            let lv = s.mm.borrow().lruvec_of(1, 0) as usize;
            {
                let mut mm = s.mm.borrow_mut();
                mm.rules.reclaim_flush_ratelimited = ratelimited;
                let f = &mut mm.lruvecs[lv].stat_flushed;
                f[NodeStat::NrInactiveAnon as usize] = 64;
                f[NodeStat::NrActiveAnon as usize] = 0;
                mm.count_memcg_event(1, VmEvent::Pgfault, 300);
            }
            crate::fixture::run_probe(&s, 0, at, move |s| async move {
                let mut sc = ScanControl::new(32, Some(1), false);
                s.prepare_scan_control(0, &mut sc).await;
            });
            let mm = s.mm.borrow();
            mm.lruvecs[lv].page_state(NodeStat::NrActiveAnon)
        };
        let second = 1_000_000_000;
        assert_eq!(active_read(true, second), 0, "6.12 at 1 s: stale");
        assert_eq!(active_read(false, second), 64, "6.1 at 1 s: flushed");
    }

    #[test]
    fn protected_scan_cases() {
        // No protection: unchanged.
        assert_eq!(protected_scan(1000, 0, 0, 1000, false), (1000, false));
        // memory.low 500 of usage 1000: 1000 - 1000 * 500 / 1001 = 1000 - 499 = 501.
        assert_eq!(protected_scan(1000, 0, 500, 1000, false), (501, true));
        // low equal to min: min counts, low is not reported skipped: 1000 - 499 = 501.
        assert_eq!(protected_scan(1000, 500, 500, 1000, false), (501, false));
        // The low-overriding pass uses min (0): unchanged, low not skipped.
        assert_eq!(protected_scan(1000, 0, 500, 1000, true), (1000, false));
        // min 900 of 1000: 40 - 40 * 900 / 1001 = 40 - 35 = 5, raised to SWAP_CLUSTER_MAX.
        assert_eq!(protected_scan(40, 900, 0, 1000, false), (32, false));
        // Usage below protection counts as the protection: 1000 - 1000 * 800 / 801 = 1.
        assert_eq!(protected_scan(1000, 800, 0, 10, false), (32, false));
    }

    #[test]
    fn inactive_ratio_follows_sqrt_of_gib() {
        // < 1 GiB: ratio 1.
        assert!(inactive_is_low_ratio(100, 101));
        assert!(!inactive_is_low_ratio(100, 100));
        // 1 GiB total (262144 pages): ratio int_sqrt(10) = 3.
        let total = 1u64 << 18;
        assert!(inactive_is_low_ratio(total / 4 - 1, total - total / 4 + 1)); // 65535*3 < 196609
        assert!(!inactive_is_low_ratio(total / 4 + 1, total - total / 4 - 1));
        // 100 GiB: ratio 31.
        let total = 100u64 << 18;
        let inactive = total / 32;
        assert!(!inactive_is_low_ratio(
            inactive + 1000,
            total - inactive - 1000
        ));
        assert!(inactive_is_low_ratio(
            inactive - 1000,
            total - inactive + 1000
        ));
    }
}
