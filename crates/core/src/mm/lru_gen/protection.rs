//! Working set protection: the "working set protection" section of mm/vmscan.c (v6.18):
//! set_initial_priority, lruvec_is_sizable, lruvec_is_reclaimable and lru_gen_age_node.
//!
//! Before kswapd balances a node it looks at every memcg (lru_gen_age_node): it computes
//! their memory.min and memory.low protection, which shrink_one reads, and, with min_ttl
//! set (/sys/kernel/mm/lru_gen/min_ttl_ms), checks that some memcg still has an evictable
//! generation older than min_ttl. If none has (or all are too small or below memory.min),
//! reclaim would thrash the working set of the last min_ttl, so the OOM killer is invoked
//! instead. set_initial_priority starts kswapd and root reclaim (lru_gen_shrink_node) at
//! the priority where (reclaimable >> priority) is about the reclaim target.
//!
//! Simplified: times are virtual ns where the kernel compares jiffies
//! (`lru_gen_oldest_expired`, the min_ttl test of lruvec_is_reclaimable).

use super::*;
use crate::mm::vmscan::ScanControl;
use crate::mm::vmstat::NodeStat;
use crate::mm::{LruvecId, Mm, DEF_PRIORITY};
use crate::sim::Sim;

/// fls_long(): the 1-based index of the highest set bit, 0 for 0.
#[inline]
fn fls_long(x: u64) -> i32 {
    (u64::BITS - x.leading_zeros()) as i32
}

/// set_initial_priority() (lru_gen_shrink_node, lru_gen_age_node): at DEF_PRIORITY with
/// at least MIN_LRU_BATCH to reclaim, start at the priority where (reclaimable >> priority)
/// is about nr_to_reclaim: fls(reclaimable) - 1 - fls(nr_to_reclaim - 1), clamped to
/// [DEF_PRIORITY / 2, DEF_PRIORITY]. `reclaimable` is the node's NR_INACTIVE_FILE, plus
/// NR_INACTIVE_ANON when anon can be reclaimed. Returns the priority to use.
pub fn set_initial_priority(priority: i32, nr_to_reclaim: u64, reclaimable: u64) -> i32 {
    if priority != DEF_PRIORITY || nr_to_reclaim < MIN_LRU_BATCH {
        return priority;
    }
    let p = fls_long(reclaimable) - 1 - fls_long(nr_to_reclaim - 1);
    p.clamp(DEF_PRIORITY / 2, DEF_PRIORITY)
}

/// lruvec_evictable_size(): the pages in all generations of the evictable types, a
/// negative count as 0 (7.2 names the sum; earlier kernels spell it out in
/// lruvec_is_sizable and get_nr_to_scan).
pub fn lruvec_evictable_size(lrugen: &LruGenFolio, swappiness: u32) -> u64 {
    let mut total = 0u64;
    for ty in 0..ANON_AND_FILE {
        if !type_is_evictable(ty, swappiness) {
            continue;
        }
        for seq in lrugen.min_seq[ty]..=lrugen.max_seq {
            total += lrugen.nr_pages[lru_gen_from_seq(seq)][ty].max(0) as u64;
        }
    }
    total
}

/// lruvec_is_sizable(): are the evictable generations big enough to be worth a pass? For
/// an online memcg, (total >> priority) != 0; offline, any page at all.
pub fn lruvec_is_sizable(
    lrugen: &LruGenFolio,
    swappiness: u32,
    online: bool,
    priority: i32,
) -> bool {
    let total = lruvec_evictable_size(lrugen, swappiness);
    if online {
        total >> priority.clamp(0, 63) != 0
    } else {
        total != 0
    }
}

/// The min_ttl test of lruvec_is_reclaimable(): was the oldest evictable generation born
/// more than `min_ttl` ago (time_is_before_jiffies(birth + min_ttl))? Times in virtual ns;
/// the kernel compares jiffies. The caller also requires !below_min and
/// `lruvec_is_sizable`.
pub fn lru_gen_oldest_expired(
    lrugen: &LruGenFolio,
    swappiness: u32,
    min_ttl: u64,
    now: u64,
) -> bool {
    let gen = lru_gen_from_seq(evictable_min_seq(lrugen.min_seq, swappiness));
    lrugen.timestamps[gen].saturating_add(min_ttl) < now
}

impl Mm {
    /// lruvec_is_reclaimable(): not below memory.min, big enough to matter, and its oldest
    /// evictable generation older than `min_ttl`.
    fn lruvec_is_reclaimable(
        &self,
        lv: LruvecId,
        sc: &ScanControl,
        min_ttl: u64,
        now: u64,
    ) -> bool {
        let memcg = self.lruvecs[lv as usize].memcg;
        if self.mem_cgroup_below_min(0, memcg) {
            return false;
        }
        let sw = self.lru_gen_swappiness(lv, sc);
        let g = &self.lruvecs[lv as usize].lrugen;
        lruvec_is_sizable(g, sw, true, sc.priority) && lru_gen_oldest_expired(g, sw, min_ttl, now)
    }

    /// The reclaimable pages set_initial_priority() sizes from: the node's inactive file,
    /// plus its inactive anon when swap space is left.
    pub(super) fn lru_gen_reclaimable(&self, node: u32) -> u64 {
        let mut r = self.node_page_state(node, NodeStat::NrInactiveFile);
        if self.can_reclaim_anon_pages(0) {
            r += self.node_page_state(node, NodeStat::NrInactiveAnon);
        }
        r
    }
}

impl Sim {
    /// lru_gen_age_node(): kswapd's look at the node before balancing it: the initial
    /// priority, every memcg's protection, and the min_ttl rule: with min_ttl set, if no
    /// memcg has an evictable generation older than it (or all are too small or below
    /// memory.min), invoke the OOM killer rather than thrash.
    pub async fn lru_gen_age_node(&self, node: u32, sc: &mut ScanControl) {
        // Rule mglru_v61_kswapd_ages_memcgs: 6.1's, which ages (v6_1.rs).
        if self.rules().mglru_v61_kswapd_ages_memcgs {
            return self.lru_gen_age_node_v61(node, sc).await;
        }
        let min_ttl = self.mm.borrow().lru_gen_min_ttl;
        let reclaimable = {
            let mut mm = self.mm.borrow_mut();
            sc.priority =
                set_initial_priority(sc.priority, sc.nr_to_reclaim, mm.lru_gen_reclaimable(node));
            let now = self.e.now();
            let mut reclaimable = min_ttl == 0;
            let order = mm.memcg_preorder.clone();
            for m in order {
                mm.mem_cgroup_calculate_protection(0, m);
                if !reclaimable {
                    let lv = mm.lruvec_of(m, node);
                    reclaimable = mm.lruvec_is_reclaimable(lv, sc, min_ttl, now);
                }
            }
            reclaimable
        };
        if !reclaimable && self.mutex_trylock_oom() {
            self.out_of_memory(None).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_initial_priority_cases() {
        // Only at DEF_PRIORITY with at least MIN_LRU_BATCH to reclaim.
        assert_eq!(set_initial_priority(11, 1 << 10, 1 << 20), 11);
        assert_eq!(set_initial_priority(12, 63, 1 << 20), 12);
        // fls(1 << 20) = 21, fls(1023) = 10: 21 - 1 - 10 = 10.
        assert_eq!(set_initial_priority(12, 1024, 1 << 20), 10);
        // Rounds reclaimable down: fls((1 << 20) - 1) = 20 -> 9.
        assert_eq!(set_initial_priority(12, 1024, (1 << 20) - 1), 9);
        // Rounds nr_to_reclaim up: fls(1024) = 11 -> 9.
        assert_eq!(set_initial_priority(12, 1025, 1 << 20), 9);
        // Clamped to 12 above: fls(1 << 40) - 1 - fls(63) = 41 - 1 - 6 = 34.
        assert_eq!(set_initial_priority(12, 64, 1 << 40), 12);
        // Clamped to 6 below: 7 - 1 - 6 = 0, and 0 - 1 - 6 = -7.
        assert_eq!(set_initial_priority(12, 64, 100), 6);
        assert_eq!(set_initial_priority(12, 64, 0), 6);
        // Just inside: fls(1 << 13) - 1 - fls(63) = 14 - 1 - 6 = 7.
        assert_eq!(set_initial_priority(12, 64, 1 << 13), 7);
    }

    #[test]
    fn swappiness_size_and_ttl_helpers() {
        assert_eq!(get_swappiness_decide(false, 1000, 60), 0);
        assert_eq!(
            get_swappiness_decide(true, 63, 60),
            0,
            "fewer than MIN_LRU_BATCH swap pages"
        );
        assert_eq!(get_swappiness_decide(true, 64, 60), 60);
        assert_eq!(get_swappiness_decide(true, 64, 201), 201);
        let mut g = LruGenFolio::init(true, 0);
        // Window seqs 0..=3: 100 pages in all.
        g.nr_pages[0] = [40, 20];
        g.nr_pages[3] = [30, 10];
        assert!(lruvec_is_sizable(&g, 60, true, 6), "100 >> 6 = 1");
        assert!(!lruvec_is_sizable(&g, 60, true, 7), "100 >> 7 = 0");
        assert!(lruvec_is_sizable(&g, 60, false, 12), "offline: any page");
        assert!(!lruvec_is_sizable(&g, 0, true, 5), "file only: 30 >> 5 = 0");
        assert!(!lruvec_is_sizable(
            &LruGenFolio::init(true, 0),
            60,
            false,
            0
        ));
        // Oldest evictable generation born at 1000 (file only: min_seq file = 1).
        g.min_seq = [0, 1];
        g.timestamps = [5, 1000, 0, 0];
        assert!(
            !lru_gen_oldest_expired(&g, 0, 500, 1500),
            "not before: equal"
        );
        assert!(lru_gen_oldest_expired(&g, 0, 500, 1501));
        assert!(
            lru_gen_oldest_expired(&g, 60, 500, 506),
            "anon gen 0 born at 5"
        );
    }
}
