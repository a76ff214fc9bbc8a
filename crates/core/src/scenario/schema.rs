//! The machine, kernel and cgroup tables of a scenario, and the default values that
//! several tables share.

use super::units::{Dur, Limit, Size};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// NUMA nodes, 1..=8. CPUs and memory are split evenly; each node has one zone (Normal).
    #[serde(default = "one")]
    pub nodes: u32,
    /// CPUs in the machine (all nodes), 1..=4096. Node n owns CPUs [n*cpus/nodes, (n+1)*cpus/nodes).
    pub cpus: u32,
    /// Hardware threads per core (SMT), 1..=8: CPUs are hardware threads, and each node's
    /// CPUs are its cores' first threads, then their second threads, and so on
    /// (engine/coherence.rs); the threads of a core share its caches, so a line between
    /// them costs `cacheline_transfer_smt`. Each node's CPUs must be a multiple of it.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub threads_per_core: u32,
    /// Memory of each node [bytes].
    pub memory_per_node: Size,
    /// The swap device; absent means no swap.
    #[serde(default)]
    pub swap: Option<Swap>,
    /// A built-in hardware profile (`reclaimsim profiles`): published figures of a machine
    /// class for the cost table. Below `costs_profile` and `[costs]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// The kernel runs as a KVM guest with paravirtual spinlocks (its boot log says
    /// "kvm-guest: PV spinlocks enabled"): __pv_queued_spin_lock_slowpath queues every
    /// waiter, so each one fires the contention tracepoints an observer counts
    /// (engine/perf_lock.rs). Only what is traced changes; waiting is modeled as native.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paravirt_spinlocks: bool,
}

pub(crate) fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapDevice {
    /// Synchronous (zram-like): a pageout completes inside shrink_folio_list.
    Zram,
    /// Asynchronous block device: the folio stays under writeback for `write_latency`.
    Ssd,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Swap {
    /// Swap space [bytes].
    pub size: Size,
    /// `zram` (synchronous) or `ssd` (asynchronous block device).
    #[serde(default = "default_swap_device")]
    pub device: SwapDevice,
    /// Time to read one page back [ns]; default from the cost table (`zram_read` or `ssd_read_latency`).
    #[serde(default)]
    pub read_latency: Option<Dur>,
    /// Time to write one page out [ns]; default from the cost table (`zram_write` or `ssd_write_latency`).
    #[serde(default)]
    pub write_latency: Option<Dur>,
    /// The block device reports itself rotational (/sys/block/DEV/queue/rotational = 1):
    /// swap readahead then goes by swap slots, not by the faulting VMA. `ssd` only.
    #[serde(default)]
    pub rotational: bool,
}

fn default_swap_device() -> SwapDevice {
    SwapDevice::Ssd
}

/// Kernel knobs, named as in /proc/sys/vm.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    /// vm.swappiness, 0..=200.
    #[serde(default = "default_swappiness")]
    pub swappiness: u32,
    /// vm.min_free_kbytes; absent = the kernel's default, clamp(sqrt(16 * lowmem_kbytes), 128, 262144).
    #[serde(default)]
    pub min_free_kbytes: Option<u64>,
    /// vm.watermark_scale_factor, 1..=3000 (units of 0.01% of the zone).
    #[serde(default = "default_wsf")]
    pub watermark_scale_factor: u32,
    /// The memory_recursiveprot cgroup2 mount option.
    #[serde(default)]
    pub memory_recursiveprot: bool,
    /// When the periodic memcg statistics flush (flush_memcg_stats_dwork, every 2 s) first
    /// runs, 0..2s after the start; absent = drawn from the seed (the work was queued at
    /// boot, so its phase relative to a workload is arbitrary).
    #[serde(default)]
    pub memcg_flush_phase: Option<Dur>,
    /// The memory controller's cgroup version: 2 (the unified hierarchy) or 1. Version 1
    /// has memory.swappiness but no memory.high/low/min, and its limit reclaim skips the
    /// isolation throttle (writeback_throttling_sane).
    #[serde(default = "default_cgroup_version")]
    pub cgroup_version: u32,
    /// The LRU: "classic" (active and inactive lists) or "mglru" (the multi-gen LRU,
    /// lru_gen).
    #[serde(default)]
    pub lru: LruKind,
    /// The knobs of /sys/kernel/mm/lru_gen (with `lru = "mglru"`).
    #[serde(default)]
    pub lru_gen: LruGenKnobs,
    /// The kernel version the model is: "6.1", "6.12", "6.18" (default) or "7.3"; each the
    /// set of rules it has (crate::versions, docs/versions.md).
    #[serde(default)]
    pub version: crate::versions::KernelVersion,
    /// Rules set one by one, over the version's (`kernel.rules.NAME = true|false`): a
    /// modeled rule or a switch that is a kernel's own behavior.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub rules: std::collections::BTreeMap<String, bool>,
}

impl Kernel {
    /// The modeled rules in force: the version's, then `rules`' settings.
    pub fn rules(&self) -> crate::versions::Rules {
        let mut r = crate::versions::Rules::of(self.version);
        for (name, on) in &self.rules {
            r.set(name, *on);
        }
        r
    }
}

/// Which LRU the kernel runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LruKind {
    #[default]
    Classic,
    Mglru,
}

impl LruKind {
    /// The value as a scenario spells it (`kernel.lru`).
    pub fn name(self) -> &'static str {
        match self {
            LruKind::Classic => "classic",
            LruKind::Mglru => "mglru",
        }
    }
}

/// /sys/kernel/mm/lru_gen/{enabled,min_ttl_ms}.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LruGenKnobs {
    /// The capability bitmask of `enabled`: 0x1 the core, 0x2 the page-table walk of
    /// aging, 0x4 clearing young bits in non-leaf PMD entries. Absent: 0x7 with
    /// `lru = "mglru"` (the default of a CONFIG_LRU_GEN_ENABLED x86 kernel).
    #[serde(default)]
    pub enabled: Option<u32>,
    /// `min_ttl_ms`: kswapd OOM-kills when no memcg's oldest generation is older than
    /// this (0: off).
    #[serde(default)]
    pub min_ttl_ms: u64,
}

impl Kernel {
    /// The lru_gen capability bits in effect (0 with the classic LRU).
    pub fn lru_gen_caps(&self) -> u32 {
        match self.lru {
            LruKind::Classic => 0,
            LruKind::Mglru => self.lru_gen.enabled.unwrap_or(0x7),
        }
    }
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            swappiness: default_swappiness(),
            min_free_kbytes: None,
            watermark_scale_factor: default_wsf(),
            memory_recursiveprot: false,
            memcg_flush_phase: None,
            cgroup_version: default_cgroup_version(),
            lru: LruKind::Classic,
            lru_gen: LruGenKnobs::default(),
            version: Default::default(),
            rules: Default::default(),
        }
    }
}

fn default_cgroup_version() -> u32 {
    2
}

fn default_swappiness() -> u32 {
    60
}
fn default_wsf() -> u32 {
    10
}

/// One cgroup. `memory.max = "512M"` in TOML is the dotted key of the `memory` table.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// Absolute path, e.g. `/workload/leaf`; its parent must be listed before it (or be `/`).
    pub path: String,
    #[serde(default)]
    pub memory: CgroupMemory,
    /// This many cgroups like this one, in order, `{i}` in the path standing for 0, 1, ...
    /// (e.g. 128 memcgs `/memcg{i}` under the root); expanded when the scenario is read.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub copies: u32,
}

pub(crate) fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The most copies a `copies` key may ask for (the cgroup limit).
pub(crate) const MAX_COPIES: u32 = 4095;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupMemory {
    /// memory.max: hard limit; reclaim, then OOM, above it.
    #[serde(default)]
    pub max: Option<Limit>,
    /// memory.high: throttle and reclaim above it.
    #[serde(default)]
    pub high: Option<Limit>,
    /// memory.low: best-effort protection.
    #[serde(default)]
    pub low: Option<Size>,
    /// memory.min: hard protection.
    #[serde(default)]
    pub min: Option<Size>,
    /// memory.swappiness (cgroup v1 knob); absent = inherit vm.swappiness.
    #[serde(default)]
    pub swappiness: Option<u32>,
    /// memory.swap.* (cgroup v2): `memory.swap.max = "256M"` in TOML.
    #[serde(default)]
    pub swap: CgroupSwap,
}

/// A cgroup's swap knobs (cgroup v2).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSwap {
    /// memory.swap.max: the most swap the cgroup's subtree may use (bytes or "max").
    #[serde(default)]
    pub max: Option<Limit>,
}

/// `/`, the root cgroup: a table's default cgroup.
pub(crate) fn root_path() -> String {
    "/".into()
}

pub(crate) fn one_u64() -> u64 {
    1
}

pub(crate) fn yes() -> bool {
    true
}

/// The parent of a cgroup path ("/a/b" -> "/a", "/a" -> "/").
pub fn parent_path(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}
