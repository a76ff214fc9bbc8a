//! The seed patches, one named switch each, all in one place.
//!
//! A run names its variant set in the scenario's `[variants]` table; every switch changes
//! behavior only where its seed's patch does, and the defaults are today's upstream kernel.
//! Kill-switch table (see docs/variants.md):
//!
//! | switch | seed | default (upstream) | other setting | counters that should move |
//! |---|---|---|---|---|
//! | `rotation_cost` | 002_e00ded5d028b9a4c.txt | true: cost = 32 * IO + rotations | false: the pre-v6.2 kernel, cost = pages of IO only, shrink_active_list records nothing | pgscan_anon vs pgscan_file, kswapd CPU, pgrotated-like work |
//! | `lru_add_dead_filter` | 003_8a17a4f994569132.txt | false | true: dead folios in an lru_add batch are freed at drain without touching the LRU | lru_add dead insertions, lru_lock acquisitions, folios_put_refs |
//! | `memcg_stats` | 004_0067ac0f851d1301.txt | rstat | batched_local (42a300353577), percpu_local (the fix) | page-fault throughput, shared-line traffic |
//! | `vmstat_scan_cost` | 000_0290c2cfd987366b.txt | false | true: cost producers only bump per-LRU counters; prepare_scan_control folds their flushed deltas under a per-lruvec cost_lock | lru_lock wait at shrink_lruvec, workingset_refault, shrink_node; cost_lock |
//! | `mglru_memcg_iter` | 001_4333ce9ca73f4f68.txt | false: the per-node memcg LRU (generations and bins, from a random bin) | true: shrink_many walks memcgs with mem_cgroup_iter, honoring memory.min/low; no memcg LRU | per-memcg pgsteal spread, memcg_lru.lock acquisitions, kswapd CPU |
//! | `mglru_tiers` | (MGLRU ablation) | true: tiers by refs, the PID controller protects tiers that refault more | false: get_tier_idx answers the top tier, no promotion for refs | workingset_refault_file / activate_file, file pgsteal |
//! | `mglru_look_around` | (MGLRU ablation) | true: lru_gen_look_around on eviction's rmap walk | false: only the folio's own PTE is tested | pgactivate of mapped anon, aging walks, pgscan per pgsteal |
//! | `mglru_bloom` | (MGLRU ablation) | true: aging's walk skips PTE tables the Bloom filters rule out | false: every PTE table is walked | walk CPU (walk_pte, walk_pmd), lock hold at walk_mm |

use serde::{Deserialize, Serialize};

/// The variant set of a run.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Variants {
    /// Seed 002, "mm: vmscan: make rotations a secondary factor in balancing anon vs file"
    /// (J. Weiner, 2022; upstream since v6.2). true: lru_note_cost weighs IO by
    /// SWAP_CLUSTER_MAX and adds rotations (shrink_inactive_list passes scanned - reclaimed,
    /// shrink_active_list its kept VM_EXEC folios). false: the pre-patch kernel, where cost
    /// is the number of pages of IO (pageouts, restore refaults) and rotations are free.
    #[serde(default = "yes")]
    pub rotation_cost: bool,
    /// Seed 003, "filter dead folios in lru_add batches" (JP Kobryn, Meta). true: at an
    /// lru_add drain, a folio whose only reference is the batch's (folio_ref_freeze(folio, 1)
    /// succeeds) is taken out of the batch and freed after the lock loop, never added to
    /// the LRU. false (upstream): it is added, then folios_put frees it, taking lru_lock again.
    #[serde(default)]
    pub lru_add_dead_filter: bool,
    /// Seed 000, RFC "mm/vmscan: reduce lru_lock contention via vmstat-derived scan-balance
    /// cost" (U. Arif, 2026). true: shrink_inactive_list, shrink_active_list and
    /// workingset_refault no longer take lru_lock (and every ancestor's) to record cost;
    /// they bump the lruvec's pgrotate / pgreclaim_pageout counters (restores are already
    /// counted in workingset_restore). prepare_scan_control reads the target lruvec's
    /// flushed, hierarchical counters without lru_lock, turns the delta since its last read
    /// into cost (32 * (pageouts + restores) + rotations, the formula being assumed) under a
    /// new per-lruvec cost_lock, and halves at lrusize/4 there; no parent walk. Scan balance
    /// then lags by the stats flush delay. false (upstream): lru_note_cost as today.
    #[serde(default)]
    pub vmstat_scan_cost: bool,
    /// Seed 004, "mm: memcontrol: don't batch updates of local VM stats and events"
    /// (J. Weiner, 2019): how memcg counters are updated. `rstat` (default): today's
    /// per-CPU counters with rstat flushing. `batched_local` (42a300353577, the regression):
    /// local and hierarchical counters both batched per CPU, spilling into shared atomics
    /// of the memcg and every ancestor. `percpu_local` (the seed's fix): local counters
    /// unbatched per CPU, hierarchical ones batched as before.
    #[serde(default)]
    pub memcg_stats: MemcgStats,
    /// Seed 001, "mm/mglru: remove memcg lru" (Chen Ridong, RFC 2025). true: MGLRU's root
    /// reclaim (shrink_many) walks the memcgs with mem_cgroup_iter and a reclaim cookie
    /// (none for kswapd and full walks), honoring memory.min/low as shrink_node_memcgs does;
    /// no memcg LRU, no rotations. false (upstream 6.18): the per-node memcg LRU of
    /// generations and bins, started at a random bin.
    #[serde(default)]
    pub mglru_memcg_iter: bool,
    /// MGLRU's tiers and the PID controller's protection of the tiers that refault more
    /// (no kernel knob). false: eviction protects no tier (get_tier_idx answers the top
    /// tier, so sort_folio never moves a folio up for its refs); folios whose refs reached
    /// the maximum with PG_workingset still move up lazily, and the choice between anon and
    /// file still weighs their refault rates.
    #[serde(default = "yes")]
    pub mglru_tiers: bool,
    /// MGLRU's lru_gen_look_around on the rmap path (no kernel knob). false: eviction's
    /// rmap walk clears and tests only the folio's own PTE.
    #[serde(default = "yes")]
    pub mglru_look_around: bool,
    /// The Bloom filters of MGLRU's page-table walk (no kernel knob). false: every PTE
    /// table is walked, whatever the last round found.
    #[serde(default = "yes")]
    pub mglru_bloom: bool,
}

/// The memcg statistics scheme (seed 004).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MemcgStats {
    #[default]
    Rstat,
    PercpuLocal,
    BatchedLocal,
}

fn yes() -> bool {
    true
}

impl Default for Variants {
    fn default() -> Self {
        Variants {
            rotation_cost: true,
            lru_add_dead_filter: false,
            vmstat_scan_cost: false,
            memcg_stats: MemcgStats::Rstat,
            mglru_memcg_iter: false,
            mglru_tiers: true,
            mglru_look_around: true,
            mglru_bloom: true,
        }
    }
}
