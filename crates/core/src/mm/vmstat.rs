//! Counter items and their /proc/vmstat names (mm/vmstat.c's vmstat_text, trimmed to what
//! the model maintains). State items live per lruvec (node_stat_item); events are global
//! (vm_event_item) with a per-memcg copy (memcg_vm_event_stat).
//!
//! Simplified: global counters are exact (no per-CPU s8 diffs and thresholds); memcg
//! hierarchical views are refreshed by the rstat flush (see memcontrol.rs).

macro_rules! items {
    ($enum:ident, $nr:ident, $names:ident, $($v:ident => $n:literal,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        #[repr(u8)]
        pub enum $enum { $($v,)* }
        pub const $nr: usize = [$($n,)*].len();
        /// The kernel's name of each item, in enum order.
        pub const $names: [&str; $nr] = [$($n,)*];
    };
}

items!(NodeStat, NR_NODE_STAT, NODE_STAT_NAMES,
    NrInactiveAnon => "nr_inactive_anon",
    NrActiveAnon => "nr_active_anon",
    NrInactiveFile => "nr_inactive_file",
    NrActiveFile => "nr_active_file",
    NrUnevictable => "nr_unevictable",
    NrIsolatedAnon => "nr_isolated_anon",
    NrIsolatedFile => "nr_isolated_file",
    WorkingsetRefaultAnon => "workingset_refault_anon",
    WorkingsetRefaultFile => "workingset_refault_file",
    WorkingsetActivateAnon => "workingset_activate_anon",
    WorkingsetActivateFile => "workingset_activate_file",
    WorkingsetRestoreAnon => "workingset_restore_anon",
    WorkingsetRestoreFile => "workingset_restore_file",
    NrAnonMapped => "nr_anon_pages",
    NrFilePages => "nr_file_pages",
    NrFileMapped => "nr_mapped",
    NrSwapcache => "nr_swapcached",
    NrWriteback => "nr_writeback",
    WorkingsetNodereclaim => "workingset_nodereclaim",
    PgrotateAnon => "pgrotate_anon",
    PgrotateFile => "pgrotate_file",
    PgreclaimPageoutAnon => "pgreclaim_pageout_anon",
    PgreclaimPageoutFile => "pgreclaim_pageout_file",
);

items!(VmEvent, NR_VM_EVENTS, VM_EVENT_NAMES,
    Pgalloc => "pgalloc_normal",
    Pgfree => "pgfree",
    Pgactivate => "pgactivate",
    Pgdeactivate => "pgdeactivate",
    Pgfault => "pgfault",
    Pgmajfault => "pgmajfault",
    Pgrefill => "pgrefill",
    PgstealKswapd => "pgsteal_kswapd",
    PgstealDirect => "pgsteal_direct",
    PgstealProactive => "pgsteal_proactive",
    PgscanKswapd => "pgscan_kswapd",
    PgscanDirect => "pgscan_direct",
    PgscanProactive => "pgscan_proactive",
    PgscanDirectThrottle => "pgscan_direct_throttle",
    PgscanAnon => "pgscan_anon",
    PgscanFile => "pgscan_file",
    PgstealAnon => "pgsteal_anon",
    PgstealFile => "pgsteal_file",
    Pgrotated => "pgrotated",
    Pswpin => "pswpin",
    Pswpout => "pswpout",
    Pageoutrun => "pageoutrun",
    KswapdLowWmarkHitQuickly => "kswapd_low_wmark_hit_quickly",
    KswapdHighWmarkHitQuickly => "kswapd_high_wmark_hit_quickly",
    Allocstall => "allocstall_normal",
    OomKill => "oom_kill",
    SwapRa => "swap_ra",
    SwapRaHit => "swap_ra_hit",
);

/// LRU list index -> its state item (NR_LRU_BASE + lru).
pub const LRU_STAT: [NodeStat; 5] = [
    NodeStat::NrInactiveAnon,
    NodeStat::NrActiveAnon,
    NodeStat::NrInactiveFile,
    NodeStat::NrActiveFile,
    NodeStat::NrUnevictable,
];
