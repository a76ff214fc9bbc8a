//! The memory cgroup: page counters, charge with its per-CPU stock, memory.max/high/low/min,
//! effective protection, the reclaim iterator and statistics with rstat-style flushing.
//!
//! Models mm/memcontrol.c and mm/page_counter.c (cgroup v2 semantics, plus the v1 per-memcg
//! swappiness knob). Simplified:
//! - the per-CPU charge stock (memcg_stock_pcp) holds one memcg, or seven from 6.16 (rule
//!   `memcg_stock_multi`); drain_all_stock drains at once, where the kernel queues the
//!   other CPUs' drains on their kworkers;
//! - no kmem, socket or slab charging; swap is counted (memory.swap.current) but not limited;
//! - rstat: per-CPU deltas are not modeled one by one; exact local counters are kept and the
//!   hierarchical view that reclaim reads (`lruvec_page_state`) is recomputed by a flush,
//!   which runs periodically every FLUSH_TIME (2 s) like flush_memcg_stats_dwork, and on
//!   demand when pending updates exceed MEMCG_CHARGE_BATCH * nr_cpus (memcg_vmstats_needs_flush).

use super::vmscan::MEMCG_RECLAIM_MAY_SWAP;
use super::vmstat::{VmEvent, NR_NODE_STAT, NR_VM_EVENTS};
use super::{LruvecId, MemcgId, Mm, MEMCG_CHARGE_BATCH};
use crate::engine::{CacheLine, Time};

/// memory.events items.
#[derive(Debug, Clone, Copy)]
#[repr(u8)]
pub enum MemcgEvent {
    Low = 0,
    High = 1,
    Max = 2,
    Oom = 3,
    OomKill = 4,
}
pub const MEMCG_EVENT_NAMES: [&str; 5] = ["low", "high", "max", "oom", "oom_kill"];

/// NR_MEMCG_STOCK: the memcgs one CPU's charge stock caches from 6.16 (rule
/// memcg_stock_multi); one before.
pub const NR_MEMCG_STOCK: usize = 7;

/// A stock slot caching no memcg (the kernel's NULL): the root's id, which is never
/// charged, so never stocked.
const STOCK_EMPTY: MemcgId = 0;

/// memcg_stock_pcp: one CPU's pre-charged pages, per cached memcg.
#[derive(Debug, Clone, Copy, Default)]
pub struct MemcgStock {
    pub cached: [MemcgId; NR_MEMCG_STOCK],
    /// Pages of each slot (at most a batch, MEMCG_CHARGE_BATCH, as the kernel's uint8_t).
    pub nr_pages: [u8; NR_MEMCG_STOCK],
    /// The next victim of a full stock (rule memcg_stock_round_robin).
    pub drain_idx: u8,
}

/// Periodic flush interval of memcg statistics (FLUSH_TIME = 2 * HZ) [ns].
pub const FLUSH_TIME: Time = 2_000_000_000;

/// Reclaim iterator state of one (walk root, node): struct mem_cgroup_reclaim_iter.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReclaimIter {
    pub position: Option<MemcgId>,
    pub generation: u32,
}

/// A walker's cookie: struct mem_cgroup_reclaim_cookie.
#[derive(Debug, Clone, Copy)]
pub struct ReclaimCookie {
    pub node: u32,
    pub generation: u32,
}

/// struct mem_cgroup, trimmed to what reclaim reads.
pub struct Memcg {
    pub id: MemcgId,
    pub path: String,
    pub parent: Option<MemcgId>,
    pub children: Vec<MemcgId>,
    /// page_counter.usage [pages] (memory.current).
    pub usage: u64,
    /// memory.peak [pages].
    pub peak: u64,
    /// memory.max / memory.high [pages] (u64::MAX = "max").
    pub max: u64,
    pub high: u64,
    /// memory.low / memory.min [pages].
    pub low: u64,
    pub min: u64,
    /// Effective protection, computed by mem_cgroup_calculate_protection [pages].
    pub elow: u64,
    pub emin: u64,
    /// Swap slots charged (memory.swap.current) [pages], local.
    pub swap_usage: u64,
    /// The swap page counter: slots charged to this memcg's subtree [pages], and its
    /// limit (memory.swap.max; u64::MAX = "max").
    pub swap_hier: u64,
    pub swap_max: u64,
    /// Event updates of this memcg (count_memcg_events) not yet flushed; with its
    /// lruvecs' `rstat_updates`, its share of rstat's stats_updates
    /// (`Mm::memcg_stats_need_flush`).
    pub stats_updates: u64,
    /// Pages charged for kernel memory (slab objects and page tables), local; part of
    /// `usage` but on no LRU.
    pub kmem_pages: u64,
    /// Bytes of charged pages not yet handed to slab objects (the obj_cgroup byte stock).
    pub obj_stock_bytes: u64,
    /// Bytes of radix_tree_node (xa_node) slab objects of the page cache, local
    /// (memory.stat slab_reclaimable).
    pub slab_reclaimable_bytes: u64,
    /// Bytes of PTE page tables, local (memory.stat pagetables).
    pub pagetables_bytes: u64,
    /// The slab statistics' byte cache of the object stock (memcg_stock_pcp's
    /// nr_slab_reclaimable_b): changes of slab_reclaimable not yet pushed to the
    /// statistics (`Mm::mod_objcg_state`).
    pub slab_stat_bytes: i64,
    /// The memcg's part of the shadow-node list_lru: leaf xarray nodes of its files that
    /// hold shadow entries only, oldest first, as (file, leaf, stamp) (entries whose stamp
    /// is stale are skipped); how many are current; the shrinker's deferred work.
    pub shadow_nodes: std::collections::VecDeque<(u32, u32, u32)>,
    pub nr_shadow_nodes: u64,
    pub shadow_deferred: u64,
    /// Resolved swappiness (v1 memory.swappiness, inherited; else vm.swappiness).
    pub swappiness: u32,
    /// memory.events, local.
    pub events: [u64; 5],
    /// Local vm events (memcg_vm_event_stat).
    pub vm_events: [u64; NR_VM_EVENTS],
    /// Lruvec per node.
    pub lruvecs: Vec<super::LruvecId>,
    /// Reclaim iterators per node, for walks rooted here.
    pub iter: Vec<ReclaimIter>,
    /// The page counter's cache line.
    pub counter_line: CacheLine,
    /// This memcg and its ancestors up to the root (for page-counter walks).
    pub ancestors: Vec<MemcgId>,
    /// Shared lines of the memcg statistics, per line group of counter items
    /// (StatKind::line): [local, hierarchical] atomics of the batched schemes. The lruvec
    /// statistics have their own lines in each node's lruvec (Lruvec::stat_lines).
    pub stat_lines: [[CacheLine; 2]; NR_STAT_LINES],
    /// rstat's stats_updates atomic.
    pub stat_updates_line: CacheLine,
}

impl Memcg {
    pub fn new(id: MemcgId, path: String, parent: Option<MemcgId>, nodes: usize) -> Self {
        Memcg {
            id,
            path,
            parent,
            children: Vec::new(),
            usage: 0,
            peak: 0,
            max: u64::MAX,
            high: u64::MAX,
            low: 0,
            min: 0,
            elow: 0,
            emin: 0,
            swap_usage: 0,
            swap_hier: 0,
            swap_max: u64::MAX,
            kmem_pages: 0,
            stats_updates: 0,
            obj_stock_bytes: 0,
            slab_reclaimable_bytes: 0,
            pagetables_bytes: 0,
            slab_stat_bytes: 0,
            shadow_nodes: Default::default(),
            nr_shadow_nodes: 0,
            shadow_deferred: 0,
            swappiness: 60,
            events: [0; 5],
            vm_events: [0; NR_VM_EVENTS],
            lruvecs: Vec::with_capacity(nodes),
            iter: vec![ReclaimIter::default(); nodes],
            counter_line: CacheLine::default(),
            ancestors: vec![id],
            stat_lines: Default::default(),
            stat_updates_line: CacheLine::default(),
        }
    }
}

impl Mm {
    /// memcg_rstat_updated(): `n` more statistics updates of `memcg` toward the flush
    /// threshold (`memcg_stats_need_flush`; the root's count is kept machine-wide). The
    /// lruvec items count on their own (`Lruvec::mod_state`); this is for the rest:
    /// memcg events, 6.1's PGPGIN and PGPGOUT, MEMCG_KMEM, NR_PAGETABLE, and the slab
    /// bytes of `mod_objcg_state`.
    #[inline]
    pub fn memcg_rstat_updated(&mut self, memcg: MemcgId, n: u64) {
        self.memcgs[memcg as usize].stats_updates += n;
        self.stats_updates += n;
    }

    /// mod_objcg_state() for NR_SLAB_RECLAIMABLE_B: a slab object of `memcg` of `bytes`
    /// allocated (positive) or freed (negative). The change waits in the object stock's
    /// byte cache, which takes the first change whole and pushes the cache out
    /// (mod_objcg_mlstate) once it holds more than a page either way. A push counts
    /// toward the flush threshold in pages, at least one (rule memcg_rstat_val_in_pages),
    /// or in bytes (6.1). Simplified: one cache per memcg; the kernel's per-CPU stock
    /// caches one objcg and node at a time and pushes its bytes out on a switch. 6.12's
    /// memcg_state_val_in_pages rounds a negative push up, not down (a sign slip later
    /// kernels mend): counted as later kernels count it.
    pub fn mod_objcg_state(&mut self, memcg: MemcgId, bytes: i64) {
        let m = &mut self.memcgs[memcg as usize];
        let push = if m.slab_stat_bytes == 0 {
            m.slab_stat_bytes = bytes;
            0
        } else {
            m.slab_stat_bytes += bytes;
            if m.slab_stat_bytes.unsigned_abs() > super::PAGE_SIZE {
                std::mem::take(&mut m.slab_stat_bytes)
            } else {
                0
            }
        };
        if push != 0 {
            let n = if self.rules.memcg_rstat_val_in_pages {
                (push.unsigned_abs() / super::PAGE_SIZE).max(1)
            } else {
                push.unsigned_abs()
            };
            self.memcg_rstat_updated(memcg, n);
        }
    }

    /// obj_cgroup_uncharge() of slab objects charged but not used: the bytes go back to the
    /// memcg's byte stock.
    pub fn memcg_kmem_refund(&mut self, memcg: MemcgId, bytes: u64, kind: KmemKind) {
        let m = &mut self.memcgs[memcg as usize];
        match kind {
            KmemKind::SlabReclaimable => m.slab_reclaimable_bytes -= bytes,
            KmemKind::Pagetables => m.pagetables_bytes -= bytes,
        }
        m.obj_stock_bytes += bytes;
    }

    /// Uncharge kernel objects freed on `cpu`: their bytes return to the byte stock, and
    /// whole pages of it leave MEMCG_KMEM (a statistics update each) and go, as
    /// obj_cgroup_uncharge_pages sends them, into `cpu`'s charge stock (refill_stock): a
    /// later charge of the memcg on that CPU takes them back, and on 6.1 and 6.12 they
    /// replace the stock of the memcg the CPU cached. The root's are uncharged at once
    /// (the kernel charges it no kmem: the root has no objcg; 7.x tests it in so many
    /// words).
    pub fn memcg_kmem_uncharge(&mut self, cpu: u32, memcg: MemcgId, bytes: u64, kind: KmemKind) {
        self.memcg_kmem_refund(memcg, bytes, kind);
        let m = &mut self.memcgs[memcg as usize];
        let pages = m.obj_stock_bytes / super::PAGE_SIZE;
        m.obj_stock_bytes -= pages * super::PAGE_SIZE;
        m.kmem_pages -= pages;
        self.memcg_rstat_updated(memcg, pages);
        if pages == 0 {
            return;
        }
        if self.memcg_is_root(memcg) {
            self.page_counter_uncharge(memcg, pages);
        } else {
            self.refill_stock(cpu, memcg, pages);
        }
    }

    /// mem_cgroup_is_root().
    #[inline]
    pub fn memcg_is_root(&self, m: MemcgId) -> bool {
        m == 0
    }

    /// `m` and its ancestors, from `m` up to the root inclusive.
    #[inline]
    pub fn memcg_ancestors(&self, m: MemcgId) -> &[MemcgId] {
        &self.memcgs[m as usize].ancestors
    }

    /// page_counter_try_charge(): charge `nr` to `m` and every ancestor; on a level whose
    /// usage would exceed its max, undo and return that level (mem_over_limit). The root
    /// memcg's counter has no limit.
    pub fn page_counter_try_charge(&mut self, m: MemcgId, nr: u64) -> Result<(), MemcgId> {
        let mut c = Some(m);
        while let Some(id) = c {
            let mc = &mut self.memcgs[id as usize];
            if mc.usage + nr > mc.max {
                // Undo the levels below the one that refused.
                let mut u = m;
                while u != id {
                    let mu = &mut self.memcgs[u as usize];
                    mu.usage -= nr;
                    u = mu.parent.expect("the refusing level is an ancestor");
                }
                return Err(id);
            }
            mc.usage += nr;
            mc.peak = mc.peak.max(mc.usage);
            c = mc.parent;
        }
        Ok(())
    }

    /// page_counter_uncharge() up the hierarchy.
    pub fn page_counter_uncharge(&mut self, m: MemcgId, nr: u64) {
        let mut c = Some(m);
        while let Some(id) = c {
            let mc = &mut self.memcgs[id as usize];
            debug_assert!(mc.usage >= nr, "page counter underflow in {}", mc.path);
            mc.usage = mc.usage.saturating_sub(nr);
            c = mc.parent;
        }
    }

    /// mem_cgroup_margin(): pages that can still be charged to `m` before a limit is hit.
    pub fn mem_cgroup_margin(&self, m: MemcgId) -> u64 {
        let mut margin = u64::MAX;
        let mut c = Some(m);
        while let Some(id) = c {
            let mc = &self.memcgs[id as usize];
            margin = margin.min(mc.max.saturating_sub(mc.usage));
            c = mc.parent;
        }
        margin
    }

    /// The slots of a CPU's charge stock this version has: NR_MEMCG_STOCK from 6.16
    /// (rule memcg_stock_multi), one before.
    #[inline]
    fn stock_slots(&self) -> usize {
        if self.rules.memcg_stock_multi {
            NR_MEMCG_STOCK
        } else {
            1
        }
    }

    /// consume_stock(): take `nr` pages pre-charged to `m` from this CPU's stock, from the
    /// slot that caches `m` (at most one does); false when none does or it holds fewer.
    pub fn consume_stock(&mut self, cpu: u32, m: MemcgId, nr: u64) -> bool {
        let slots = self.stock_slots();
        let s = &mut self.stock[cpu as usize];
        match s.cached[..slots].iter().position(|&c| c == m) {
            Some(i) if s.nr_pages[i] as u64 >= nr => {
                s.nr_pages[i] -= nr as u8;
                true
            }
            _ => false,
        }
    }

    /// drain_stock(): uncharge slot `i`'s pages and empty the slot.
    fn drain_stock(&mut self, cpu: u32, i: usize) {
        let s = &mut self.stock[cpu as usize];
        let (m, n) = (s.cached[i], s.nr_pages[i] as u64);
        s.cached[i] = STOCK_EMPTY;
        s.nr_pages[i] = 0;
        if n > 0 {
            self.page_counter_uncharge(m, n);
        }
    }

    /// refill_stock(): keep the pre-charged remainder `nr` of a batch on this CPU, in the
    /// slot that caches `m`; a slot that then holds more than a batch is drained.
    ///
    /// Without the slot (rule memcg_stock_multi, 6.16 on): the first empty slot, else a
    /// victim drained first: drawn at random (get_random_u32_below, 6.18; the model's
    /// draw is seeded) or the next in turn (rule memcg_stock_round_robin). Before 6.16 the
    /// one slot of another memcg is drained and taken. A refill above a batch (a large
    /// kmem free, such as an exiting process's page tables) is uncharged at once from
    /// 6.16; before, it drains the cached memcg's slot first.
    pub fn refill_stock(&mut self, cpu: u32, m: MemcgId, nr: u64) {
        let multi = self.rules.memcg_stock_multi;
        if multi && nr > MEMCG_CHARGE_BATCH {
            self.page_counter_uncharge(m, nr);
            return;
        }
        let slots = self.stock_slots();
        let s = &self.stock[cpu as usize];
        let i = match s.cached[..slots].iter().position(|&c| c == m) {
            Some(i) => i,
            None => {
                let i = if !multi {
                    self.drain_stock(cpu, 0);
                    0
                } else if let Some(e) = s.cached.iter().position(|&c| c == STOCK_EMPTY) {
                    e
                } else {
                    let victim = self.stock_victim(cpu);
                    self.drain_stock(cpu, victim);
                    victim
                };
                self.stock[cpu as usize].cached[i] = m;
                i
            }
        };
        // Stored, then drained above a batch (the kernel's WRITE_ONCE and drain_stock).
        let s = &mut self.stock[cpu as usize];
        let n = s.nr_pages[i] as u64 + nr;
        if n > MEMCG_CHARGE_BATCH {
            s.cached[i] = STOCK_EMPTY;
            s.nr_pages[i] = 0;
            self.page_counter_uncharge(m, n);
        } else {
            s.nr_pages[i] = n as u8;
        }
    }

    /// The slot a full multi-memcg stock gives up: stock->drain_idx in turn (rule
    /// memcg_stock_round_robin), else get_random_u32_below(NR_MEMCG_STOCK).
    fn stock_victim(&mut self, cpu: u32) -> usize {
        if self.rules.memcg_stock_round_robin {
            let s = &mut self.stock[cpu as usize];
            let i = s.drain_idx as usize;
            s.drain_idx = ((i + 1) % NR_MEMCG_STOCK) as u8;
            i
        } else {
            use rand::Rng;
            self.stock_rng.random_range(0..NR_MEMCG_STOCK)
        }
    }

    /// drain_all_stock(): for every CPU whose stock holds pages of `m`'s subtree in some
    /// slot (is_memcg_drain_needed), drain that CPU's whole stock (drain_stock_fully:
    /// the other memcgs' slots too).
    pub fn drain_all_stock(&mut self, m: MemcgId) {
        let slots = self.stock_slots();
        for cpu in 0..self.stock.len() {
            let s = self.stock[cpu];
            let needed = (0..slots).any(|i| {
                s.cached[i] != STOCK_EMPTY
                    && s.nr_pages[i] > 0
                    && self.memcg_ancestors(s.cached[i]).contains(&m)
            });
            if needed {
                for i in 0..slots {
                    self.drain_stock(cpu as u32, i);
                }
            }
        }
    }

    /// Pages sitting in charge stocks for `m` itself.
    pub fn stocked(&self, m: MemcgId) -> u64 {
        self.stock
            .iter()
            .flat_map(|s| s.cached.iter().zip(&s.nr_pages))
            .filter(|(&c, _)| c == m && m != STOCK_EMPTY)
            .map(|(_, &n)| n as u64)
            .sum()
    }

    /// mem_cgroup_calculate_protection(root, memcg) with page_counter_calculate_protection():
    /// effective memory.min/low of `m` in a reclaim walk rooted at `root`.
    ///
    /// The root of the walk and memcgs with no usage keep stale values (the kernel returns
    /// early); children of the walk root get their own settings; deeper memcgs get their
    /// share of the parent's effective protection by effective_protection(). Siblings'
    /// protected usage is summed on the fly (children_{min,low}_usage in the kernel).
    pub fn mem_cgroup_calculate_protection(&mut self, root: MemcgId, m: MemcgId) {
        if m == root || self.memcg_is_root(m) {
            return;
        }
        let usage = self.memcgs[m as usize].usage;
        if usage == 0 {
            return;
        }
        let parent = self.memcgs[m as usize]
            .parent
            .expect("non-root memcg has a parent");
        if parent == root {
            let mc = &mut self.memcgs[m as usize];
            mc.emin = mc.min;
            mc.elow = mc.low;
            return;
        }
        let recursive = self.memory_recursiveprot;
        let p = &self.memcgs[parent as usize];
        let parent_usage = p.usage;
        let (parent_emin, parent_elow) = (p.emin, p.elow);
        let siblings = p.children.clone();
        let sib_min: u64 = siblings
            .iter()
            .map(|&s| {
                let c = &self.memcgs[s as usize];
                c.usage.min(c.min)
            })
            .sum();
        let sib_low: u64 = siblings
            .iter()
            .map(|&s| {
                let c = &self.memcgs[s as usize];
                c.usage.min(c.low)
            })
            .sum();
        let (min, low) = (self.memcgs[m as usize].min, self.memcgs[m as usize].low);
        let emin = effective_protection(usage, parent_usage, min, parent_emin, sib_min, recursive);
        let elow = effective_protection(usage, parent_usage, low, parent_elow, sib_low, recursive);
        let mc = &mut self.memcgs[m as usize];
        mc.emin = emin;
        mc.elow = elow;
    }

    /// mem_cgroup_protection(): (emin, elow), or (0, 0) for the root and the walk target.
    pub fn mem_cgroup_protection(&self, target: MemcgId, m: MemcgId) -> (u64, u64) {
        if self.memcg_is_root(m) || m == target {
            return (0, 0);
        }
        let mc = &self.memcgs[m as usize];
        (mc.emin, mc.elow)
    }

    /// mem_cgroup_below_min() / mem_cgroup_below_low().
    pub fn mem_cgroup_below_min(&self, target: MemcgId, m: MemcgId) -> bool {
        if self.memcg_is_root(m) || m == target {
            return false;
        }
        let mc = &self.memcgs[m as usize];
        mc.usage <= mc.emin
    }
    pub fn mem_cgroup_below_low(&self, target: MemcgId, m: MemcgId) -> bool {
        if self.memcg_is_root(m) || m == target {
            return false;
        }
        let mc = &self.memcgs[m as usize];
        mc.usage <= mc.elow
    }

    /// Is `m` in the subtree rooted at `root`?
    pub fn memcg_in_subtree(&self, root: MemcgId, m: MemcgId) -> bool {
        let mut c = Some(m);
        while let Some(id) = c {
            if id == root {
                return true;
            }
            c = self.memcgs[id as usize].parent;
        }
        false
    }

    /// css_next_descendant_pre(pos, root): the next memcg after `pos` in a pre-order walk of
    /// `root`'s subtree (`pos` None = start at `root`).
    fn next_descendant_pre(&self, pos: Option<MemcgId>, root: MemcgId) -> Option<MemcgId> {
        let order = &self.memcg_preorder;
        let start = match pos {
            None => return Some(root),
            Some(p) => order.iter().position(|&x| x == p)? + 1,
        };
        order[start..]
            .iter()
            .copied()
            .find(|&m| self.memcg_in_subtree(root, m))
    }

    /// mem_cgroup_iter(root, prev, cookie): the next memcg of a reclaim walk.
    ///
    /// Without a cookie the walk is private and full (kswapd, memcg_full_walk). With one, it
    /// is shared through root's per-node iterator: each step advances the shared position;
    /// reaching the end bumps the generation, which ends every other walker of the old
    /// generation; a walker that has only just started restarts from the beginning.
    pub fn mem_cgroup_iter(
        &mut self,
        root: MemcgId,
        prev: Option<MemcgId>,
        cookie: Option<&mut ReclaimCookie>,
    ) -> Option<MemcgId> {
        let Some(ck) = cookie else {
            return self.next_descendant_pre(prev, root);
        };
        let node = ck.node as usize;
        let iter = self.memcgs[root as usize].iter[node];
        if prev.is_some() && ck.generation != iter.generation {
            return None;
        }
        let mut restarted = false;
        loop {
            let iter = self.memcgs[root as usize].iter[node];
            let next = self.next_descendant_pre(iter.position, root);
            let it = &mut self.memcgs[root as usize].iter[node];
            it.position = next;
            if next.is_none() {
                it.generation = it.generation.wrapping_add(1);
                if prev.is_none() && !restarted {
                    restarted = true;
                    continue;
                }
                return None;
            }
            if prev.is_none() {
                ck.generation = it.generation;
            }
            return next;
        }
    }

    /// mem_cgroup_flush_stats(root): recompute every lruvec's hierarchical counters (a
    /// full rstat flush, as the periodic flush_memcg_stats_dwork does).
    pub fn flush_stats(&mut self, now: Time) {
        self.flush_stats_subtree(0, now);
    }

    /// css_rstat_flush() of `m`'s subtree: its memcgs' lruvecs get fresh hierarchical
    /// counters and their pending updates are cleared. Ancestors of `m` keep what they
    /// had (the flushed deltas wait in their pending state); flushing the root records
    /// the time of the last flush (flush_last_time).
    pub fn flush_stats_subtree(&mut self, root: MemcgId, now: Time) {
        let nodes = self.nodes.len();
        // Post-order: children before parents (reverse pre-order works for a tree).
        let order: Vec<MemcgId> = self
            .memcg_preorder
            .iter()
            .rev()
            .copied()
            .filter(|&m| root == 0 || self.memcg_in_subtree(root, m))
            .collect();
        for m in order {
            self.memcgs[m as usize].stats_updates = 0;
            for n in 0..nodes {
                let lv = self.memcgs[m as usize].lruvecs[n] as usize;
                self.lruvecs[lv].rstat_updates = 0;
                let mut acc = self.lruvecs[lv].stat;
                for &c in &self.memcgs[m as usize].children {
                    let clv = self.memcgs[c as usize].lruvecs[n] as usize;
                    for (i, a) in acc.iter_mut().enumerate().take(NR_NODE_STAT) {
                        *a += self.lruvecs[clv].stat_flushed[i];
                    }
                }
                self.lruvecs[lv].stat_flushed = acc;
                let own = self.lruvecs[lv].stat;
                self.lruvecs[lv]
                    .lru_flushed_local
                    .copy_from_slice(&own[..super::mmzone::NR_LRU_LISTS]);
            }
        }
        if root == 0 {
            self.stats_updates = 0;
            self.last_flush = now;
        }
    }

    /// memcg_vmstats_needs_flush() of `m`: its subtree's updates since they were last
    /// flushed above MEMCG_CHARGE_BATCH * nr_cpus. An update is memcg_rstat_updated()'s:
    /// the absolute value of each change of a memcg event (`MemCgroup::stats_updates`; the
    /// root's event count is kept machine-wide) or of a memcg-accounted lruvec item
    /// (`Lruvec::rstat_updates`: LRU sizes, NR_FILE_PAGES, ...). Simplified: the kernel
    /// adds a CPU's updates to the atomic in batches of MEMCG_CHARGE_BATCH; the model
    /// counts them one by one.
    pub fn memcg_stats_need_flush(&self, m: MemcgId) -> bool {
        let lruvecs = |c: MemcgId| -> u64 {
            let mc = &self.memcgs[c as usize];
            mc.lruvecs
                .iter()
                .map(|&lv| self.lruvecs[lv as usize].rstat_updates)
                .sum()
        };
        let updates: u64 = if m == 0 {
            self.stats_updates + self.lruvecs.iter().map(|l| l.rstat_updates).sum::<u64>()
        } else {
            self.memcg_preorder
                .iter()
                .filter(|&&c| self.memcg_in_subtree(m, c))
                .map(|&c| self.memcgs[c as usize].stats_updates + lruvecs(c))
                .sum()
        };
        updates > MEMCG_CHARGE_BATCH * self.nr_cpus as u64
    }

    /// The memcg whose subtree a flush asked for `m` looks at and flushes: `m` (v6.8 on:
    /// per-memcg thresholds, subtree flushes), or, under rule
    /// memcg_flush_global_threshold (6.1), the root: 6.1's mem_cgroup_flush_stats takes no
    /// memcg, tests one machine-wide count of updates (stats_flush_threshold) and flushes
    /// the whole tree. Simplified: 6.1 counts a CPU's updates into that threshold in
    /// steps of MEMCG_CHARGE_BATCH; the model counts them one by one.
    fn flush_scope(&self, m: MemcgId) -> MemcgId {
        if self.rules.memcg_flush_global_threshold {
            0
        } else {
            m
        }
    }

    /// mem_cgroup_flush_stats(m): flush `m`'s subtree if its update threshold was crossed
    /// (memcg_vmstats_needs_flush); 6.1: see `flush_scope`.
    pub fn mem_cgroup_flush_stats(&mut self, m: MemcgId, now: Time) {
        let m = self.flush_scope(m);
        if self.memcg_stats_need_flush(m) {
            self.flush_stats_subtree(m, now);
        }
    }

    /// mem_cgroup_flush_stats_ratelimited(m): flush `m`'s subtree, only if the periodic
    /// flush has not run for 2 * FLUSH_TIME and the subtree's update threshold was crossed.
    /// 6.1's mem_cgroup_flush_stats_delayed is the same test on the whole tree (see
    /// `flush_scope`; its flush_next_time is set by every flush, each one of the root).
    pub fn flush_stats_ratelimited(&mut self, m: MemcgId, now: Time) {
        if now > self.last_flush + 2 * FLUSH_TIME {
            self.mem_cgroup_flush_stats(m, now);
        }
    }

    /// mem_cgroup_get_nr_swap_pages(): swap slots this memcg may still use: the free
    /// slots, capped by the room under memory.swap.max of it and every ancestor below the
    /// root.
    pub fn mem_cgroup_get_nr_swap_pages(&self, m: MemcgId) -> u64 {
        let mut nr = self.swap.as_ref().map_or(0, |s| s.nr_free());
        for &a in self.memcg_ancestors(m) {
            if !self.memcg_is_root(a) {
                let mc = &self.memcgs[a as usize];
                nr = nr.min(mc.swap_max.saturating_sub(mc.swap_hier));
            }
        }
        nr
    }

    /// mem_cgroup_swap_full() for a folio of `m`: swap is at least half used
    /// (vm_swap_full), or `m` or an ancestor below the root uses half its memory.swap.max.
    pub fn mem_cgroup_swap_full(&self, m: MemcgId) -> bool {
        let vm_swap_full = self
            .swap
            .as_ref()
            .is_some_and(|s| s.nr_free() * 2 < s.nr_slots());
        vm_swap_full
            || self.memcg_ancestors(m).iter().any(|&a| {
                let mc = &self.memcgs[a as usize];
                !self.memcg_is_root(a) && mc.swap_hier.saturating_mul(2) >= mc.swap_max
            })
    }

    /// mem_cgroup_try_charge_swap(): charge one swap slot to `m`'s swap counter and its
    /// ancestors'; false (and nothing charged) when a level below the root would exceed
    /// its memory.swap.max.
    pub fn mem_cgroup_try_charge_swap(&mut self, m: MemcgId) -> bool {
        let fits = self.memcg_ancestors(m).iter().all(|&a| {
            let mc = &self.memcgs[a as usize];
            self.memcg_is_root(a) || mc.swap_hier < mc.swap_max
        });
        if !fits {
            return false;
        }
        for i in 0..self.memcgs[m as usize].ancestors.len() {
            let a = self.memcgs[m as usize].ancestors[i] as usize;
            self.memcgs[a].swap_hier += 1;
        }
        self.memcgs[m as usize].swap_usage += 1;
        true
    }

    /// mem_cgroup_uncharge_swap(): a slot charged to `m` was freed.
    pub fn mem_cgroup_uncharge_swap(&mut self, m: MemcgId) {
        for i in 0..self.memcgs[m as usize].ancestors.len() {
            let a = self.memcgs[m as usize].ancestors[i] as usize;
            self.memcgs[a].swap_hier = self.memcgs[a].swap_hier.saturating_sub(1);
        }
        let mc = &mut self.memcgs[m as usize];
        mc.swap_usage = mc.swap_usage.saturating_sub(1);
    }

    /// memcg_memory_event(): count an event in `m`'s memory.events.
    pub fn memcg_memory_event(&mut self, m: MemcgId, ev: MemcgEvent) {
        self.memcgs[m as usize].events[ev as usize] += 1;
    }

    /// Count a reclaim event (pgscan/pgsteal of a reclaimer, pgrefill) globally when
    /// `global` and always in the memcg: cgroup reclaim is not counted in the global copy
    /// (count_vm_events under !cgroup_reclaim). With rule vmstat_reclaim_node_stats (7.2)
    /// they are node statistics (mod_lruvec_state), which /proc/vmstat sums whoever
    /// reclaimed.
    pub fn count_reclaim_event(&mut self, memcg: MemcgId, ev: VmEvent, n: u64, global: bool) {
        if global || self.rules.vmstat_reclaim_node_stats {
            self.count_event(ev, n);
        }
        self.count_memcg_event(memcg, ev, n);
    }
}

/// effective_protection() of mm/page_counter.c: a child's share of its parent's effective
/// protection. Over-committed siblings share proportionally; with memory_recursiveprot, the
/// parent's unclaimed protection is spread by unprotected usage.
pub fn effective_protection(
    usage: u64,
    parent_usage: u64,
    setting: u64,
    parent_effective: u64,
    siblings_protected_usage: u64,
    recursive: bool,
) -> u64 {
    let protected = usage.min(setting);
    if siblings_protected_usage > parent_effective {
        return (protected as u128 * parent_effective as u128 / siblings_protected_usage as u128)
            as u64;
    }
    let mut ep = protected;
    if recursive
        && parent_effective > siblings_protected_usage
        && parent_usage > siblings_protected_usage
        && usage > protected
    {
        let unclaimed = parent_effective - siblings_protected_usage;
        ep += (unclaimed as u128 * (usage - protected) as u128
            / (parent_usage - siblings_protected_usage) as u128) as u64;
    }
    ep
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effective_protection_cases() {
        // Within budget: own setting, capped by usage.
        assert_eq!(effective_protection(100, 300, 50, 200, 150, false), 50);
        assert_eq!(effective_protection(30, 300, 50, 200, 150, false), 30);
        // Overcommitted siblings (protected 400 > parent's 200): proportional share.
        assert_eq!(effective_protection(200, 500, 200, 200, 400, false), 100);
        // recursiveprot: unclaimed 200 - 50 = 150 spread by unprotected usage 50 / (300 - 50).
        assert_eq!(
            effective_protection(100, 300, 50, 200, 50, true),
            50 + 150 * 50 / 250
        );
        assert_eq!(effective_protection(100, 300, 50, 200, 50, false), 50);
    }

    #[test]
    fn every_memcg_accounted_update_counts_toward_the_flush_threshold() {
        use crate::mm::mm_types::PG_ACTIVE;
        use crate::mm::vmstat::NodeStat;
        // memcg_rstat_updated() adds abs(val) of every __mod_lruvec_state of a
        // memcg-accounted item; a flush is due above MEMCG_CHARGE_BATCH * nr_cpus, 64 * 4.
        let s = crate::fixture::one_node_machine("64M", None, "");
        let (_, pfns) = s.fixture_file_folios(1, 0, 200, 0); // flushed when linked
        let mut mm = s.mm.borrow_mut();
        assert!(!mm.memcg_stats_need_flush(1));
        // An activation takes the folio off one list and puts it on another: -1 and +1.
        for &pfn in &pfns[..128] {
            mm.lruvec_del_folio(pfn);
            mm.pages[pfn as usize].set(PG_ACTIVE);
            mm.lruvec_add_folio(pfn);
        }
        assert!(
            !mm.memcg_stats_need_flush(1),
            "256 updates are not above 256"
        );
        // NR_ISOLATED_FILE is a node's item (__mod_node_page_state): no memcg update.
        let lv = mm.folio_lruvec(pfns[0]);
        mm.count_isolated(lv, true, 32);
        assert!(!mm.memcg_stats_need_flush(1));
        let lv = lv as usize;
        assert_eq!(mm.lruvecs[lv].stat[NodeStat::NrIsolatedFile as usize], 32);
        // One page-cache page removed (NR_FILE_PAGES - 1): the 257th.
        mm.lruvecs[lv].mod_state(NodeStat::NrFilePages, -1);
        assert!(mm.memcg_stats_need_flush(1));
        assert!(
            mm.memcg_stats_need_flush(0),
            "the root's count covers its descendants"
        );
        mm.flush_stats_subtree(1, 0);
        assert!(!mm.memcg_stats_need_flush(1) && !mm.memcg_stats_need_flush(0));
        // Updates of the root's own pages are the root's: /a is not due.
        let root_lv = mm.memcgs[0].lruvecs[0] as usize;
        mm.lruvecs[root_lv].mod_state(NodeStat::NrFilePages, 300);
        assert!(mm.memcg_stats_need_flush(0) && !mm.memcg_stats_need_flush(1));
    }

    #[test]
    fn a_slab_push_counts_its_bytes_on_6_1_and_its_pages_after() {
        // mod_objcg_state: the byte cache takes the first 576-byte xa_node whole and
        // holds up to a page; the 8th brings 8 x 576 = 4608 > 4096 and is pushed out.
        // 6.1's memcg_rstat_updated adds abs(4608); later kernels add
        // memcg_state_val_in_pages: 4608 / 4096 = 1. Frees push the same way, negative.
        for (version, per_push) in [("6.1", 4608u64), ("6.12", 1), ("7.3", 1)] {
            let s =
                crate::fixture::one_node_machine("64M", None, &format!("version = \"{version}\""));
            let mut mm = s.mm.borrow_mut();
            let before = mm.memcgs[1].stats_updates;
            let node = XA_NODE_SIZE as i64;
            for _ in 0..7 {
                mm.mod_objcg_state(1, node);
            }
            assert_eq!(
                mm.memcgs[1].stats_updates, before,
                "{version}: 4032 bytes stay cached"
            );
            assert_eq!(mm.memcgs[1].slab_stat_bytes, 7 * node);
            mm.mod_objcg_state(1, node);
            assert_eq!(mm.memcgs[1].stats_updates, before + per_push, "{version}");
            assert_eq!(mm.memcgs[1].slab_stat_bytes, 0);
            for _ in 0..8 {
                mm.mod_objcg_state(1, -node);
            }
            assert_eq!(
                mm.memcgs[1].stats_updates,
                before + 2 * per_push,
                "{version}"
            );
            // A page-sized change is cached whole the first time, pushed with the next.
            mm.mod_objcg_state(1, 4096);
            assert_eq!(mm.memcgs[1].stats_updates, before + 2 * per_push);
            mm.mod_objcg_state(1, 8192);
            let n = if version == "6.1" { 12288 } else { 3 };
            assert_eq!(
                mm.memcgs[1].stats_updates,
                before + 2 * per_push + n,
                "{version}"
            );
            // Exactly a page stays cached: a push needs more than PAGE_SIZE.
            let pushed = mm.memcgs[1].stats_updates;
            mm.mod_objcg_state(1, 2048);
            mm.mod_objcg_state(1, 2048);
            assert_eq!(mm.memcgs[1].stats_updates, pushed, "{version}: 4096 stays");
            mm.mod_objcg_state(1, 1);
            assert!(mm.memcgs[1].stats_updates > pushed, "{version}: 4097 goes");
            assert_eq!(
                mm.stats_updates,
                mm.memcgs.iter().map(|m| m.stats_updates).sum::<u64>()
            );
        }
    }

    /// A machine of `version` with flat cgroups /c1../c9 (memcg ids 1..=9) or, with
    /// `cgroups`, those paths in order; the run's seed `seed`.
    fn stock_machine(version: &str, seed: u64, cgroups: &[&str]) -> std::rc::Rc<crate::sim::Sim> {
        let flat: Vec<String> = (1..=9).map(|i| format!("/c{i}")).collect();
        let paths: Vec<&str> = if cgroups.is_empty() {
            flat.iter().map(|p| p.as_str()).collect()
        } else {
            cgroups.to_vec()
        };
        let cg: String = paths
            .iter()
            .map(|p| format!("[[cgroup]]\npath = \"{p}\"\n"))
            .collect();
        let t = format!(
            "duration = \"1000s\"\nseed = {seed}\n[machine]\ncpus = 4\nmemory_per_node = \"64M\"\n\
             [kernel]\nversion = \"{version}\"\n{cg}[[workload]]\ntype = \"usemem\"\n\
             cgroup = \"{}\"\nsize = \"4K\"\nstart = \"900s\"\n",
            paths[0]
        );
        crate::sim::Sim::build(&crate::Scenario::from_toml(&t).unwrap()).unwrap()
    }

    /// try_charge_memcg's batch on `cpu`: MEMCG_CHARGE_BATCH charged, one page used, the
    /// other 63 refilled into the stock.
    fn charge_one_page(mm: &mut Mm, cpu: u32, m: MemcgId) {
        mm.page_counter_try_charge(m, MEMCG_CHARGE_BATCH).unwrap();
        mm.refill_stock(cpu, m, MEMCG_CHARGE_BATCH - 1);
    }

    #[test]
    fn a_cpus_charge_stock_keeps_one_memcg_before_6_16_and_seven_after() {
        // A CPU charges /c1 then /c2, a batch each. 6.1 and 6.12's __refill_stock drains
        // the cached memcg first: /c1 is left with the one page it used. From 6.16 /c2
        // takes an empty slot and /c1's 63 pages stay stocked, consumable.
        for (version, multi) in [
            ("6.1", false),
            ("6.12", false),
            ("6.18", true),
            ("7.3", true),
        ] {
            let s = stock_machine(version, 1, &[]);
            let mut mm = s.mm.borrow_mut();
            charge_one_page(&mut mm, 0, 1);
            charge_one_page(&mut mm, 0, 2);
            let (usage, stocked) = if multi { (64, 63) } else { (1, 0) };
            assert_eq!(mm.memcgs[1].usage, usage, "{version}");
            assert_eq!(mm.stocked(1), stocked, "{version}");
            assert_eq!(mm.stocked(2), 63, "{version}");
            assert_eq!(mm.consume_stock(0, 1, 1), multi, "{version}");
            assert_eq!(
                mm.stocked(1),
                stocked.saturating_sub(1),
                "{version}: one taken"
            );
            // More than the slot holds is refused and takes nothing.
            assert!(!mm.consume_stock(0, 2, 64), "{version}");
            assert_eq!(mm.stocked(2), 63, "{version}");
            // Another CPU's stock is its own.
            assert!(!mm.consume_stock(1, 2, 1), "{version}");
            // A refill that takes a slot past a batch drains it whole: 63 + 2 = 65 > 64,
            // leaving /c2 its one used page of the 64 + 2 charged.
            mm.page_counter_try_charge(2, 2).unwrap();
            mm.refill_stock(0, 2, 2);
            assert_eq!((mm.memcgs[2].usage, mm.stocked(2)), (1, 0), "{version}");
        }
    }

    #[test]
    fn a_slot_keeps_a_whole_batch_and_a_refill_above_one_skips_the_stock_from_6_16() {
        // refill_stock: a slot drains only above MEMCG_CHARGE_BATCH: 63 + 1 = 64 stays.
        // From 6.16 a refill of more than a batch is uncharged at once, leaving every slot
        // as it was; before, __refill_stock caches the memcg (draining the other) first.
        for (version, c1_left) in [("6.12", 0), ("6.18", 64), ("7.3", 64)] {
            let s = stock_machine(version, 1, &[]);
            let mut mm = s.mm.borrow_mut();
            charge_one_page(&mut mm, 0, 1);
            mm.page_counter_try_charge(1, 1).unwrap();
            mm.refill_stock(0, 1, 1);
            assert_eq!(mm.stocked(1), 64, "{version}");
            // A refill of exactly a batch is stocked (on 6.12 it replaces /c1's).
            mm.page_counter_try_charge(3, 64).unwrap();
            mm.refill_stock(1, 3, 64);
            assert_eq!(mm.stocked(3), 64, "{version}");
            mm.page_counter_try_charge(2, 65).unwrap();
            mm.refill_stock(0, 2, 65);
            assert_eq!((mm.memcgs[2].usage, mm.stocked(2)), (0, 0), "{version}");
            assert_eq!(mm.stocked(1), c1_left, "{version}");
        }
    }

    #[test]
    fn a_full_stock_gives_up_its_slots_in_turn_on_7_3_and_at_random_on_6_18() {
        // Seven memcgs fill CPU 0's slots; an eighth and a ninth each need a victim.
        // 7.3 (stock->drain_idx): slot 0 (/c1), then slot 1 (/c2).
        let s = stock_machine("7.3", 1, &[]);
        let mut mm = s.mm.borrow_mut();
        for m in 1..=9 {
            charge_one_page(&mut mm, 0, m);
        }
        let stocked: Vec<u64> = (1..=9).map(|m| mm.stocked(m)).collect();
        assert_eq!(stocked, [0, 0, 63, 63, 63, 63, 63, 63, 63]);
        assert_eq!((mm.memcgs[1].usage, mm.memcgs[2].usage), (1, 1));
        // A slot drained past a batch is empty again: /c1 takes it and nobody is evicted
        // (drain_idx, now 2, would have taken /c3's).
        mm.page_counter_try_charge(3, 2).unwrap();
        mm.refill_stock(0, 3, 2);
        charge_one_page(&mut mm, 0, 1);
        let stocked: Vec<u64> = (1..=9).map(|m| mm.stocked(m)).collect();
        assert_eq!(stocked, [63, 0, 0, 63, 63, 63, 63, 63, 63]);
        drop(mm);
        // 6.18 (get_random_u32_below): one of the seven each time, which one drawn; over
        // seeds the first victim is not always slot 0.
        let mut victims = std::collections::BTreeSet::new();
        for seed in 1..=12 {
            let s = stock_machine("6.18", seed, &[]);
            let mut mm = s.mm.borrow_mut();
            for m in 1..=8 {
                charge_one_page(&mut mm, 0, m);
            }
            let lost: Vec<MemcgId> = (1..=7).filter(|&m| mm.stocked(m) == 0).collect();
            assert_eq!(lost.len(), 1, "seed {seed}: exactly one victim");
            assert_eq!(mm.memcgs[lost[0] as usize].usage, 1);
            assert_eq!(mm.stocked(8), 63);
            victims.insert(lost[0]);
        }
        assert!(victims.len() >= 3, "victims over 12 seeds: {victims:?}");
    }

    #[test]
    fn freed_kernel_pages_go_into_the_freeing_cpus_stock() {
        // obj_cgroup_uncharge_pages: MEMCG_KMEM - 2 and refill_stock(memcg, 2) on the CPU
        // that frees. /c1 had 2 page-table pages charged; CPU 0 had stocked /c2's batch.
        // 6.12: /c1's 2 pages replace /c2's 63 (drained). 6.18: both stay. The root's
        // pages leave its counter at once.
        for (version, c2_left) in [("6.12", 0), ("6.18", 63)] {
            let s = stock_machine(version, 1, &[]);
            let mut mm = s.mm.borrow_mut();
            charge_one_page(&mut mm, 0, 2);
            for m in [0, 1] {
                mm.page_counter_try_charge(m, 2).unwrap();
                let mc = &mut mm.memcgs[m as usize];
                mc.kmem_pages += 2;
                mc.pagetables_bytes += 2 * crate::mm::PAGE_SIZE;
            }
            mm.memcg_kmem_uncharge(0, 1, 2 * crate::mm::PAGE_SIZE, KmemKind::Pagetables);
            assert_eq!(mm.memcgs[1].kmem_pages, 0, "{version}");
            assert_eq!((mm.memcgs[1].usage, mm.stocked(1)), (2, 2), "{version}");
            assert_eq!(mm.stocked(2), c2_left, "{version}");
            assert!(mm.consume_stock(0, 1, 2), "{version}");
            let root_usage = mm.memcgs[0].usage;
            mm.memcg_kmem_uncharge(0, 0, 2 * crate::mm::PAGE_SIZE, KmemKind::Pagetables);
            assert_eq!(mm.memcgs[0].usage, root_usage - 2, "{version}");
            assert_eq!(mm.stocked(0), 0, "{version}");
        }
    }

    #[test]
    fn drain_all_stock_empties_a_cpus_every_slot_once_one_holds_the_subtree() {
        // /p (1), /p/a (2), /q (3). CPU 0 stocks /p/a and /q, CPU 1 /q alone.
        // drain_all_stock(/p): from 6.16 CPU 0's every slot goes (drain_stock_fully), /q's
        // too; CPU 1 keeps /q. Before, CPU 0's one slot held /q last, so nothing of /p's
        // subtree is stocked and nothing is drained.
        for (version, q_left) in [("6.12", 63 * 2), ("6.18", 63), ("7.3", 63)] {
            let s = stock_machine(version, 1, &["/p", "/p/a", "/q"]);
            let mut mm = s.mm.borrow_mut();
            charge_one_page(&mut mm, 0, 2);
            charge_one_page(&mut mm, 0, 3);
            charge_one_page(&mut mm, 1, 3);
            mm.drain_all_stock(1);
            assert_eq!(mm.stocked(2), 0, "{version}");
            assert_eq!(mm.stocked(3), q_left, "{version}");
            // A slot of the subtree with no pages left is no reason to drain
            // (is_memcg_drain_needed reads nr_pages): CPU 2 keeps /q's.
            charge_one_page(&mut mm, 2, 3);
            charge_one_page(&mut mm, 2, 2);
            assert!(mm.consume_stock(2, 2, 63));
            let q = mm.stocked(3);
            mm.drain_all_stock(1);
            assert_eq!(mm.stocked(3), q, "{version}");
        }
    }

    #[test]
    fn a_charge_and_its_uncharge_are_one_update_each_on_6_1_only() {
        // mem_cgroup_charge_statistics' PGPGIN at the charge, uncharge_batch's PGPGOUT
        // (once per folio) at the free: one memcg_rstat_updated each on 6.1; 6.12 and
        // later build them with CONFIG_MEMCG_V1 only (memcg1_charge_statistics).
        for (version, each) in [("6.1", 1), ("6.12", 0), ("7.3", 0)] {
            let v = format!("version = \"{version}\"");
            let s = crate::fixture::one_node_machine("64M", None, &v);
            let before = s.mm.borrow().memcgs[1].stats_updates;
            let got = std::rc::Rc::new(std::cell::Cell::new(None));
            let g = got.clone();
            crate::fixture::run_probe(&s, 0, 0, move |s| async move {
                g.set(s.alloc_charged_page(0, 1).await);
            });
            let pfn = got.get().expect("a page");
            let after_charge = s.mm.borrow().memcgs[1].stats_updates;
            assert_eq!(after_charge - before, each, "{version}");
            s.mm.borrow_mut().free_folio(pfn);
            let after_free = s.mm.borrow().memcgs[1].stats_updates;
            assert_eq!(after_free - after_charge, each, "{version}");
        }
    }
}

/// memory.high penalty: the kernel's MEMCG_DELAY_PRECISION_SHIFT and SCALING_SHIFT.
const MEMCG_DELAY_PRECISION_SHIFT: u32 = 20;
const MEMCG_DELAY_SCALING_SHIFT: u32 = 14;
/// CONFIG_HZ assumed 1000: one jiffy is 1 ms.
pub const JIFFY_NS: u64 = 1_000_000;
const HZ: u64 = 1000;

/// calculate_overage(): how far usage is above high, in 2^-20 units of high.
pub fn calculate_overage(usage: u64, high: u64) -> u64 {
    if usage <= high {
        return 0;
    }
    let high = high.max(1);
    (((usage - high) as u128) << MEMCG_DELAY_PRECISION_SHIFT) as u64 / high
}

/// calculate_high_delay(): the throttling penalty [jiffies] for `nr_pages` charged over high.
pub fn calculate_high_delay(nr_pages: u64, max_overage: u64) -> u64 {
    if max_overage == 0 {
        return 0;
    }
    let mut p =
        (max_overage as u128 * max_overage as u128 * HZ as u128) >> MEMCG_DELAY_PRECISION_SHIFT;
    p >>= MEMCG_DELAY_SCALING_SHIFT;
    (p * nr_pages as u128 / MEMCG_CHARGE_BATCH as u128) as u64
}

/// sizeof(struct xa_node) on x86-64: one radix_tree_node slab object [bytes].
pub const XA_NODE_SIZE: u64 = 576;

/// What kind of kernel object a kmem charge pays for (memory.stat line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KmemKind {
    /// radix_tree_node objects of the page cache (SLAB_RECLAIM_ACCOUNT).
    SlabReclaimable,
    /// PTE pages (GFP_PGTABLE_USER has __GFP_ACCOUNT).
    Pagetables,
}

impl crate::sim::Sim {
    /// obj_cgroup_charge() for `bytes` of slab objects, or the page charge of a page-table
    /// page (__GFP_ACCOUNT): whole pages come from try_charge_memcg (which may reclaim the
    /// memcg's LRU pages to make room) and sub-page objects are carved from the memcg's byte
    /// stock. False when the charge fails (the allocation fails with -ENOMEM).
    ///
    /// Simplified: one byte stock per memcg (the kernel keeps a per-CPU obj_stock); kernel
    /// memory is charged to the memcg but not taken from the node's free pages.
    pub async fn memcg_kmem_charge(&self, memcg: MemcgId, bytes: u64, kind: KmemKind) -> bool {
        loop {
            {
                let mut mm = self.mm.borrow_mut();
                let m = &mut mm.memcgs[memcg as usize];
                if m.obj_stock_bytes >= bytes {
                    m.obj_stock_bytes -= bytes;
                    match kind {
                        KmemKind::SlabReclaimable => m.slab_reclaimable_bytes += bytes,
                        KmemKind::Pagetables => m.pagetables_bytes += bytes,
                    }
                    return true;
                }
            }
            if !self.try_charge_memcg(memcg, 1).await {
                return false;
            }
            let mut mm = self.mm.borrow_mut();
            let m = &mut mm.memcgs[memcg as usize];
            m.kmem_pages += 1;
            m.obj_stock_bytes += super::PAGE_SIZE;
            // memcg_account_kmem(): MEMCG_KMEM + 1.
            mm.memcg_rstat_updated(memcg, 1);
        }
    }

    /// try_charge_memcg(): charge `nr` pages to `memcg`, reclaiming its (or an ancestor's)
    /// limit when needed.
    ///
    /// The per-CPU stock is used first; otherwise a batch of MEMCG_CHARGE_BATCH is charged
    /// up the hierarchy and the rest is stocked. Over a limit: MEMCG_MAX event,
    /// try_to_free_mem_cgroup_pages, retry while there is margin, drain the stocks once,
    /// retry small charges that made progress, up to MAX_RECLAIM_RETRIES; then the memcg
    /// OOM killer, whose progress resets the retries. Returns false when the charge fails.
    ///
    /// The root memcg is never charged (try_charge's mem_cgroup_is_root test): a page of
    /// a root task takes no stock, writes no counter line and meets no limit. The model
    /// still adds it to the root's usage, which the report gives as the root's
    /// memory.current (the pages charged anywhere in the tree, as cgroup v1's root usage
    /// counts every page; the kernel's root counter holds only its children's charges).
    pub async fn try_charge_memcg(&self, memcg: MemcgId, nr: u64) -> bool {
        let cpu = self.e.cpu();
        {
            let mut mm = self.mm.borrow_mut();
            if mm.memcg_is_root(memcg) {
                // Only the report's count: the root's counter has no limit to refuse it.
                let charged = mm.page_counter_try_charge(memcg, nr);
                debug_assert!(charged.is_ok());
                return true;
            }
            if mm.consume_stock(cpu, memcg, nr) {
                return true;
            }
        }
        let mut batch = nr.max(MEMCG_CHARGE_BATCH);
        let mut retries = super::MAX_RECLAIM_RETRIES;
        let mut drained = false;
        // Each pass starts at the per-CPU stock; `stocked` says this pass's look at it is
        // done (in the same borrow as the step before it, with no await in between).
        let mut stocked = true;
        loop {
            if !std::mem::take(&mut stocked) && self.mm.borrow_mut().consume_stock(cpu, memcg, nr) {
                return true;
            }
            // The page counters of every level are shared cache lines: a sync point.
            self.e.sync().await;
            let res = {
                let mut mm = self.mm.borrow_mut();
                let r = mm.page_counter_try_charge(memcg, batch);
                // Each level's counter line is written (and put back on failure).
                let mut c = Some(memcg);
                while let Some(id) = c {
                    let m = &mut mm.memcgs[id as usize];
                    let d = self.e.rmw_line(&mut m.counter_line);
                    self.e.charge(d);
                    c = m.parent;
                }
                if r.is_err() && batch > nr {
                    // The batch did not fit: retry with what was asked for.
                    batch = nr;
                    if mm.consume_stock(cpu, memcg, nr) {
                        return true;
                    }
                    stocked = true;
                    continue;
                }
                r
            };
            let over = match res {
                Ok(()) => break,
                Err(over) => over,
            };
            self.mm
                .borrow_mut()
                .memcg_memory_event(over, MemcgEvent::Max);
            if self.current_killed() {
                return false;
            }
            let reclaimed = self
                .try_to_free_mem_cgroup_pages(over, nr, MEMCG_RECLAIM_MAY_SWAP, None)
                .await;
            if self.mm.borrow().mem_cgroup_margin(over) >= nr {
                continue;
            }
            if !drained {
                self.mm.borrow_mut().drain_all_stock(over);
                drained = true;
                continue;
            }
            if reclaimed > 0 && nr <= 8 {
                continue;
            }
            if retries > 0 {
                retries -= 1;
                continue;
            }
            self.mm
                .borrow_mut()
                .memcg_memory_event(over, MemcgEvent::Oom);
            if self.mem_cgroup_out_of_memory(over).await && !self.current_killed() {
                retries = super::MAX_RECLAIM_RETRIES;
                continue;
            }
            return false;
        }
        // Charges above memory.high are paid back on return to user space, or at once
        // when the debt grows past a batch (the task may stay in the kernel for long).
        let over_high = {
            let mut mm = self.mm.borrow_mut();
            if batch > nr {
                mm.refill_stock(cpu, memcg, batch - nr);
            }
            mm.memcg_ancestors(memcg)
                .iter()
                .any(|&id| mm.memcgs[id as usize].usage > mm.memcgs[id as usize].high)
        };
        // (The kernel also skips PF_MEMALLOC callers; nothing charges from reclaim here.)
        if over_high && self.add_over_high(batch, memcg) > MEMCG_CHARGE_BATCH {
            self.handle_over_high_on_return().await;
        }
        true
    }

    /// mem_cgroup_handle_over_high(): reclaim the memcgs above memory.high and sleep the
    /// penalty (capped at 2 s) if usage stays above it; skipped below HZ/100.
    pub async fn mem_cgroup_handle_over_high(&self, memcg: MemcgId, nr_pages: u64) {
        let mut retries = super::MAX_RECLAIM_RETRIES;
        let mut in_retry = false;
        loop {
            // reclaim_high()
            let chain: Vec<MemcgId> = {
                let mm = self.mm.borrow();
                mm.memcg_ancestors(memcg)
                    .iter()
                    .copied()
                    .filter(|&m| m != 0)
                    .collect()
            };
            let mut reclaimed = 0;
            for m in chain {
                let above = {
                    let mm = self.mm.borrow();
                    mm.memcgs[m as usize].usage > mm.memcgs[m as usize].high
                };
                if above {
                    self.mm.borrow_mut().memcg_memory_event(m, MemcgEvent::High);
                    reclaimed += self
                        .try_to_free_mem_cgroup_pages(
                            m,
                            if in_retry {
                                super::SWAP_CLUSTER_MAX
                            } else {
                                nr_pages
                            },
                            MEMCG_RECLAIM_MAY_SWAP,
                            None,
                        )
                        .await;
                }
            }
            let max_overage = {
                let mm = self.mm.borrow();
                mm.memcg_ancestors(memcg)
                    .iter()
                    .map(|&m| {
                        calculate_overage(mm.memcgs[m as usize].usage, mm.memcgs[m as usize].high)
                    })
                    .max()
                    .unwrap_or(0)
            };
            let penalty = calculate_high_delay(nr_pages, max_overage).min(2 * HZ);
            if penalty <= HZ / 100 {
                return;
            }
            if reclaimed > 0 || retries > 0 {
                if reclaimed == 0 {
                    retries -= 1;
                }
                in_retry = true;
                if self.current_killed() {
                    return;
                }
                continue;
            }
            self.e.sleep(penalty * JIFFY_NS).await;
            return;
        }
    }
}

// ---------------------------------------------------------------------------------------
// memory.reclaim: proactive reclaim from user space
// ---------------------------------------------------------------------------------------

use super::lru_gen::{MAX_SWAPPINESS, MIN_SWAPPINESS, SWAPPINESS_ANON_ONLY};
use crate::versions::Rules;

/// The errors of a memory.reclaim write, as the write(2) returns them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Errno {
    /// -EINVAL: the buffer does not parse.
    Einval,
    /// -EAGAIN: the amount could not be reclaimed within the retries.
    Eagain,
    /// -EEXIST: an lru_gen "+" command found the lruvec aged already
    /// (try_to_inc_max_seq failed).
    Eexist,
}

impl Errno {
    /// The name a shell prints for it (as a negated errno).
    pub fn name(self) -> &'static str {
        match self {
            Errno::Einval => "-EINVAL",
            Errno::Eagain => "-EAGAIN",
            Errno::Eexist => "-EEXIST",
        }
    }
}

/// A memory.reclaim request after parsing: the pages to reclaim (bytes / PAGE_SIZE) and the
/// swappiness override (None = the memcg's; SWAPPINESS_ANON_ONLY for `swappiness=max`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReclaimRequest {
    pub nr_to_reclaim: u64,
    pub swappiness: Option<u32>,
}

/// The base-0 integer prefix of `s` as simple_strtoull() reads it ("0x" hex, a leading
/// "0" octal, else decimal; overflow wraps): (value, characters used).
fn simple_strtoull(s: &str) -> (u64, usize) {
    let b = s.as_bytes();
    let (radix, mut i) = if b.first() == Some(&b'0') {
        if matches!(b.get(1), Some(b'x' | b'X')) && b.get(2).is_some_and(u8::is_ascii_hexdigit) {
            (16, 2)
        } else {
            (8, 0)
        }
    } else {
        (10, 0)
    };
    let mut v = 0u64;
    while let Some(d) = b.get(i).and_then(|&c| (c as char).to_digit(radix)) {
        v = v.wrapping_mul(radix as u64).wrapping_add(d as u64);
        i += 1;
    }
    (v, i)
}

/// memparse() of lib/cmdline.c: a number with an optional one-letter binary suffix
/// K, M, G, T, P or E (either case). Returns the value and the unparsed rest. As in C, a
/// suffix is taken even after no digit at all ("M" is 0 with nothing left).
pub fn memparse(s: &str) -> (u64, &str) {
    let (mut v, mut n) = simple_strtoull(s);
    let shift = match s[n..].chars().next().map(|c| c.to_ascii_uppercase()) {
        Some('K') => 10,
        Some('M') => 20,
        Some('G') => 30,
        Some('T') => 40,
        Some('P') => 50,
        Some('E') => 60,
        _ => 0,
    };
    if shift > 0 {
        // Each suffix step shifts by 10 and drops what overflows, as the C code does.
        v = (0..shift / 10).fold(v, |x, _| x << 10);
        n += 1;
    }
    (v, &s[n..])
}

/// strstrip(): without the leading and trailing white space of isspace().
fn strstrip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\x0b')
}

/// The `swappiness=%d` token of match_token(): a signed base-0 integer taking the whole
/// rest of the token, in int range (match_int). None when the token is not of that form.
fn match_swappiness_int(tok: &str) -> Option<std::result::Result<i64, Errno>> {
    let arg = tok.strip_prefix("swappiness=")?;
    let (neg, digits) = match arg.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, arg),
    };
    let (v, n) = simple_strtoull(digits);
    if n == 0 || n != digits.len() {
        return None;
    }
    // match_int() re-reads the argument with kstrtoint: out of int range is an error.
    let v = i64::try_from(v).ok().map(|v| if neg { -v } else { v });
    Some(match v {
        Some(v) if i32::try_from(v).is_ok() => Ok(v),
        _ => Err(Errno::Einval),
    })
}

/// PAGE_COUNTER_MAX on 64-bit: LONG_MAX / PAGE_SIZE.
const PAGE_COUNTER_MAX: u64 = i64::MAX as u64 / super::PAGE_SIZE;

/// The argument parsing of user_proactive_reclaim(): `<bytes> [swappiness=<0..200>|max]`,
/// stripped of surrounding whitespace, the size through memparse and divided by PAGE_SIZE,
/// the rest split on single spaces (empty tokens skipped). Anything else is -EINVAL,
/// including a size unit memparse does not know ("256MB": the "B" is an unknown token).
///
/// By version: `swappiness=max` needs rule memory_reclaim_swappiness_max (6.16); without
/// rule memory_reclaim_swappiness (6.1) the buffer is page_counter_memparse(buf, "")'s:
/// the size alone, nothing after it, and an empty buffer is PAGE_COUNTER_MAX pages.
pub fn parse_memory_reclaim(
    buf: &str,
    rules: &Rules,
) -> std::result::Result<ReclaimRequest, Errno> {
    let buf = strstrip(buf);
    if !rules.memory_reclaim_swappiness {
        if buf.is_empty() {
            return Ok(ReclaimRequest {
                nr_to_reclaim: PAGE_COUNTER_MAX,
                swappiness: None,
            });
        }
        let (bytes, rest) = memparse(buf);
        if !rest.is_empty() {
            return Err(Errno::Einval);
        }
        return Ok(ReclaimRequest {
            nr_to_reclaim: (bytes / super::PAGE_SIZE).min(PAGE_COUNTER_MAX),
            swappiness: None,
        });
    }
    let (bytes, rest) = memparse(buf);
    if rest.len() == buf.len() {
        return Err(Errno::Einval);
    }
    let mut swappiness = None;
    for tok in strstrip(rest).split(' ').filter(|t| !t.is_empty()) {
        if let Some(v) = match_swappiness_int(tok) {
            let v = v?;
            if !(MIN_SWAPPINESS as i64..=MAX_SWAPPINESS as i64).contains(&v) {
                return Err(Errno::Einval);
            }
            swappiness = Some(v as u32);
        } else if tok == "swappiness=max" && rules.memory_reclaim_swappiness_max {
            swappiness = Some(SWAPPINESS_ANON_ONLY);
        } else {
            return Err(Errno::Einval);
        }
    }
    Ok(ReclaimRequest {
        nr_to_reclaim: bytes / super::PAGE_SIZE,
        swappiness,
    })
}

/// One try_to_free_mem_cgroup_pages call of a memory.reclaim write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProactiveCall {
    /// The batch asked for ((target - reclaimed) / 4; the reclaim path raises it to 32).
    pub batch: u64,
    pub reclaimed: u64,
    /// lru_add_drain_all() ran just before this call (the last retry).
    pub drained: bool,
}

/// The outcome of one memory.reclaim write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProactiveReclaim {
    /// Pages requested (0 when the buffer did not parse).
    pub nr_to_reclaim: u64,
    /// Pages reclaimed (may exceed the request: reclaim works in SWAP_CLUSTER_MAX chunks).
    pub nr_reclaimed: u64,
    pub calls: Vec<ProactiveCall>,
    /// Ok(()) when the write returns its length; else the error it returns.
    pub result: std::result::Result<(), Errno>,
}

impl crate::sim::Sim {
    /// user_proactive_reclaim() for a memcg (mm/vmscan.c since 6.17; the handler of a
    /// write to memory.reclaim, memory_reclaim() in mm/memcontrol.c, passes the buffer
    /// through). Any memcg, the root included: root reclaim goes through the same memcg
    /// path with the root as target, reclaiming the whole machine.
    ///
    /// While less than the request is reclaimed, ask try_to_free_mem_cgroup_pages for a
    /// quarter of what is left (all of it on 6.1: rule memory_reclaim_quarter_batch)
    /// (MAY_SWAP | PROACTIVE, with the write's swappiness). A call
    /// that reclaims nothing uses up one of MAX_RECLAIM_RETRIES retries; once none are left
    /// the per-CPU LRU batches of every CPU are drained before each further call, and the
    /// next call that reclaims nothing fails the write with -EAGAIN (so at most 17 empty
    /// calls in all). Progress does not restore retries.
    ///
    /// Simplified: no signals (-EINTR) and no dying-memcg check (neither exists here); the
    /// writer is a user task, so reclaim may throttle it like any direct reclaimer.
    pub async fn user_proactive_reclaim(&self, buf: &str, memcg: MemcgId) -> ProactiveReclaim {
        let rules = self.rules();
        let req = match parse_memory_reclaim(buf, &rules) {
            Ok(r) => r,
            Err(e) => {
                return ProactiveReclaim {
                    nr_to_reclaim: 0,
                    nr_reclaimed: 0,
                    calls: Vec::new(),
                    result: Err(e),
                }
            }
        };
        let mut out = ProactiveReclaim {
            nr_to_reclaim: req.nr_to_reclaim,
            nr_reclaimed: 0,
            calls: Vec::new(),
            result: Ok(()),
        };
        let mut nr_retries = super::MAX_RECLAIM_RETRIES;
        while out.nr_reclaimed < out.nr_to_reclaim {
            // Converges on zero; try_to_free_mem_cgroup_pages enforces SWAP_CLUSTER_MAX.
            // Before rule memory_reclaim_quarter_batch (6.1), all that is left.
            let left = out.nr_to_reclaim - out.nr_reclaimed;
            let batch = if rules.memory_reclaim_quarter_batch {
                left / 4
            } else {
                left
            };
            let drained = nr_retries == 0;
            if drained {
                // The final attempt: bring folios waiting in per-CPU batches onto the LRU.
                self.lru_add_drain_all().await;
            }
            let reclaimed = self
                .try_to_free_mem_cgroup_pages(
                    memcg,
                    batch,
                    MEMCG_RECLAIM_MAY_SWAP | super::vmscan::MEMCG_RECLAIM_PROACTIVE,
                    req.swappiness,
                )
                .await;
            out.calls.push(ProactiveCall {
                batch,
                reclaimed,
                drained,
            });
            if reclaimed == 0 {
                if nr_retries == 0 {
                    out.result = Err(Errno::Eagain);
                    break;
                }
                nr_retries -= 1;
            }
            out.nr_reclaimed += reclaimed;
        }
        out
    }
}

#[cfg(test)]
mod reclaim_parse_tests {
    use super::*;

    #[test]
    fn memparse_suffixes_and_bases() {
        assert_eq!(memparse("256M"), (256 << 20, ""));
        assert_eq!(memparse("1g rest"), (1 << 30, " rest"));
        assert_eq!(memparse("0x10k"), (16 << 10, ""));
        assert_eq!(memparse("010"), (8, ""));
        assert_eq!(memparse("12"), (12, ""));
        assert_eq!(memparse("2E"), (2 << 60, ""));
        // No digit: nothing consumed, except a suffix letter, which C takes regardless.
        assert_eq!(memparse("-1"), (0, "-1"));
        assert_eq!(memparse("M"), (0, ""));
    }

    #[test]
    fn memory_reclaim_arguments() {
        let ok = |n, s| {
            Ok(ReclaimRequest {
                nr_to_reclaim: n,
                swappiness: s,
            })
        };
        // 256M / 4096 = 65536 pages.
        assert_eq!(
            parse_memory_reclaim("256M\n", &Rules::default()),
            ok(65536, None)
        );
        assert_eq!(
            parse_memory_reclaim("  1G  swappiness=60 ", &Rules::default()),
            ok(262144, Some(60))
        );
        assert_eq!(
            parse_memory_reclaim("1G swappiness=max", &Rules::default()),
            ok(262144, Some(201))
        );
        assert_eq!(
            parse_memory_reclaim("1G swappiness=0", &Rules::default()),
            ok(262144, Some(0))
        );
        assert_eq!(
            parse_memory_reclaim("1G swappiness=200", &Rules::default()),
            ok(262144, Some(200))
        );
        // Less than a page: nothing to reclaim (the write succeeds at once); so is a bare
        // suffix, which memparse consumes.
        assert_eq!(parse_memory_reclaim("4095", &Rules::default()), ok(0, None));
        assert_eq!(parse_memory_reclaim("M", &Rules::default()), ok(0, None));
        // Whitespace after the size is stripped before the tokens are split on spaces.
        assert_eq!(
            parse_memory_reclaim("1G\tswappiness=1", &Rules::default()),
            ok(262144, Some(1))
        );
        // The last swappiness given wins.
        assert_eq!(
            parse_memory_reclaim("8K swappiness=max  swappiness=10", &Rules::default()),
            ok(2, Some(10))
        );
        for bad in [
            "",
            "abc",
            "256MB",
            "1G swappiness=201",
            "1G swappiness=-1",
            "1G swappiness=",
            "1G swappiness=6x",
            "1G swappiness=99999999999",
            "1G swap=1",
            "1G swappiness=1\tswappiness=2",
        ] {
            assert_eq!(
                parse_memory_reclaim(bad, &Rules::default()),
                Err(Errno::Einval),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn memory_reclaim_arguments_by_version() {
        use crate::versions::KernelVersion::*;
        let (v6_1, v6_12) = (Rules::of(V6_1), Rules::of(V6_12));
        let ok = |n| {
            Ok(ReclaimRequest {
                nr_to_reclaim: n,
                swappiness: None,
            })
        };
        // 6.1: page_counter_memparse(buf, ""): the size alone; an empty buffer is
        // PAGE_COUNTER_MAX = (2^63 - 1) / 4096 = 2^51 - 1 pages.
        assert_eq!(parse_memory_reclaim(" 256M\n", &v6_1), ok(65536));
        assert_eq!(parse_memory_reclaim("  ", &v6_1), ok((1 << 51) - 1));
        assert_eq!(parse_memory_reclaim("8E", &v6_1), ok((1 << 51) - 1));
        for bad in [
            "1G swappiness=60",
            "1G swappiness=max",
            "256MB",
            "max",
            "abc",
        ] {
            assert_eq!(
                parse_memory_reclaim(bad, &v6_1),
                Err(Errno::Einval),
                "6.1 {bad:?}"
            );
        }
        // 6.12: swappiness=N, not max; an empty buffer is -EINVAL.
        assert_eq!(
            parse_memory_reclaim("1G swappiness=60", &v6_12),
            Ok(ReclaimRequest {
                nr_to_reclaim: 262144,
                swappiness: Some(60)
            })
        );
        for bad in ["1G swappiness=max", ""] {
            assert_eq!(
                parse_memory_reclaim(bad, &v6_12),
                Err(Errno::Einval),
                "6.12 {bad:?}"
            );
        }
    }
}

#[cfg(test)]
mod high_tests {
    use super::*;

    #[test]
    fn high_delay_arithmetic() {
        // 10% over high: overage = 0.1 * 2^20 = 104857.
        let o = calculate_overage(1100, 1000);
        assert_eq!(o, (100u64 << 20) / 1000);
        // penalty = o^2 * HZ >> 20 >> 14, scaled by nr/64: 104857^2*1000 >> 34 = 639 jiffies.
        assert_eq!(
            calculate_high_delay(64, o),
            ((o as u128 * o as u128 * 1000) >> 34) as u64
        );
        assert_eq!(calculate_high_delay(32, o), calculate_high_delay(64, o) / 2);
        assert_eq!(calculate_overage(900, 1000), 0);
        assert_eq!(calculate_high_delay(64, 0), 0);
    }
}

/// Memcg counter items whose update cost is modeled (the value itself is kept exactly
/// elsewhere): what a page fault, a charge, an uncharge and every LRU list operation
/// update, in both eras the memcg_stats switch models.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum StatKind {
    /// PGFAULT (count_memcg_events in handle_mm_fault).
    Pgfault = 0,
    /// PGPGIN (mem_cgroup_charge_statistics at commit_charge).
    Pgpgin = 1,
    /// PGPGOUT (uncharge_batch, once per batch of folios of one memcg).
    Pgpgout = 2,
    /// NR_ANON_MAPPED (folio_add_new_anon_rmap / folio_remove_rmap; the 2019 kernel's
    /// MEMCG_RSS, counted per page as well).
    AnonMapped = 3,
    /// NR_FILE_MAPPED (folio_add_file_rmap / folio_remove_rmap).
    FileMapped = 4,
    /// NR_LRU_BASE + lru (update_lru_size, from every lruvec_add_folio and
    /// lruvec_del_folio): four items, one per evictable list.
    LruInactiveAnon = 5,
    LruActiveAnon = 6,
    LruInactiveFile = 7,
    LruActiveFile = 8,
}
pub const NR_STAT_KINDS: usize = 9;

/// Line groups of the counter arrays: the kernel keeps each family's items in one array of
/// 8-byte counters, so adjacent items share a 64-byte line. PGPGIN and PGPGOUT are the
/// first two vm_event_items, the four LRU sizes the first node_stat_items; the others are
/// far apart and get a line each.
pub const NR_STAT_LINES: usize = 5;

impl StatKind {
    /// The list's LRU-size item (lru as in mmzone: inactive/active x anon/file).
    pub fn lru(lru: usize) -> StatKind {
        [
            StatKind::LruInactiveAnon,
            StatKind::LruActiveAnon,
            StatKind::LruInactiveFile,
            StatKind::LruActiveFile,
        ][lru]
    }

    /// The line group of the item in each counter array.
    fn line(self) -> usize {
        match self {
            StatKind::Pgfault => 0,
            StatKind::Pgpgin | StatKind::Pgpgout => 1,
            StatKind::AnonMapped => 2,
            StatKind::FileMapped => 3,
            _ => 4,
        }
    }

    /// Events are memcg counters only; a state item updated by __mod_lruvec_state is a
    /// memcg counter and a lruvec counter.
    fn families(self) -> usize {
        match self {
            StatKind::Pgfault | StatKind::Pgpgin | StatKind::Pgpgout => 1,
            _ => 2,
        }
    }
}

/// The per-CPU batch of 42a300353577's counters before they spill (MEMCG_CHARGE_BATCH then).
const STAT_SPILL_BATCH: i64 = 32;

/// Per-CPU state of the modeled memcg counters: the pending [local, hierarchical] deltas
/// of each (cpu, memcg, kind) (memcg_vmstats_percpu) and of each (cpu, lruvec, kind)
/// (the per-node lruvec_stat_cpu), and per (cpu, memcg) rstat's pending update count.
#[derive(Default)]
pub struct StatPcpu {
    nr_memcgs: usize,
    nr_lruvecs: usize,
    memcg_deltas: Vec<[i64; 2]>,
    lruvec_deltas: Vec<[i64; 2]>,
    rstat_updates: Vec<u64>,
}

impl StatPcpu {
    pub fn new(nr_cpus: usize, nr_memcgs: usize, nr_lruvecs: usize) -> Self {
        StatPcpu {
            nr_memcgs,
            nr_lruvecs,
            memcg_deltas: vec![[0; 2]; nr_cpus * nr_memcgs * NR_STAT_KINDS],
            lruvec_deltas: vec![[0; 2]; nr_cpus * nr_lruvecs * NR_STAT_KINDS],
            rstat_updates: vec![0; nr_cpus * nr_memcgs],
        }
    }
}

/// Counter updates made where there is no CPU or clock (the Mm's list operations and
/// frees), applied by the Sim on the CPU that made them at the end of the lock hold or free
/// loop (Sim::flush_stat_pending). Consecutive updates of one (memcg, item) are summed into
/// one, as update_lru_sizes does for an isolation batch and uncharge_batch for a run of
/// folios of one memcg. Simplified: lru_add's per-folio update_lru_size calls of one hold
/// are summed too (the spills they cause depend on the sum; the per-CPU adds' own cost is
/// in the list operation's).
#[derive(Default)]
pub struct StatPending {
    /// update_lru_size of the current lru_lock hold (applied inside the hold).
    held: Vec<StatUpdate>,
    /// uncharge_batch of freed folios (applied after the free loop, outside any lock).
    freed: Vec<StatUpdate>,
}

/// One pending counter update: (memcg, node of the lruvec, item, delta).
type StatUpdate = (MemcgId, u32, StatKind, i64);

fn push_summed(v: &mut Vec<StatUpdate>, u: StatUpdate) {
    match v.last_mut() {
        Some(last) if (last.0, last.1, last.2) == (u.0, u.1, u.2) => last.3 += u.3,
        _ => v.push(u),
    }
}

impl StatPending {
    /// No update is pending in the hold's list (`held`) or the free loop's.
    #[inline]
    pub fn is_empty(&self, held: bool) -> bool {
        if held {
            self.held.is_empty()
        } else {
            self.freed.is_empty()
        }
    }

    pub fn push_held(&mut self, memcg: MemcgId, nid: u32, kind: StatKind, delta: i64) {
        push_summed(&mut self.held, (memcg, nid, kind, delta));
    }

    pub fn push_freed(&mut self, memcg: MemcgId, nid: u32, kind: StatKind, delta: i64) {
        push_summed(&mut self.freed, (memcg, nid, kind, delta));
    }
}

impl crate::sim::Sim {
    /// The cost of one update of a memcg counter on this CPU, under the statistics scheme
    /// of `memcg_stats` (seed 004). The value itself is kept exactly elsewhere; what is
    /// modeled here is which shared cache lines the update writes, and how often:
    ///
    /// - `rstat` (today, memcg_rstat_updated): a per-CPU write; every MEMCG_CHARGE_BATCH
    ///   updates, the pending count goes to each level's stats_updates atomic.
    /// - `batched_local` (42a300353577): per-CPU deltas for the local and the hierarchical
    ///   counter; past 32 the local one spills into the memcg's local atomic and the
    ///   hierarchical one into the atomics of the memcg and every ancestor.
    /// - `percpu_local` (the seed's fix): the local counter stays per-CPU (summed on read);
    ///   the hierarchical one spills as above.
    ///
    /// A state item is a memcg counter and a counter of the memcg's lruvec on node `nid`,
    /// as __mod_lruvec_state updates both, each with its own local and hierarchical lines
    /// and per-CPU batch; the lruvec's hierarchical spill walks the ancestors' lruvecs of
    /// the same node (parent_nodeinfo). An event is a memcg counter (`nid` unused). Items
    /// share a line as the kernel's arrays place them (StatKind::line). Simplified: the
    /// walk up the tree always reaches the root.
    #[inline]
    pub fn memcg_stat_update(&self, memcg: MemcgId, nid: u32, kind: StatKind, delta: i64) {
        self.memcg_stat_update_mm(&mut self.mm.borrow_mut(), memcg, nid, kind, delta);
    }

    /// Apply the Mm's pending counter updates (StatPending) on this CPU: those of the
    /// lru_lock hold (`held`, at unlock) or those of a free loop (`freed`).
    #[inline]
    pub fn flush_stat_pending(&self, held: bool) {
        if !self.mm.borrow().stat_pending.is_empty(held) {
            self.flush_stat_pending_now(held);
        }
    }

    /// [`Sim::flush_stat_pending`] of a list with updates in it.
    fn flush_stat_pending_now(&self, held: bool) {
        let mut mm = self.mm.borrow_mut();
        let list = if held {
            &mut mm.stat_pending.held
        } else {
            &mut mm.stat_pending.freed
        };
        let mut items = std::mem::take(list);
        for &(memcg, nid, kind, delta) in &items {
            if delta != 0 {
                self.memcg_stat_update_mm(&mut mm, memcg, nid, kind, delta);
            }
        }
        items.clear();
        if held {
            mm.stat_pending.held = items;
        } else {
            mm.stat_pending.freed = items;
        }
    }

    /// [`Sim::memcg_stat_update`] for a caller that already holds the mm. Inlined (it runs
    /// for every list operation): rstat's per-CPU count here, its flush and the batched
    /// schemes out of line.
    #[inline(always)]
    pub fn memcg_stat_update_mm(
        &self,
        mm: &mut Mm,
        memcg: MemcgId,
        nid: u32,
        kind: StatKind,
        delta: i64,
    ) {
        use crate::variant::MemcgStats;
        let cpu = self.e.cpu() as usize;
        self.e.charge(self.c.stat_update);
        if self.v.memcg_stats == MemcgStats::Rstat {
            let pcpu = &mut mm.stat_pcpu;
            let u = &mut pcpu.rstat_updates[cpu * pcpu.nr_memcgs + memcg as usize];
            *u += delta.unsigned_abs();
            if *u >= MEMCG_CHARGE_BATCH {
                *u = 0;
                self.memcg_rstat_flush_updates(mm, memcg);
            }
            return;
        }
        self.memcg_stat_update_batched(mm, cpu, memcg, nid, kind, delta);
    }

    /// memcg_rstat_updated() past MEMCG_CHARGE_BATCH: the pending count goes to each
    /// level's stats_updates atomic.
    #[inline(never)]
    fn memcg_rstat_flush_updates(&self, mm: &mut Mm, memcg: MemcgId) {
        let memcgs = &mut mm.memcgs;
        for i in 0..memcgs[memcg as usize].ancestors.len() {
            let m = memcgs[memcg as usize].ancestors[i] as usize;
            self.atomic_add(&mut memcgs[m].stat_updates_line);
        }
    }

    /// [`Sim::memcg_stat_update_mm`] under the batched schemes (`batched_local`,
    /// `percpu_local`).
    #[inline(never)]
    fn memcg_stat_update_batched(
        &self,
        mm: &mut Mm,
        cpu: usize,
        memcg: MemcgId,
        nid: u32,
        kind: StatKind,
        delta: i64,
    ) {
        let local = self.v.memcg_stats == crate::variant::MemcgStats::BatchedLocal;
        self.memcg_family_update(mm, cpu, memcg, kind, delta, local);
        if kind.families() == 2 {
            let lv = mm.lruvec_of(memcg, nid);
            self.lruvec_family_update(mm, cpu, lv, kind, delta, local);
        }
    }

    /// __mod_memcg_state / __count_memcg_events of the batched schemes: past 32 the local
    /// delta spills into the memcg's local atomic (`local`: 42a300353577 only) and the
    /// hierarchical one into the atomic of the memcg and of every ancestor.
    fn memcg_family_update(
        &self,
        mm: &mut Mm,
        cpu: usize,
        memcg: MemcgId,
        kind: StatKind,
        delta: i64,
        local: bool,
    ) {
        let Mm {
            memcgs, stat_pcpu, ..
        } = mm;
        let at = (cpu * stat_pcpu.nr_memcgs + memcg as usize) * NR_STAT_KINDS + kind as usize;
        let d = &mut stat_pcpu.memcg_deltas[at];
        let line = kind.line();
        if local && spill(&mut d[0], delta) {
            self.atomic_add(&mut memcgs[memcg as usize].stat_lines[line][0]);
        }
        if spill(&mut d[1], delta) {
            for i in 0..memcgs[memcg as usize].ancestors.len() {
                let m = memcgs[memcg as usize].ancestors[i] as usize;
                self.atomic_add(&mut memcgs[m].stat_lines[line][1]);
            }
        }
    }

    /// The lruvec half of __mod_lruvec_state in the batched schemes: the same spills on the
    /// lines of the memcg's lruvec on this node (struct mem_cgroup_per_node), the
    /// hierarchical one up the ancestors' lruvecs of that node (parent_nodeinfo).
    fn lruvec_family_update(
        &self,
        mm: &mut Mm,
        cpu: usize,
        lv: LruvecId,
        kind: StatKind,
        delta: i64,
        local: bool,
    ) {
        let Mm {
            lruvecs, stat_pcpu, ..
        } = mm;
        let at = (cpu * stat_pcpu.nr_lruvecs + lv as usize) * NR_STAT_KINDS + kind as usize;
        let d = &mut stat_pcpu.lruvec_deltas[at];
        let line = kind.line();
        if local && spill(&mut d[0], delta) {
            self.atomic_add(&mut lruvecs[lv as usize].stat_lines[line][0]);
        }
        if spill(&mut d[1], delta) {
            let mut cur = Some(lv);
            while let Some(l) = cur {
                self.atomic_add(&mut lruvecs[l as usize].stat_lines[line][1]);
                cur = lruvecs[l as usize].parent;
            }
        }
    }

    /// atomic_long_add() on a shared counter line: this CPU waits for the line, takes it
    /// from its last writer and does the atomic (Engine::rmw_line), all of it CPU time.
    fn atomic_add(&self, line: &mut CacheLine) {
        let c = self.e.rmw_line(line);
        self.e.charge(c);
    }
}

/// Add `delta` to a per-CPU batch; true (and the batch emptied) when it went past the
/// spill threshold, abs(x) > 32.
fn spill(x: &mut i64, delta: i64) -> bool {
    *x += delta;
    if x.abs() > STAT_SPILL_BATCH {
        *x = 0;
        true
    } else {
        false
    }
}
