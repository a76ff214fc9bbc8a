//! The page allocator: watermarks, the allocation fast and slow paths, and freeing.
//!
//! Models mm/page_alloc.c for order-0 GFP_HIGHUSER_MOVABLE allocations. The fast path takes
//! a page from the first node in the zonelist (local node first) whose free pages exceed the
//! LOW watermark. Otherwise the slow path wakes every node's kswapd, retries against MIN,
//! enters direct reclaim (try_to_free_pages), retries, and loops while
//! should_reclaim_retry() sees progress or reclaimable memory, up to MAX_RECLAIM_RETRIES
//! loops without progress; then the OOM killer.
//!
//! Simplified: no per-CPU page lists or buddy orders (a frame is taken from the node's free
//! stack, linked through a field the free frames do not use, as the buddy lists link
//! free pages through page->buddy_list, or its never-used tail), no compaction, no highatomic reserves, no watermark boost,
//! no cpusets/mempolicies (the zonelist is the local node, then the others in id order).

use super::mm_types::*;
use super::mmzone::{WMARK_LOW, WMARK_MIN};
use super::vmstat::{NodeStat, VmEvent};
use super::{Mm, Pfn, MAX_RECLAIM_RETRIES, NIL};
use crate::sim::Sim;

/// Most nodes a scenario may have (Scenario::validate enforces it).
pub const MAX_NUMNODES: usize = 8;

/// struct zonelist: the nodes an allocation may use, preferred first (one zone each).
/// A value, so the allocation fast path builds it without touching the heap.
#[derive(Clone, Copy)]
pub struct Zonelist {
    nodes: [u32; MAX_NUMNODES],
    len: u8,
}

impl std::ops::Deref for Zonelist {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.nodes[..self.len as usize]
    }
}

impl Mm {
    /// The zonelist of `node`: itself first, then the other nodes in id order.
    #[inline]
    pub fn zonelist(&self, node: u32) -> Zonelist {
        let n = self.nodes.len() as u32;
        debug_assert!(n as usize <= MAX_NUMNODES);
        let mut zl = Zonelist {
            nodes: [0; MAX_NUMNODES],
            len: n as u8,
        };
        for i in 0..n {
            // (node + i) mod n, without a division on the allocation fast path.
            let x = node + i;
            zl.nodes[i as usize] = if x >= n { x - n } else { x };
        }
        zl
    }

    /// rmqueue(): take a free frame from `node`.
    pub(crate) fn rmqueue(&mut self, node: u32) -> Option<Pfn> {
        let nd = &mut self.nodes[node as usize];
        if nd.free == 0 {
            return None;
        }
        let pfn = if nd.free_head != NIL {
            let p = nd.free_head;
            nd.free_head = self.pages[p as usize].index;
            p
        } else {
            let p = nd.next_unused;
            nd.next_unused += 1;
            p
        };
        nd.free -= 1;
        self.used_frames += 1;
        self.peak_used_frames = self.peak_used_frames.max(self.used_frames);
        let p = &mut self.pages[pfn as usize];
        debug_assert_eq!(p.flags, 0, "allocating a frame in use");
        // The allocating task holds the new folio (and has it locked) until it is set up.
        *p = Page::with_flags(PG_ALLOCATED | PG_LOCKED);
        self.count_event(VmEvent::Pgalloc, 1);
        Some(pfn)
    }

    /// get_page_from_freelist(): the first node of the zonelist above `mark`.
    pub fn get_page_from_freelist(&mut self, node: u32, mark: usize) -> Option<Pfn> {
        for &n in self.zonelist(node).iter() {
            if self.nodes[n as usize].watermark_ok(mark) {
                return self.rmqueue(n);
            }
        }
        None
    }

    /// free_unref_folios() for one folio: uncharge it from its memcg
    /// (mem_cgroup_uncharge) and give the frame back to its node.
    /// The caller has unlinked it from every list and mapping. The frame's line owner is
    /// forgotten (lru_lines.rs): its next user takes the line from memory.
    pub fn free_folio(&mut self, pfn: Pfn) {
        // uncharge_batch's PGPGOUT, one update per run of one memcg's folios.
        let memcg = self.pages[pfn as usize].memcg;
        self.stat_pending
            .push_freed(memcg, 0, super::memcontrol::StatKind::Pgpgout, 1);
        if self.rules.memcg_v1_charge_statistics {
            self.memcg_rstat_updated(memcg, 1);
        }
        self.release_frame(pfn);
    }

    /// Uncharge a frame and put it back on its node's free list.
    pub(super) fn release_frame(&mut self, pfn: Pfn) {
        let p = self.pages[pfn as usize];
        debug_assert!(p.test(PG_ALLOCATED) && !p.test(PG_LRU) && !p.test(PG_INBATCH | PG_ISOLATED));
        self.page_counter_uncharge(p.memcg, 1);
        let node = self.pfn_node(pfn);
        self.pages[pfn as usize] = Page::default();
        self.pages.line_cpu[pfn as usize] = 0;
        let nd = &mut self.nodes[node as usize];
        nd.free += 1;
        // Pushed on the node's free stack through its own (unused) page offset.
        self.pages[pfn as usize].index = nd.free_head;
        nd.free_head = pfn;
        self.used_frames -= 1;
        self.count_event(VmEvent::Pgfree, 1);
    }

    /// zone_reclaimable_pages(): file LRU pages, plus anon if swap space is left.
    pub fn zone_reclaimable_pages(&self, node: u32) -> u64 {
        let swap = self.swap.as_ref().is_some_and(|s| s.nr_free() > 0);
        let mut n = 0;
        for m in &self.memcgs {
            let lv = &self.lruvecs[m.lruvecs[node as usize] as usize];
            n += lv.nr[super::mmzone::LRU_INACTIVE_FILE] + lv.nr[super::mmzone::LRU_ACTIVE_FILE];
            if swap {
                n +=
                    lv.nr[super::mmzone::LRU_INACTIVE_ANON] + lv.nr[super::mmzone::LRU_ACTIVE_ANON];
            }
        }
        n
    }

    /// node_page_state() of a state item, summed over the node's lruvecs (exact).
    pub fn node_page_state(&self, node: u32, item: NodeStat) -> u64 {
        self.memcgs
            .iter()
            .map(|m| self.lruvecs[m.lruvecs[node as usize] as usize].stat[item as usize])
            .sum::<i64>()
            .max(0) as u64
    }
}

impl Sim {
    /// __alloc_pages()'s first try for one order-0 page, preferring `node`
    /// (get_page_from_freelist at the low watermark), after the caller's sync point; None
    /// sends the caller to [`Sim::alloc_pages_slowpath`], whose None means the allocation
    /// failed even after the OOM killer (the caller's fault then fails with VM_FAULT_OOM).
    /// Synchronous, so that the common case builds no future.
    pub fn alloc_page_fast(&self, node: u32) -> Option<Pfn> {
        self.e.charge(self.c.page_alloc);
        self.mm.borrow_mut().get_page_from_freelist(node, WMARK_LOW)
    }

    /// __alloc_pages_slowpath().
    pub async fn alloc_pages_slowpath(&self, node: u32) -> Option<Pfn> {
        let mut no_progress_loops = 0u32;
        loop {
            // The retries run inside one poll: count them as work, so that Ctrl-C and a
            // clock that stops moving are seen (no effect on the model).
            if !self.e.work_point() {
                return None;
            }
            // wake_all_kswapds(): each node of the zonelist.
            let zl = self.mm.borrow().zonelist(node);
            for &n in zl.iter() {
                self.wakeup_kswapd(n);
            }
            if let Some(p) = self.mm.borrow_mut().get_page_from_freelist(node, WMARK_MIN) {
                return Some(p);
            }
            // A task being OOM-killed does not reclaim: it dies at its next check.
            if self.current_killed() {
                return None;
            }
            // __alloc_pages_direct_reclaim() -> __perform_reclaim(), whose cond_resched()
            // on either side of try_to_free_pages lets the other CPUs run: an aging that
            // another task has under way (MGLRU) completes before this one tries again.
            self.e.sync().await;
            let progress = self.try_to_free_pages(node).await;
            self.e.sync().await;
            if let Some(p) = self.mm.borrow_mut().get_page_from_freelist(node, WMARK_MIN) {
                return Some(p);
            }
            // should_reclaim_retry()
            if progress > 0 {
                no_progress_loops = 0;
            } else {
                no_progress_loops += 1;
            }
            let retry = no_progress_loops <= MAX_RECLAIM_RETRIES && {
                let mm = self.mm.borrow();
                zl.iter().any(|&n| {
                    let nd = &mm.nodes[n as usize];
                    nd.free + mm.zone_reclaimable_pages(n) > nd.wmark[WMARK_MIN]
                })
            };
            if retry {
                continue;
            }
            match self.alloc_pages_may_oom(node).await {
                (Some(p), _) => return Some(p),
                // Retry as long as the OOM killer makes progress.
                (None, true) => no_progress_loops = 0,
                (None, false) => return None,
            }
        }
    }

    /// __alloc_pages_may_oom(): (page, did_some_progress). Another task holding oom_lock
    /// counts as progress (after a one-jiffy sleep); with the lock, one more try at the
    /// HIGH watermark catches a parallel kill before the OOM killer runs.
    async fn alloc_pages_may_oom(&self, node: u32) -> (Option<Pfn>, bool) {
        if !self.mutex_trylock_oom() {
            self.e.sleep(super::memcontrol::JIFFY_NS).await;
            return (None, true);
        }
        if let Some(p) = self
            .mm
            .borrow_mut()
            .get_page_from_freelist(node, super::mmzone::WMARK_HIGH)
        {
            self.mutex_unlock_oom();
            return (Some(p), true);
        }
        (None, self.out_of_memory(None).await)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::one_node_machine;

    /// Freed frames are reused last-freed first, through their own page offset (no memory
    /// beyond the frame table, and none of the LRU links, which MGLRU does not use),
    /// before the never-used tail; a reused frame comes off the stack on no list, its
    /// offset cleared.
    #[test]
    fn freed_frames_are_a_stack_through_their_page_offset() {
        let s = one_node_machine("64M", None, "");
        let mut mm = s.mm.borrow_mut();
        let free0 = mm.nodes[0].free;
        let a: Vec<Pfn> = (0..3).map(|_| mm.rmqueue(0).unwrap()).collect();
        assert_eq!(
            a[1],
            a[0] + 1,
            "the never-used tail hands out frames in order"
        );
        assert_eq!(a[2], a[1] + 1);
        let tail = mm.nodes[0].next_unused;
        for &p in &a {
            mm.pages[p as usize].clear(PG_LOCKED);
            let _ = mm.page_counter_try_charge(0, 1);
            mm.release_frame(p);
        }
        assert_eq!(mm.nodes[0].free, free0);
        assert_eq!(mm.nodes[0].free_head, a[2]);
        assert_eq!(mm.pages[a[2] as usize].index, a[1]);
        let again: Vec<Pfn> = (0..4).map(|_| mm.rmqueue(0).unwrap()).collect();
        assert_eq!(again, vec![a[2], a[1], a[0], tail]);
        assert_eq!(mm.nodes[0].free_head, NIL);
        for &p in &again[..3] {
            assert_eq!(mm.pages[p as usize].index, 0);
            assert_eq!(mm.pages.links[p as usize], LruLink::default());
        }
    }
}
