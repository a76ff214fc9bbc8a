//! Kernel versions, each the set of rules it has: the one registry of what differs
//! between the kernels the model can be.
//!
//! A scenario names its kernel with `kernel.version` ("6.1", "6.12", "6.18" or "7.3";
//! default "6.18", what the model was before versions existed). A version is a release as
//! Debian ships it: its stable series takes in fixes and reverts from later kernels, so a
//! rule is keyed to the Debian package that has it (6.1.176-1, 6.12.95-1~bpo12+1,
//! 7.3.4-1~bpo13+1; 6.18 is the upstream release). Each behavioral difference in the
//! paths the model has is one [`Rule`] with the commit that introduced it; a rule takes
//! effect in one place (its `at`), reading [`Rules`] there, never per page. Every rule can
//! be set alone (`kernel.rules.NAME = true|false`) to ask which kernel change moved a
//! result.
//!
//! Two kinds of rule:
//! - `Effect::Rule`: a behavior the model has in both forms, chosen by the version.
//! - `Effect::Switch`: a seed switch (variant.rs) that is a kernel's own behavior; the
//!   version gives the switch its default, and an explicit setting (in `[variants]`)
//!   overrides it.
//!
//! Every difference the source review found in the modeled paths is one of these; one
//! the model cannot yet reproduce belongs in docs/versions.md's list of what is left, not
//! in the registry, so that every name here can be set.
//!
//! Sources: each version's mm/vmscan.c, workingset.c, swap.c (folio.c in 7.3),
//! memcontrol.c, rmap.c, swap_state.c, swapfile.c, page_alloc.c and mm_inline.h, diffed
//! function by function; docs/versions.md has the table and the method.

use serde::{Deserialize, Serialize};

/// A modeled kernel version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum KernelVersion {
    /// Debian 12's kernel (6.1.176-1): no memcg LRU, the MGLRU of its first release.
    #[serde(rename = "6.1")]
    V6_1,
    /// Debian 13's kernel and bookworm-backports' (6.12.95-1~bpo12+1), the VM's default.
    #[serde(rename = "6.12")]
    V6_12,
    /// The LTS of late 2025 (upstream v6.18), what the model was written against.
    #[default]
    #[serde(rename = "6.18")]
    V6_18,
    /// The newest kernel Debian's archive served when versions were added
    /// (7.3.4-1~bpo13+1, trixie-backports).
    #[serde(rename = "7.3")]
    V7_3,
}

impl<'de> Deserialize<'de> for KernelVersion {
    /// A version's name, as a string ("6.12") or as the number `--set kernel.version=6.12`
    /// makes of it.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let name = match &v {
            serde_json::Value::String(s) => s.clone(),
            serde_json::Value::Number(n) => n.to_string(),
            other => other.to_string(),
        };
        KernelVersion::parse(&name).ok_or_else(|| {
            let names: Vec<&str> = VERSIONS.iter().map(|v| v.name()).collect();
            serde::de::Error::custom(format!(
                "{name}: not a modeled kernel version; allowed: {} (for another kernel, name the modeled version it should run as)",
                names.join(", ")
            ))
        })
    }
}

/// The modeled versions, oldest first (the column order of [`Rule::has`]).
pub const VERSIONS: [KernelVersion; 4] = [
    KernelVersion::V6_1,
    KernelVersion::V6_12,
    KernelVersion::V6_18,
    KernelVersion::V7_3,
];

impl KernelVersion {
    /// "6.12".
    pub fn name(self) -> &'static str {
        match self {
            KernelVersion::V6_1 => "6.1",
            KernelVersion::V6_12 => "6.12",
            KernelVersion::V6_18 => "6.18",
            KernelVersion::V7_3 => "7.3",
        }
    }

    /// The release its rules were read from.
    pub fn source(self) -> &'static str {
        match self {
            KernelVersion::V6_1 => "Debian linux-source-6.1 6.1.176-1",
            KernelVersion::V6_12 => "Debian linux-source-6.12 6.12.95-1~bpo12+1",
            KernelVersion::V6_18 => "upstream v6.18",
            KernelVersion::V7_3 => "Debian linux-source-7.3 7.3.4-1~bpo13+1",
        }
    }

    fn index(self) -> usize {
        VERSIONS.iter().position(|v| *v == self).unwrap_or(0)
    }

    /// The version named `s` ("6.12"), or None.
    pub fn parse(s: &str) -> Option<KernelVersion> {
        VERSIONS.into_iter().find(|v| v.name() == s)
    }

    /// The modeled version a kernel release string runs as ("6.12.95+deb12-cloud-amd64"):
    /// the newest modeled version not above it, and whether it is that version's series
    /// exactly. None for a release older than every modeled version, or no release string.
    pub fn of_release(release: &str) -> Option<(KernelVersion, bool)> {
        let mut it = release
            .split(|c: char| !c.is_ascii_digit())
            .filter(|s| !s.is_empty());
        let major: u32 = it.next()?.parse().ok()?;
        let minor: u32 = it.next()?.parse().ok()?;
        let key = |v: KernelVersion| {
            let (a, b) = v.name().split_once('.').unwrap_or(("0", "0"));
            (a.parse::<u32>().unwrap_or(0), b.parse::<u32>().unwrap_or(0))
        };
        let v = VERSIONS
            .into_iter()
            .rev()
            .find(|v| key(*v) <= (major, minor))?;
        Some((v, key(v) == (major, minor)))
    }
}

/// Where a rule acts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Modeled both ways; the function that reads it.
    Rule { at: &'static str },
    /// The version's default of this seed switch (variant.rs).
    Switch,
}

/// One behavioral difference between the versions.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub name: &'static str,
    /// The commit that introduced it (id and subject), or the version range where none
    /// could be identified.
    pub commit: &'static str,
    /// Which versions have it, in [`VERSIONS`] order.
    pub has: [bool; 4],
    /// What it does, in one line.
    pub what: &'static str,
    pub effect: Effect,
}

impl Rule {
    /// Whether `v` has this rule.
    pub fn in_version(&self, v: KernelVersion) -> bool {
        self.has[v.index()]
    }
}

const N: bool = false;
const Y: bool = true;

/// Every rule, modeled ones first.
pub const RULES: &[Rule] = &[
    Rule {
        name: "mglru_aging_feedback_rework",
        commit: "798c0330c2ca \"mm/mglru: rework aging feedback\" (v6.14)",
        has: [N, N, Y, Y],
        what: "with three generations left, aging is always due; before, only when the youngest holds more than half of the evictable pages or the oldest less than a quarter",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs should_run_aging" },
    },
    Rule {
        name: "mglru_scan_budget_nr_to_scan",
        commit: "af827e090489 \"mm: vmscan: apply proportional reclaim pressure for memcg when MGLRU is enabled\" (v6.17)",
        has: [N, N, Y, Y],
        what: "scan_folios scans at most min(nr_to_scan, MAX_LRU_BATCH) folios; before, always up to MAX_LRU_BATCH (a small target still isolates a full batch)",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs evict_folios" },
    },
    Rule {
        name: "mglru_proportional_protection",
        commit: "af827e090489 \"mm: vmscan: apply proportional reclaim pressure for memcg when MGLRU is enabled\" (v6.17)",
        has: [N, N, Y, Y],
        what: "get_nr_to_scan scales a memcg's evictable size by its memory.low/min share (apply_proportional_protection); before, the full size",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs lru_gen_get_nr_to_scan" },
    },
    Rule {
        name: "folio_batch_size_31",
        commit: "9cecde80aae0 \"mm: increase folio batch size\" (v6.10; id from mm-tree logs, not confirmed in mainline)",
        has: [N, Y, Y, Y],
        what: "the per-CPU LRU batches hold 31 folios; before, 15 (PAGEVEC_SIZE): twice the lru_lock round trips",
        effect: Effect::Rule { at: "mm/swap.rs batch_add" },
    },
    Rule {
        name: "mglru_memcg_lru",
        commit: "e4dde56cd208 \"mm: multi-gen LRU: per-node lru_gen_folio lists\" (v6.3)",
        has: [N, Y, Y, Y],
        what: "MGLRU root reclaim walks the per-node memcg LRU and stops at the target; before, every memcg under the target each pass (6.1's shrink_node_memcgs walk)",
        effect: Effect::Rule { at: "mm/vmscan.rs shrink_node, shrink_lruvec; mm/lru_gen/eviction.rs lru_gen_shrink_lruvec" },
    },
    Rule {
        name: "mglru_fault_add_active_workingset_only",
        commit: "6cbdd9726fb5 \"mm/mglru: use folio_mark_accessed to replace folio_set_active\" (7.2; id from mm-tree logs)",
        has: [N, N, N, Y],
        what: "a folio a fault adds to an MGLRU lruvec gets PG_active only if it has PG_workingset; otherwise PG_referenced (folio_mark_accessed); before, PG_active always",
        effect: Effect::Rule { at: "mm/swap.rs folio_add_lru" },
    },
    Rule {
        name: "mglru_placement_referenced",
        commit: "6cbdd9726fb5 \"mm/mglru: use folio_mark_accessed to replace folio_set_active\" (7.2; id from mm-tree logs)",
        has: [N, N, N, Y],
        what: "PG_referenced places a page-cache or swap-cache folio in the second oldest generation, as PG_workingset does; before, only PG_workingset",
        effect: Effect::Rule { at: "mm/lru_gen/folio.rs lru_gen_folio_seq" },
    },
    Rule {
        name: "mglru_set_refs_mark_accessed",
        commit: "6cbdd9726fb5 \"mm/mglru: use folio_mark_accessed to replace folio_set_active\" (7.2; id from mm-tree logs)",
        has: [N, N, N, Y],
        what: "a folio found young again (rmap, look-around) gets PG_workingset only with more than one reference counted; otherwise one more reference (folio_mark_accessed); before, PG_workingset at the second sighting",
        effect: Effect::Rule { at: "mm/lru_gen/folio.rs lru_gen_set_refs" },
    },
    Rule {
        name: "mglru_refault_activate_workingset",
        commit: "6cbdd9726fb5 \"mm/mglru: use folio_mark_accessed to replace folio_set_active\" (7.2; id from mm-tree logs)",
        has: [N, N, N, Y],
        what: "an MGLRU refault in a fault counts WORKINGSET_ACTIVATE only for a folio evicted from the working set; before, every recent refault in a fault",
        effect: Effect::Rule { at: "mm/lru_gen/workingset.rs lru_gen_refault_decide" },
    },
    Rule {
        name: "mglru_refault_recent_window",
        commit: "b1a71694fb00 \"mm/mglru: rework refault detection\" (v6.14)",
        has: [N, N, Y, Y],
        what: "an MGLRU refault is recent if evicted less than MAX_NR_GENS generations before the lruvec's max_seq; before, only if its type's min_seq is still the one it was evicted at",
        effect: Effect::Rule { at: "mm/lru_gen/workingset.rs lru_gen_test_recent" },
    },
    Rule {
        name: "mglru_refault_counts_all",
        commit: "\"mm: Multi-gen LRU: fix workingset accounting\" (Kalesh Singh, v6.4; id not verified)",
        has: [N, Y, Y, Y],
        what: "every MGLRU refault on its own lruvec counts WORKINGSET_REFAULT, and recent ones WORKINGSET_ACTIVATE; before (6.1), only recent ones count a refault and none an activation",
        effect: Effect::Rule { at: "mm/lru_gen/workingset.rs lru_gen_refault_decide" },
    },
    Rule {
        name: "mglru_protect_counts_activate",
        commit: "removed by \"mm: Multi-gen LRU: fix workingset accounting\" (Kalesh Singh, v6.4; id not verified)",
        has: [Y, N, N, N],
        what: "sort_folio counts each folio it protects (tier above tier_idx, or refs maxed) as WORKINGSET_ACTIVATE",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs scan_folios (sort_folio's count)" },
    },
    Rule {
        name: "mglru_refault_activate_in_fault",
        commit: "\"mm/mglru: rework workingset protection\" (v6.14 workingset series; mainline id not identified)",
        has: [N, N, Y, Y],
        what: "a recent MGLRU refault counts WORKINGSET_ACTIVATE only in a page fault (where folio_add_lru activates it); before, every recent refault, a read() too",
        effect: Effect::Rule { at: "mm/lru_gen/workingset.rs lru_gen_refault_decide" },
    },
    Rule {
        name: "mglru_refault_restore_rework",
        commit: "\"mm/mglru: rework workingset protection\" (v6.14 workingset series; mainline id not identified)",
        has: [N, N, Y, Y],
        what: "a recent MGLRU refault gets PG_workingset and counts WORKINGSET_RESTORE if its shadow says workingset, else its refs counter back; before, one in a fault or with refs at the top gets PG_workingset and every refs bit and counts WORKINGSET_RESTORE, the rest nothing",
        effect: Effect::Rule { at: "mm/lru_gen/workingset.rs lru_gen_refault_decide" },
    },
    Rule {
        name: "pgscan_proactive",
        commit: "e452872b40e3 \"mm: vmscan: split proactive reclaim statistics from direct reclaim statistics\" (v6.15)",
        has: [N, N, Y, Y],
        what: "proactive reclaim (memory.reclaim) counts pgscan_proactive/pgsteal_proactive instead of pgscan_direct/pgsteal_direct",
        effect: Effect::Rule { at: "mm/vmscan.rs ScanControl::reclaimer_offset" },
    },
    Rule {
        name: "memory_reclaim_swappiness",
        commit: "68cd9050d871 \"mm: add swappiness= arg to memory.reclaim\" (v6.11)",
        has: [N, Y, Y, Y],
        what: "memory.reclaim takes `swappiness=N` after the size; before (6.1), anything after the size is -EINVAL, and an empty write reclaims without limit (page_counter_memparse)",
        effect: Effect::Rule { at: "mm/memcontrol.rs parse_memory_reclaim" },
    },
    Rule {
        name: "memory_reclaim_swappiness_max",
        commit: "\"mm: add swappiness=max arg to memory.reclaim for only anon reclaim\" (Zhongkun He, v6.16; id not identified)",
        has: [N, N, Y, Y],
        what: "memory.reclaim takes `swappiness=max` (anon only); before, -EINVAL",
        effect: Effect::Rule { at: "mm/memcontrol.rs parse_memory_reclaim" },
    },
    Rule {
        name: "memory_reclaim_quarter_batch",
        commit: "287d5fedb377 \"mm: memcg: use larger batches for proactive reclaim\" (between v6.1 and v6.12; release not verified)",
        has: [N, Y, Y, Y],
        what: "each try_to_free_mem_cgroup_pages call of a memory.reclaim write asks for a quarter of what is left; 6.1 asks for all of it",
        effect: Effect::Rule { at: "mm/memcontrol.rs user_proactive_reclaim" },
    },
    Rule {
        name: "vmstat_reclaim_node_stats",
        commit: "\"mm: move pgscan, pgsteal, pgrefill to node stats\" (JP Kobryn; merged by 7.2, mainline id not identified)",
        has: [N, N, N, Y],
        what: "pgscan_*/pgsteal_* of each reclaimer and pgrefill are node statistics: /proc/vmstat counts cgroup reclaim (limit reclaim, memory.reclaim below the root) too; before, only reclaim that is not cgroup reclaim",
        effect: Effect::Rule { at: "mm/memcontrol.rs count_reclaim_event" },
    },
    Rule {
        name: "memcg_partial_walk",
        commit: "6be5e186fd65 \"mm: vmscan: restore incremental cgroup iteration\" (v6.11)",
        has: [N, Y, Y, Y],
        what: "limit and direct reclaim resume the memcg walk at a per-node cookie and stop at the target; before, every memcg each pass",
        effect: Effect::Rule { at: "mm/vmscan.rs do_try_to_free_pages" },
    },
    Rule {
        name: "lru_batch_clears_pg_lru",
        commit: "33dfe9204f29 (v6.11) and 0885ef470560 (v6.13), reverted by afb99e9f5004 and 8d79ed36bfc8 (v6.17; Debian 6.12.49/6.12.57)",
        has: [N, N, N, N],
        what: "a folio queued in an lru_activate or lru_move_tail batch loses PG_lru until the drain: isolation skips it and sort_folio ages it (6.11-6.16; no modeled version has it: there the folio stays isolatable and the drain skips it if reclaim took it)",
        effect: Effect::Rule { at: "mm/swap.rs folio_test_lru" },
    },
    Rule {
        name: "mglru_reclaim_loop_restructure",
        commit: "163bc3d68c9f \"mm/mglru: restructure the reclaim loop\", 12316f7902f8 \"mm/mglru: don't abort scan immediately right after aging\" (7.2; ids from mm-tree logs)",
        has: [N, N, N, Y],
        what: "try_to_shrink_lruvec computes its budget once (get_nr_to_scan no longer ages), ages inside the loop and keeps evicting after it; root reclaim leaves the lruvec after the batch that follows an aging; before, an aging ends the call with nothing evicted",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs try_to_shrink_lruvec" },
    },
    Rule {
        name: "mglru_scan_batch_min_lru_batch",
        commit: "aa6ef5b159dc \"mm/mglru: relocate the LRU scan batch limit to callers\", 6e9be217a3ce \"mm/mglru: use a smaller batch for reclaim\" (7.2; ids from mm-tree logs)",
        has: [N, N, N, Y],
        what: "try_to_shrink_lruvec hands evict_folios at most MIN_LRU_BATCH (64) of its budget at a time, checking should_abort_scan between batches; before, the whole remaining budget",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs eviction_batch" },
    },
    Rule {
        name: "mglru_scan_exact_count",
        commit: "3a72e078b4a3 \"mm/mglru: scan and count the exact number of folios\", 16b475d2ac3c \"mm/mglru: avoid reclaim type fall back when isolation makes no progress\" (7.2; ids from mm-tree logs)",
        has: [N, N, N, Y],
        what: "evict_folios returns the folios scan_folios looked at even when none was isolated, tries the other type only when the first had nothing to scan, runs try_to_inc_min_seq before isolation too, and no longer adds one for an advanced min_seq or answers 0 at two generations",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs evict_folios" },
    },
    Rule {
        name: "mglru_abort_cgroup_reclaim",
        commit: "7.2's reclaim loop rework (commit not identified)",
        has: [N, N, N, Y],
        what: "should_abort_scan ends cgroup (limit, memory.reclaim below the root) reclaim of an lruvec once nr_to_reclaim is met; before, only root reclaim (memcg reclaim never aborted, for fairness)",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs should_abort_scan" },
    },
    Rule {
        name: "memcg_flush_global_threshold",
        commit: "ended by 8d59d2214c23 \"mm: memcg: make stats flushing threshold per-memcg\" and \"mm: memcg: restore subtree stats flushing\" (v6.8)",
        has: [Y, N, N, N],
        what: "a memcg statistics flush is due when the pending updates of the whole machine cross one threshold, and flushes the whole tree; after, per-memcg thresholds and the subtree",
        effect: Effect::Rule { at: "mm/memcontrol.rs flush_scope" },
    },
    Rule {
        name: "memcg_rstat_val_in_pages",
        commit: "\"mm: memcg: normalize the value passed into memcg_rstat_updated()\" (Yosry Ahmed, v6.8 with the flush-threshold series; id not identified)",
        has: [N, Y, Y, Y],
        what: "a statistics update counts toward the flush threshold in pages (memcg_state_val_in_pages: a byte-valued item's change, as the slab objects' per-CPU stock pushes it out, counts its pages, at least 1); before (6.1), memcg_rstat_updated added the change as it came, so a slab stock push of 4.5 KiB counted 4,608 updates",
        effect: Effect::Rule { at: "mm/memcontrol.rs mod_objcg_state" },
    },
    Rule {
        name: "memcg_v1_charge_statistics",
        commit: "ended by \"mm: memcg: put cgroup v1-specific code under a config option\" (Roman Gushchin, v6.11; id not identified): memcg1_charge_statistics and memcg1_uncharge_batch only with CONFIG_MEMCG_V1, which defaults to n and Debian's 6.12 and 7.3 leave off",
        has: [Y, N, N, N],
        what: "each charge counts PGPGIN (mem_cgroup_charge_statistics) and each uncharged folio PGPGOUT (uncharge_batch), memcg events that count toward the statistics flush threshold; after, not built",
        effect: Effect::Rule { at: "mm/memory.rs alloc_charged_page; mm/page_alloc.rs free_folio" },
    },
    Rule {
        name: "memcg_stock_multi",
        commit: "f735eebe55f8 \"memcg: multi-memcg percpu charge cache\" (v6.16)",
        has: [N, N, Y, Y],
        what: "a CPU's charge stock caches up to NR_MEMCG_STOCK (7) memcgs, a refill of an uncached one taking an empty slot or draining a victim, and drain_all_stock drains a CPU's every slot once one holds pages of the subtree; before, one memcg per CPU, drained whenever the CPU charges another",
        effect: Effect::Rule { at: "mm/memcontrol.rs refill_stock, consume_stock, drain_all_stock" },
    },
    Rule {
        name: "memcg_stock_round_robin",
        commit: "\"memcg: use round-robin victim selection in refill_stock\" (Shakeel Butt, 2026, a fix of f735eebe55f8 through mm-hotfixes; mainline id not identified; in Debian's 7.2.12 and 7.3.4, and stable 6.18.y may carry it)",
        has: [N, N, N, Y],
        what: "a full multi-memcg stock gives up its slots in turn (stock->drain_idx); before, one drawn at random (get_random_u32_below)",
        effect: Effect::Rule { at: "mm/memcontrol.rs stock_victim" },
    },
    Rule {
        name: "reclaim_flush_ratelimited",
        commit: "\"memcg: use ratelimited stats flush in the reclaim\" (Shakeel Butt, v6.12 or earlier; id not identified)",
        has: [N, Y, Y, Y],
        what: "reclaim (prepare_scan_control) flushes the memcg statistics only when the periodic flush is late; before (6.1), whenever the threshold is crossed, so inactive_is_low and may_deactivate read fresher sizes",
        effect: Effect::Rule { at: "mm/vmscan.rs prepare_scan_control" },
    },
    Rule {
        name: "shadow_count_flushed_stats",
        commit: "f82e6bf9bb9b \"mm: memcg: use rstat for non-hierarchical stats\" (after v6.1), its flush ratelimited by 417dbd7be383 \"mm: ratelimit stat flush from workingset shrinker\" (v6.8)",
        has: [N, Y, Y, Y],
        what: "the shadow-node shrinker weighs a memcg's shadow nodes against its LRU pages as last flushed (after a flush only when the periodic one is late), so right after a reclaim they can still count pages it no longer has; before (6.1), lruvec_page_state_local summed the per-CPU counters: the lists' sizes then",
        effect: Effect::Rule { at: "mm/workingset.rs count_shadow_nodes" },
    },
    Rule {
        name: "mglru_v61_reclaim_loop",
        commit: "replaced by 77d4459a4a1a \"mm: multi-gen LRU: shuffle should_run_aging()\", 7348cc91821b \"mm: multi-gen LRU: remove aging fairness safeguard\", a579086c99ed \"mm: multi-gen LRU: remove eviction fairness safeguard\" (v6.3)",
        has: [Y, N, N, N],
        what: "6.1's lru_gen_shrink_lruvec loop: get_nr_to_scan stops below memory.min/low, leaves needed aging to lru_gen_age_node for kswapd, and lets another reclaimer age and go on scanning; swappiness 1 for global reclaim that may not swap; memcgs_need_aging cleared after MIN_LRU_BATCH reclaimed without aging; no initial mm_walk but kswapd's",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs lru_gen_shrink_lruvec" },
    },
    Rule {
        name: "mglru_v61_should_abort_scan",
        commit: "replaced by 7348cc91821b, a579086c99ed (v6.3) and 5095a2b23987 \"mm/mglru: try to stop at high watermarks\" (v6.8)",
        has: [Y, N, N, N],
        what: "6.1's should_abort_scan: a reclaimer other than kswapd stops after aging the memcg twice, after its target while swapping, or when dying; cgroup reclaim nowhere else; others go on above priority DEF_PRIORITY - 2, then stop with every zone above its low (kswapd: high) watermark, crediting MIN_LRU_BATCH; asked by 6.1's loop only",
        effect: Effect::Rule { at: "mm/lru_gen/v6_1.rs v61_abort" },
    },
    Rule {
        name: "mglru_v61_kswapd_ages_memcgs",
        commit: "replaced by 8aa420617918 \"mm/mglru: respect min_ttl_ms with memcgs\" (v6.8) and the v6.3 series",
        has: [Y, N, N, N],
        what: "6.1's lru_gen_age_node ages every memcg that needs it (age_lruvec), unless the last eviction cleared memcgs_need_aging (then it skips once), and does not set the initial priority; later it only computes protection, sets the priority and applies min_ttl",
        effect: Effect::Rule { at: "mm/lru_gen/protection.rs lru_gen_age_node" },
    },
    Rule {
        name: "mglru_v61_look_around_in_place",
        commit: "ended between v6.1 and v6.12 (lru_gen_look_around without an mm_walk stopped taking lru_lock; commit not identified)",
        has: [Y, N, N, N],
        what: "6.1's lru_gen_look_around without an mm_walk activates the window's folios of older generations through folio_activate only when fewer than PAGEVEC_SIZE (15) are to be promoted; with more it takes the lru_lock and promotes them in place (folio_update_gen, lru_gen_update_size), counting no PGACTIVATE; later kernels always activate each",
        effect: Effect::Rule { at: "mm/lru_gen/walk.rs lru_gen_look_around" },
    },
    Rule {
        name: "mglru_v61_look_around_sees_target",
        commit: "ended between v6.1 and v6.12 (lru_gen_look_around came to clear the young bit it was called for and return whether it was set; commit not identified)",
        has: [Y, N, N, N],
        what: "6.1's folio_referenced_one calls lru_gen_look_around while the folio's own PTE is still young, so the window's scan meets the folio being reclaimed, isolated, and sets its PG_referenced; folio_check_references then reads a second reference and activates it (PGACTIVATE) where 6.12 keeps it for another trip",
        effect: Effect::Rule { at: "mm/lru_gen/walk.rs lru_gen_check_references" },
    },
    Rule {
        name: "mglru_type_selection_rework",
        commit: "37a260870f2c \"mm/mglru: rework type selection\" (v6.14; the get_tier_idx gains from the same v6.14 series, their commit not identified)",
        has: [N, N, Y, Y],
        what: "isolate_folios takes the type get_type_to_scan's PID weighs over all tiers, and get_tier_idx weighs the set point 2 to 3; before, the obvious choice first (file at swappiness 0 or 1, anon when its oldest generation is older or at 200), then the PID over the two types' first tiers, which also sets the tier, and gains 1 to 2",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs isolate_folios" },
    },
    Rule {
        name: "mglru_protected_to_head",
        commit: "\"mm/mglru: rework workingset protection\" (v6.14 series; mainline id not identified)",
        has: [N, N, Y, Y],
        what: "sort_folio moves a protected folio to the head of the next generation; before, to its tail, so it is the first scanned once that generation is the oldest",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs sort_folio" },
    },
    Rule {
        name: "mglru_placement_from_max_seq",
        commit: "\"mm/mglru: rework workingset protection\" (v6.14 series; mainline id not identified: lru_gen_add_folio's placement became lru_gen_folio_seq)",
        has: [N, N, Y, Y],
        what: "a folio added to the lists is placed from max_seq (PG_active: second youngest, youngest with PG_workingset; otherwise the oldest, second oldest with PG_workingset, never below min_seq); before, PG_active went to the youngest and any other page-cache or swap-cache folio to min_seq + 1 (min_seq when rotated at writeback end or with only MIN_NR_GENS + 1 generations), PG_workingset unread",
        effect: Effect::Rule { at: "mm/lru_gen/folio.rs lru_gen_folio_seq" },
    },
    Rule {
        name: "mglru_rejected_active_if_oldest",
        commit: "\"mm/mglru: rework workingset protection\" (v6.14 series; mainline id not identified: evict_folios' putback asks lru_gen_folio_seq)",
        has: [N, N, Y, Y],
        what: "evict_folios sets PG_active on a folio shrink_folio_list kept only when lru_gen_folio_seq would add it to the oldest generation, clearing its refs and PG_referenced, and retries referenced and locked folios too; before, every kept folio not retried got PG_active and lost its refs, PG_referenced and PG_workingset, except one whose write pageout started (PG_reclaim, dirty or under writeback), which kept them and got PG_referenced back for PG_workingset, and a referenced or locked one was not retried",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs evict_folios_retries, evict_folios_keep_off_oldest" },
    },
    Rule {
        name: "mglru_sort_locked_as_writeback",
        commit: "ended between v6.12 and v6.15 (the rewrite of sort_folio's writeback test; commit not identified)",
        has: [Y, Y, N, N],
        what: "sort_folio moves a locked folio on as one under writeback (next generation, PG_reclaim) instead of trying to isolate it",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs sort_folio_decide" },
    },
    Rule {
        name: "lru_note_cost_unlock_irq",
        commit: "3865301dc58a \"mm: optimize lru_note_cost() by adding lru_note_cost_unlock_irq()\" (v6.17)",
        has: [N, N, Y, Y],
        what: "the putback's lru_lock hold goes on into lru_note_cost_unlock_irq, which records the first level's cost in it and ends it at once for a cost of 0; before, the caller unlocked and lru_note_cost took every level's lock whatever the cost",
        effect: Effect::Rule { at: "mm/vmscan.rs putback_and_note_cost, mm/swap.rs lru_note_cost_unlock_irq" },
    },
    Rule {
        name: "move_folios_to_lru_self_locking",
        commit: "\"mm: vmscan: refactor move_folios_to_lru()\" (Eliminate Dying Memory Cgroup series, v7.0 or v7.1; mainline id not identified)",
        has: [N, N, N, Y],
        what: "move_folios_to_lru takes and releases lru_lock itself, one hold per non-empty list (shrink_active_list's l_active and l_inactive apart), and the caller takes the lruvec's lock again for lru_note_cost_unlock_irq, even for a cost of 0",
        effect: Effect::Rule { at: "mm/vmscan.rs putback_and_note_cost" },
    },
    Rule {
        name: "rotation_cost",
        commit: "0538a82c39e9 \"mm: vmscan: make rotations a secondary factor in balancing anon vs file\" (v6.2)",
        has: [N, Y, Y, Y],
        what: "seed 002's switch: IO weighs 32 times a rotation in lru_note_cost; before, only pages of IO count",
        effect: Effect::Switch,
    },
    Rule {
        name: "lru_add_dead_filter",
        commit: "seed 003, \"filter dead folios in lru_add batches\" (JP Kobryn; merged by 7.2, mainline id not identified)",
        has: [N, N, N, Y],
        what: "seed 003's switch: an lru_add drain frees a folio whose only reference is the batch's without adding it to the LRU",
        effect: Effect::Switch,
    },
    Rule {
        name: "vmstat_scan_cost",
        commit: "seed 000, \"mm/vmscan: reduce lru_lock contention via vmstat-derived scan-balance cost\" (U. Arif; merged for 7.3, mainline id not identified)",
        has: [N, N, N, Y],
        what: "seed 000's switch: scan-balance cost comes from flushed vmstat counters under a per-lruvec cost_lock, not lru_note_cost under lru_lock",
        effect: Effect::Switch,
    },
    Rule {
        name: "mglru_tiers_rework",
        commit: "\"mm/mglru: rework workingset protection\" (Yu Zhao, patch 6/7 of the v6.14 MGLRU series posted 2024-12-07; mainline id not identified: folio_lru_refs, lru_tier_from_refs and LRU_REFS_FLAGS changed together)",
        has: [N, N, Y, Y],
        what: "a folio's refs count PG_referenced as the first access (refs = counter + 1 with PG_referenced, else 0) and PG_workingset alone marks the last tier; LRU_REFS_FLAGS leave PG_workingset, isolate_folio keeps PG_referenced, inc_min_seq counts what it moves as protected, and the eviction token's workingset bit is PG_workingset; before, refs were the counter plus PG_workingset (tier order_base_2(refs + 1)), an access set PG_referenced, then PG_workingset, then the counter, every refs reset cleared PG_workingset too, isolate_folio cleared PG_referenced, inc_min_seq counted nothing, sort_folio counted a maxed folio as protected, and the token's workingset bit was refs != 0",
        effect: Effect::Rule { at: "mm/lru_gen/folio.rs folio_lru_refs, lru_gen_inc_refs; aging.rs folio_inc_gen, inc_min_seq; eviction.rs sort_folio_decide, isolate_folio; workingset.rs lru_gen_eviction, lru_gen_refault_decide" },
    },
    Rule {
        name: "mglru_promote_second_sighting",
        commit: "\"mm/mglru: rework workingset protection\" (Yu Zhao, patch 6/7 of the v6.14 MGLRU series posted 2024-12-07; mainline id not identified: lru_gen_set_refs replaced the classic reference check under MGLRU)",
        has: [N, N, Y, Y],
        what: "a young PTE found by the page-table walk, look-around or eviction's rmap walk only sets PG_referenced the first time (lru_gen_set_refs, folio_update_gen) and promotes or activates the second time; before, get_pfn_folio took folios off the lists too and folio_update_gen promoted at the first young PTE (an isolated folio got PG_referenced), look-around activated a folio of an older generation at once, shrink_folio_list kept a mapped folio with PG_referenced, and folio_check_references took its classic form (activate on a second reference, else keep with PG_referenced)",
        effect: Effect::Rule { at: "mm/lru_gen/aging.rs folio_update_gen; walk.rs get_pfn_folio, walk_update_folio, lru_gen_check_references; mm/vmscan.rs shrink_one_folio" },
    },
    Rule {
        name: "mglru_vmscan_tracepoints",
        commit: "\"mm: multi-gen LRU: reuse some legacy trace events\" (Jaewon Kim, posted October 2023; between v6.1 and v6.12, mainline id not identified: mm-tree logs list it under several ids)",
        has: [N, Y, Y, Y],
        what: "MGLRU fires the classic LRU's vmscan events: evict_folios fires mm_vmscan_lru_shrink_inactive after each shrink_folio_list pass (its retry pass too) and scan_folios mm_vmscan_lru_isolate; before, MGLRU fired neither",
        effect: Effect::Rule { at: "mm/lru_gen/eviction.rs evict_folios, scan_folios" },
    },
    Rule {
        name: "reclaim_slab_credit_root_only",
        commit: "\"mm: vmscan: ignore non-LRU-based reclaim in memcg reclaim\" (Yosry Ahmed, v6.5; mainline id not verified: mm-tree logs list it under two ids)",
        has: [N, Y, Y, Y],
        what: "slab pages a reclaimer frees (shadow nodes' slabs) count toward nr_reclaimed for root reclaim only (flush_reclaim_state); before, shrink_node added reclaim_state->reclaimed_slab for every reclaim, memcg limit and memory.reclaim included",
        effect: Effect::Rule { at: "mm/vmscan.rs flush_reclaim_state" },
    },
    Rule {
        name: "swap_shadow_nodes_shrinkable",
        commit: "5649d113ffce \"swap_state: update shadow_nodes for anonymous page\" (v6.3); \"mm, swap: use the swap table for the swap cache and switch API\" (v6.18, id not identified) replaced the swap cache's xarray",
        has: [N, Y, N, N],
        what: "the swap cache's xarray leaves of shadows only join the root's shadow-node list, so root reclaim's shadow shrinker frees them and later swap-ins are no refaults (6.1: swap shadows stay until their slot is freed; 6.18: they live in the swap table)",
        effect: Effect::Rule { at: "mm/swap_state.rs swap_update_node" },
    },
    Rule {
        name: "shmem_swapin_skip_swapcache",
        commit: "\"mm: shmem: skip swapcache for swapin of synchronous swap device\" (Baolin Wang, v6.14; dated by the mm tree's log, mainline id not identified)",
        has: [N, N, Y, Y],
        what: "a shmem swap-in from a synchronous device (zram) reads the one page, bypassing the swap cache; before, shmem_swapin_cluster reads ahead on every device: swap_cluster_readahead's aligned block of up to 1 << page_cluster slots, its size from the hits of earlier readahead",
        effect: Effect::Rule { at: "mm/shmem.rs shmem_swapin_reads_ahead" },
    },
];

/// Declares [`Rules`], one bool per modeled rule (the field is the rule's name in
/// [`RULES`]), with [`Rules::of`] and [`Rules::set`] generated from the one list.
macro_rules! modeled_rules {
    ($($(#[doc = $doc:literal])* $name:ident,)*) => {
        /// The modeled rules in force for a run (read where their paths run).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub struct Rules {
            $($(#[doc = $doc])* pub $name: bool,)*
        }

        impl Rules {
            /// The rules version `v` has.
            pub fn of(v: KernelVersion) -> Rules {
                let on = |name: &str| rule(name).is_some_and(|r| r.in_version(v));
                Rules { $($name: on(stringify!($name)),)* }
            }

            /// Set the modeled rule `name`; false when no such modeled rule exists.
            pub fn set(&mut self, name: &str, on: bool) -> bool {
                match name {
                    $(stringify!($name) => self.$name = on,)*
                    _ => return false,
                }
                true
            }
        }
    };
}

modeled_rules! {
    /// mglru_aging_feedback_rework: should_run_aging's trigger at three generations.
    mglru_aging_feedback_rework,
    /// mglru_scan_budget_nr_to_scan: scan_folios bounded by nr_to_scan.
    mglru_scan_budget_nr_to_scan,
    /// mglru_proportional_protection: get_nr_to_scan scaled by memory.low/min.
    mglru_proportional_protection,
    /// folio_batch_size_31: the per-CPU LRU batch capacity is 31 (else 15).
    folio_batch_size_31,
    /// mglru_memcg_lru: MGLRU root reclaim walks the memcg LRU (lru_gen_shrink_node);
    /// else 6.1's shrink_node_memcgs walk of every memcg, lru_gen_shrink_lruvec each.
    mglru_memcg_lru,
    /// mglru_fault_add_active_workingset_only: folio_add_lru in a fault sets PG_active
    /// only on a PG_workingset folio, PG_referenced on the others.
    mglru_fault_add_active_workingset_only,
    /// mglru_placement_referenced: lru_gen_folio_seq lifts PG_referenced cache folios.
    mglru_placement_referenced,
    /// mglru_set_refs_mark_accessed: lru_gen_set_refs counts a reference before
    /// PG_workingset.
    mglru_set_refs_mark_accessed,
    /// mglru_refault_activate_workingset: lru_gen_refault counts WORKINGSET_ACTIVATE only
    /// for a workingset shadow.
    mglru_refault_activate_workingset,
    /// mglru_refault_recent_window: recent = within MAX_NR_GENS of max_seq (else the
    /// min_seq it was evicted at).
    mglru_refault_recent_window,
    /// mglru_refault_counts_all: every same-lruvec refault counts WORKINGSET_REFAULT and
    /// recent ones WORKINGSET_ACTIVATE (else 6.1: recent ones a refault, none an activation).
    mglru_refault_counts_all,
    /// mglru_protect_counts_activate: sort_folio counts protected folios as
    /// WORKINGSET_ACTIVATE (6.1).
    mglru_protect_counts_activate,
    /// mglru_refault_activate_in_fault: WORKINGSET_ACTIVATE only for a refault in a fault.
    mglru_refault_activate_in_fault,
    /// mglru_refault_restore_rework: restore from the shadow's workingset bit, else refs
    /// back (else: restore in a fault or at the top refs, every refs bit).
    mglru_refault_restore_rework,
    /// pgscan_proactive: memory.reclaim counts in the PROACTIVE pgscan/pgsteal items
    /// (else in the DIRECT ones).
    pgscan_proactive,
    /// memory_reclaim_swappiness: memory.reclaim parses `swappiness=N` tokens (else the
    /// size alone, 6.1's page_counter_memparse).
    memory_reclaim_swappiness,
    /// memory_reclaim_swappiness_max: `swappiness=max` is taken.
    memory_reclaim_swappiness_max,
    /// memory_reclaim_quarter_batch: each call asks for a quarter of the remainder.
    memory_reclaim_quarter_batch,
    /// vmstat_reclaim_node_stats: /proc/vmstat counts cgroup reclaim's pgscan, pgsteal
    /// and pgrefill too.
    vmstat_reclaim_node_stats,
    /// memcg_partial_walk: limit and direct reclaim resume the memcg walk at a per-node
    /// cookie and stop at the target (else every memcg each pass, 6.1).
    memcg_partial_walk,
    /// lru_batch_clears_pg_lru: a folio queued in an lru_activate or lru_move_tail batch
    /// reads as off the LRU (PG_lru cleared) until the batch drains.
    lru_batch_clears_pg_lru,
    /// mglru_reclaim_loop_restructure: try_to_shrink_lruvec ages inside its loop and
    /// keeps evicting (7.2's loop).
    mglru_reclaim_loop_restructure,
    /// mglru_scan_batch_min_lru_batch: eviction batches of at most MIN_LRU_BATCH.
    mglru_scan_batch_min_lru_batch,
    /// mglru_scan_exact_count: evict_folios returns what it scanned, isolated or not.
    mglru_scan_exact_count,
    /// mglru_abort_cgroup_reclaim: should_abort_scan applies to cgroup reclaim too.
    mglru_abort_cgroup_reclaim,
    /// memcg_flush_global_threshold: a memcg statistics flush tests the machine-wide
    /// update count and flushes the whole tree (6.1).
    memcg_flush_global_threshold,
    /// memcg_rstat_val_in_pages: a byte-valued statistics update counts its pages toward
    /// the flush threshold (else its bytes, 6.1).
    memcg_rstat_val_in_pages,
    /// memcg_v1_charge_statistics: a charge counts PGPGIN and an uncharged folio PGPGOUT
    /// toward the flush threshold (6.1; later only with CONFIG_MEMCG_V1).
    memcg_v1_charge_statistics,
    /// memcg_stock_multi: a CPU's charge stock caches up to seven memcgs (else one).
    memcg_stock_multi,
    /// memcg_stock_round_robin: a full stock's victim slot in turn (else at random).
    memcg_stock_round_robin,
    /// reclaim_flush_ratelimited: prepare_scan_control flushes only when the periodic
    /// flush is late (else whenever the threshold is crossed, 6.1).
    reclaim_flush_ratelimited,
    /// shadow_count_flushed_stats: count_shadow_nodes reads the flushed local LRU sizes,
    /// after a ratelimited flush (else the exact sizes, 6.1).
    shadow_count_flushed_stats,
    /// mglru_v61_reclaim_loop: lru_gen_shrink_lruvec runs 6.1's loop.
    mglru_v61_reclaim_loop,
    /// mglru_v61_should_abort_scan: 6.1's loop stops by 6.1's should_abort_scan.
    mglru_v61_should_abort_scan,
    /// mglru_v61_kswapd_ages_memcgs: kswapd's lru_gen_age_node ages memcgs (6.1).
    mglru_v61_kswapd_ages_memcgs,
    /// mglru_v61_look_around_in_place: look-around without a walk promotes 15 or more
    /// folios in place under the lru_lock instead of activating each (6.1).
    mglru_v61_look_around_in_place,
    /// mglru_v61_look_around_sees_target: 6.1's look-around runs before the folio's own
    /// young bit is cleared and marks the folio PG_referenced.
    mglru_v61_look_around_sees_target,
    /// swap_shadow_nodes_shrinkable: the swap cache's leaves of shadows go on the root's
    /// shadow-node list.
    swap_shadow_nodes_shrinkable,
    /// lru_note_cost_unlock_irq: the cost is noted in the putback's hold, a cost of 0 takes
    /// no further lock (else every level's lock whatever the cost).
    lru_note_cost_unlock_irq,
    /// move_folios_to_lru_self_locking: one putback hold per non-empty list, then a fresh
    /// hold for the cost.
    move_folios_to_lru_self_locking,
    /// mglru_type_selection_rework: isolate_folios' type from the PID over all tiers, tier
    /// gains 2 to 3 (else the obvious choice first, first tiers, gains 1 to 2).
    mglru_type_selection_rework,
    /// mglru_protected_to_head: sort_folio puts protected folios at the head of the next
    /// generation (else its tail).
    mglru_protected_to_head,
    /// mglru_sort_locked_as_writeback: sort_folio moves locked folios on as under writeback
    /// (6.1, 6.12).
    mglru_sort_locked_as_writeback,
    /// mglru_placement_from_max_seq: lru_gen_folio_seq places an added folio from max_seq
    /// and reads PG_workingset (else lru_gen_add_folio's 6.1-6.12 placement).
    mglru_placement_from_max_seq,
    /// mglru_rejected_active_if_oldest: evict_folios activates a kept folio only if it
    /// would land in the oldest generation (else every one, losing PG_workingset).
    mglru_rejected_active_if_oldest,
    /// mglru_tiers_rework: refs count PG_referenced first, PG_workingset is the last tier
    /// (else 6.12's: refs = counter + PG_workingset, tier order_base_2(refs + 1)).
    mglru_tiers_rework,
    /// mglru_promote_second_sighting: a young PTE promotes at its second sighting (else at
    /// the first; the classic folio_check_references under MGLRU).
    mglru_promote_second_sighting,
    /// shmem_swapin_skip_swapcache: a shmem swap-in from a synchronous device reads one
    /// page (else swap_cluster_readahead on every device).
    shmem_swapin_skip_swapcache,
    /// reclaim_slab_credit_root_only: flush_reclaim_state credits freed slab pages to root
    /// reclaim only (else to every reclaim, 6.1).
    reclaim_slab_credit_root_only,
    /// mglru_vmscan_tracepoints: evict_folios fires mm_vmscan_lru_shrink_inactive (else
    /// MGLRU fires no vmscan event, 6.1).
    mglru_vmscan_tracepoints,
}

impl Default for Rules {
    fn default() -> Self {
        Rules::of(KernelVersion::default())
    }
}

impl Rules {
    /// The per-CPU LRU batch capacity (PAGEVEC_SIZE before v6.10, FOLIO_BATCH_SIZE after).
    pub fn folio_batch_size(&self) -> usize {
        if self.folio_batch_size_31 {
            crate::mm::FOLIO_BATCH_SIZE
        } else {
            crate::mm::PAGEVEC_SIZE
        }
    }
}

/// The default version's rules as a `&'static` (for unit tests of functions that take
/// `&Rules`).
#[cfg(test)]
pub(crate) static DEFAULT_RULES: std::sync::LazyLock<Rules> =
    std::sync::LazyLock::new(Rules::default);

/// The rule named `name`.
pub fn rule(name: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.name == name)
}

/// The names a scenario's `kernel.rules` may set: every rule and switch.
pub fn settable() -> Vec<&'static str> {
    RULES.iter().map(|r| r.name).collect()
}

/// Give each switch that is a kernel's own behavior (an `Effect::Switch` rule) its
/// default from the scenario's version, where `[variants]` leaves it unset: in the
/// scenario as a JSON value, before it is read. `kernel.rules.NAME` sets the default too.
/// An unknown version is left to the scenario's reader (whose message lists them).
pub fn fill_switch_defaults(scenario: &mut serde_json::Value) {
    let Some(obj) = scenario.as_object_mut() else {
        return;
    };
    let kernel = obj.get("kernel");
    let version = match kernel.and_then(|k| k.get("version")) {
        None => KernelVersion::default(),
        Some(v) => match KernelVersion::deserialize(v) {
            Ok(v) => v,
            Err(_) => return,
        },
    };
    let explicit: Vec<(&'static str, bool)> = RULES
        .iter()
        .filter(|r| r.effect == Effect::Switch)
        .map(|r| {
            let set = kernel
                .and_then(|k| k.get("rules"))
                .and_then(|rs| rs.get(r.name))
                .and_then(|b| b.as_bool());
            (r.name, set.unwrap_or(r.in_version(version)))
        })
        .collect();
    let variants = obj
        .entry("variants")
        .or_insert_with(|| serde_json::Value::Object(Default::default()));
    if let Some(vs) = variants.as_object_mut() {
        for (name, on) in explicit {
            vs.entry(name).or_insert(serde_json::Value::Bool(on));
        }
    }
}

/// The registry as JSON (for `reclaimsim versions`): the versions, oldest first, and
/// every rule with the versions that have it.
pub fn registry_json() -> String {
    let versions: Vec<_> = VERSIONS
        .iter()
        .map(|v| serde_json::json!({"name": v.name(), "source": v.source(), "default": *v == KernelVersion::default()}))
        .collect();
    let rules: Vec<_> = RULES
        .iter()
        .map(|r| {
            let (kind, at) = match r.effect {
                Effect::Rule { at } => ("rule", at),
                Effect::Switch => ("switch", "variant.rs (the switch's default)"),
            };
            let has: Vec<&str> = VERSIONS.iter().filter(|v| r.in_version(**v)).map(|v| v.name()).collect();
            serde_json::json!({"name": r.name, "commit": r.commit, "what": r.what, "kind": kind, "at": at, "versions": has})
        })
        .collect();
    serde_json::json!({"versions": versions, "rules": rules}).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn release_strings_run_as_the_newest_modeled_version_not_above_them() {
        use KernelVersion::*;
        assert_eq!(
            KernelVersion::of_release("6.12.95+deb12-cloud-amd64"),
            Some((V6_12, true))
        );
        assert_eq!(
            KernelVersion::of_release("6.1.0-41-amd64"),
            Some((V6_1, true))
        );
        assert_eq!(KernelVersion::of_release("6.11.2"), Some((V6_1, false)));
        assert_eq!(KernelVersion::of_release("6.18.0"), Some((V6_18, true)));
        assert_eq!(
            KernelVersion::of_release("7.2.13-amd64"),
            Some((V6_18, false))
        );
        assert_eq!(KernelVersion::of_release("7.10.1"), Some((V7_3, false)));
        assert_eq!(KernelVersion::of_release("5.15.0"), None);
        assert_eq!(KernelVersion::of_release("linux"), None);
    }

    #[test]
    fn every_rule_is_named_once_and_every_modeled_rule_can_be_set() {
        let mut names: Vec<_> = RULES.iter().map(|r| r.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), RULES.len());
        for r in RULES {
            let mut rules = Rules::default();
            let modeled = matches!(r.effect, Effect::Rule { .. });
            assert_eq!(
                rules.set(r.name, !r.in_version(KernelVersion::V6_18)),
                modeled,
                "{}",
                r.name
            );
            if modeled {
                assert_ne!(rules, Rules::default(), "{} changes nothing", r.name);
            }
        }
    }

    #[test]
    fn switch_defaults_come_from_the_version_unless_set() {
        let fill = |v: serde_json::Value| {
            let mut v = v;
            fill_switch_defaults(&mut v);
            v["variants"].clone()
        };
        let d = fill(serde_json::json!({}));
        assert_eq!(d["rotation_cost"], true);
        assert_eq!(d["vmstat_scan_cost"], false);
        let old = fill(serde_json::json!({"kernel": {"version": "6.1"}}));
        assert_eq!(old["rotation_cost"], false);
        let new = fill(serde_json::json!({"kernel": {"version": "7.3"}}));
        assert_eq!(
            (
                new["vmstat_scan_cost"].clone(),
                new["lru_add_dead_filter"].clone()
            ),
            (true.into(), true.into())
        );
        let set = fill(
            serde_json::json!({"kernel": {"version": "6.1"}, "variants": {"rotation_cost": true}}),
        );
        assert_eq!(set["rotation_cost"], true);
        let by_rule = fill(
            serde_json::json!({"kernel": {"version": "6.18", "rules": {"rotation_cost": false}}}),
        );
        assert_eq!(by_rule["rotation_cost"], false);
    }
}
