//! The slab allocator, as far as reclaim can see it: mm/slub.c for the one cache the model
//! allocates from, radix_tree_node (lib/radix-tree.c's radix_tree_node_cachep, where the
//! page cache's xarray nodes come from).
//!
//! Why it is here. Reclaim frees xarray nodes (the shadow shrinker, workingset.rs), and a
//! freed node gives memory back only when it was the last object in use in its slab: SLUB
//! then frees the slab's pages, and the task that freed them counts them as reclaimed
//! (6.1: current->reclaim_state->reclaimed_slab in __free_slab; from 6.4
//! mm_account_reclaimed_pages), which shrink_node adds to nr_reclaimed after its pass
//! (flush_reclaim_state, vmscan.rs; from 6.5 for root reclaim only). How many pages a run of
//! freed nodes gives back depends on how they share slabs:
//!
//! ```text
//!   slab = 2 pages (order 1) = 14 objects of 584 bytes (struct xa_node, 576, and the free
//!          pointer its constructor pushes past the object; /proc/slabinfo, x86-64, 6.1-7.x)
//!   a node freed      -> its slab's inuse - 1
//!   inuse reaches 0   -> discarded (2 pages reclaimed) if its node has >= min_partial (5)
//!                        partial slabs, else kept on the partial list, empty
//! ```
//!
//! Modeled per NUMA node (kmem_cache_node): the partial list (slabs with free objects;
//! allocation takes its head, a full slab whose first object is freed joins its tail), the
//! slab allocations are served from (the cpu slab, which is never discarded and joins no
//! list while it is), and __slab_free's discard rule above. min_partial is
//! ilog2(584) / 2 = 4, raised to MIN_PARTIAL (5).
//!
//! Simplified: one cpu slab per node, not per CPU (a node's CPUs fill the same slab); no
//! per-CPU caches of freed objects or slabs (6.1 and 6.12 move a full slab whose first
//! object is freed to the freeing CPU's partial list, whose empty slabs are discarded only
//! when the list overflows cpu_partial_slabs, 2 at this size; 7.x's sheaves keep up to
//! about 30 freed objects per CPU before they go back to their slabs): the model discards
//! at the free that empties the slab. shadow_lru_isolate frees a node through call_rcu, so
//! the kernel's slab free comes a grace period later, counted for whichever task is current
//! on that CPU when the callback runs; here it comes at once, for the reclaimer. The model
//! takes no kernel memory from the nodes' free pages (memcontrol.rs), so a discarded slab
//! is credited to reclaim but frees no frame.

/// Objects of a radix_tree_node slab (oo_objects).
pub const OBJS_PER_SLAB: u8 = 14;

/// Pages of a radix_tree_node slab (order 1).
pub const PAGES_PER_SLAB: u64 = 2;

/// kmem_cache->min_partial of radix_tree_node: ilog2(584) / 2 = 4, clamped to
/// [MIN_PARTIAL, MAX_PARTIAL] = [5, 10].
pub const MIN_PARTIAL: u32 = 5;

/// No slab: an xarray node that does not exist.
pub const NO_SLAB: u32 = u32::MAX;

#[derive(Clone, Copy)]
struct Slab {
    inuse: u8,
    node: u8,
    /// On its node's partial list (prev/next link it there).
    partial: bool,
    prev: u32,
    next: u32,
}

/// kmem_cache_node: the partial list (intrusive, by slab id) and the cpu slab.
#[derive(Clone, Copy)]
struct CacheNode {
    head: u32,
    tail: u32,
    nr_partial: u32,
    cpu_slab: u32,
}

impl Default for CacheNode {
    fn default() -> Self {
        CacheNode {
            head: NO_SLAB,
            tail: NO_SLAB,
            nr_partial: 0,
            cpu_slab: NO_SLAB,
        }
    }
}

/// struct kmem_cache for radix_tree_node: its slabs by id (ids of discarded slabs are
/// reused) and its per-node state.
#[derive(Default)]
pub struct KmemCache {
    slabs: Vec<Slab>,
    free_ids: Vec<u32>,
    nodes: Vec<CacheNode>,
}

impl KmemCache {
    /// kmem_cache_alloc_node() of one object on `node`: the slab it lands in. From the cpu
    /// slab while it has room; else the head of the node's partial list becomes the cpu
    /// slab (get_partial_node), else a new slab (allocate_slab).
    pub fn alloc(&mut self, node: u32) -> u32 {
        let n = node as usize;
        if self.nodes.len() <= n {
            self.nodes.resize(n + 1, CacheNode::default());
        }
        let cpu = self.nodes[n].cpu_slab;
        if cpu != NO_SLAB && self.slabs[cpu as usize].inuse < OBJS_PER_SLAB {
            self.slabs[cpu as usize].inuse += 1;
            return cpu;
        }
        // The full cpu slab is deactivated onto no list; a free will list it.
        let head = self.nodes[n].head;
        let s = if head != NO_SLAB {
            self.remove_partial(head);
            head
        } else {
            self.new_slab(node)
        };
        self.nodes[n].cpu_slab = s;
        self.slabs[s as usize].inuse += 1;
        s
    }

    /// kmem_cache_free() of one object of slab `s` (__slab_free): the pages freed, 0 or
    /// PAGES_PER_SLAB when this was the slab's last object and its node keeps at least
    /// min_partial partial slabs (discard_slab).
    pub fn free(&mut self, s: u32) -> u64 {
        let slab = &mut self.slabs[s as usize];
        let was_full = slab.inuse == OBJS_PER_SLAB;
        slab.inuse -= 1;
        let (inuse, n) = (slab.inuse, slab.node as usize);
        if self.nodes[n].cpu_slab == s {
            return 0; // frozen: no list work
        }
        if inuse == 0 && self.nodes[n].nr_partial >= MIN_PARTIAL {
            if self.slabs[s as usize].partial {
                self.remove_partial(s);
            }
            self.free_ids.push(s);
            return PAGES_PER_SLAB;
        }
        if was_full {
            self.add_partial_tail(s);
        }
        0
    }

    /// Slabs allocated and not discarded.
    pub fn nr_slabs(&self) -> u64 {
        (self.slabs.len() - self.free_ids.len()) as u64
    }

    /// Objects in use in all slabs (a discarded slab has none).
    pub fn nr_objects(&self) -> u64 {
        self.slabs.iter().map(|s| s.inuse as u64).sum()
    }

    /// The partial list of `node`, head first, as (slab, objects in use).
    #[cfg(test)]
    pub fn partial_list(&self, node: u32) -> Vec<(u32, u8)> {
        let mut out = Vec::new();
        let mut s = self.nodes.get(node as usize).map_or(NO_SLAB, |n| n.head);
        while s != NO_SLAB {
            out.push((s, self.slabs[s as usize].inuse));
            s = self.slabs[s as usize].next;
        }
        out
    }

    fn new_slab(&mut self, node: u32) -> u32 {
        let slab = Slab {
            inuse: 0,
            node: node as u8,
            partial: false,
            prev: NO_SLAB,
            next: NO_SLAB,
        };
        if let Some(id) = self.free_ids.pop() {
            self.slabs[id as usize] = slab;
            id
        } else {
            self.slabs.push(slab);
            self.slabs.len() as u32 - 1
        }
    }

    /// add_partial(DEACTIVATE_TO_TAIL).
    fn add_partial_tail(&mut self, s: u32) {
        let n = self.slabs[s as usize].node as usize;
        let tail = self.nodes[n].tail;
        let slab = &mut self.slabs[s as usize];
        slab.partial = true;
        slab.prev = tail;
        slab.next = NO_SLAB;
        if tail == NO_SLAB {
            self.nodes[n].head = s;
        } else {
            self.slabs[tail as usize].next = s;
        }
        self.nodes[n].tail = s;
        self.nodes[n].nr_partial += 1;
    }

    /// remove_partial().
    fn remove_partial(&mut self, s: u32) {
        let Slab {
            node, prev, next, ..
        } = self.slabs[s as usize];
        let n = &mut self.nodes[node as usize];
        if prev == NO_SLAB {
            n.head = next;
        } else {
            self.slabs[prev as usize].next = next;
        }
        if next == NO_SLAB {
            n.tail = prev;
        } else {
            self.slabs[next as usize].prev = prev;
        }
        n.nr_partial -= 1;
        let slab = &mut self.slabs[s as usize];
        slab.partial = false;
        slab.prev = NO_SLAB;
        slab.next = NO_SLAB;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` objects allocated on node 0, each one's slab.
    fn alloc_n(c: &mut KmemCache, n: usize) -> Vec<u32> {
        (0..n).map(|_| c.alloc(0)).collect()
    }

    #[test]
    fn objects_fill_a_slab_before_the_next_one() {
        let mut c = KmemCache::default();
        let s = alloc_n(&mut c, 29);
        // 14 to a slab: 29 objects take three slabs, 14 + 14 + 1.
        assert_eq!(c.nr_slabs(), 3);
        assert!(s[..14].iter().all(|&x| x == s[0]));
        assert!(s[14..28].iter().all(|&x| x == s[14]) && s[14] != s[0]);
        assert!(s[28] != s[14] && s[28] != s[0]);
        assert_eq!(c.nr_objects(), 29);
    }

    #[test]
    fn an_empty_slab_is_discarded_only_beside_min_partial_others() {
        let mut c = KmemCache::default();
        // Seven full slabs and the cpu slab with one object.
        let s = alloc_n(&mut c, 7 * 14 + 1);
        // Free one object of each of the first six: six partial slabs, none empty.
        for k in 0..6 {
            assert_eq!(c.free(s[k * 14]), 0);
        }
        assert_eq!(c.partial_list(0).len(), 6);
        // Emptying slab 0 with six partials (>= 5): discarded, two pages.
        for &x in &s[1..13] {
            assert_eq!(c.free(x), 0);
        }
        assert_eq!(c.free(s[13]), PAGES_PER_SLAB);
        assert_eq!(c.partial_list(0).len(), 5);
        // Emptying slab 1 with five partials (>= 5): discarded too.
        let freed: u64 = (15..28).map(|i| c.free(s[i])).sum();
        assert_eq!(freed, PAGES_PER_SLAB);
        // Four partials left: the next slab to empty stays, listed with nothing in use.
        let freed: u64 = (29..42).map(|i| c.free(s[i])).sum();
        assert_eq!(freed, 0);
        assert_eq!(c.partial_list(0)[0], (s[28], 0));
        assert_eq!(c.nr_slabs(), 8 - 2);
        assert_eq!(c.nr_objects(), 7 * 14 + 1 - 6 - 13 - 13 - 13);
    }

    #[test]
    fn the_cpu_slab_is_never_discarded_and_partials_are_used_oldest_first() {
        let mut c = KmemCache::default();
        let s = alloc_n(&mut c, 3 * 14);
        // The third slab is the cpu slab: emptying it frees nothing and lists nothing.
        let freed: u64 = (28..42).map(|i| c.free(s[i])).sum();
        assert_eq!(freed, 0);
        assert!(c.partial_list(0).is_empty());
        // It serves the next 14 allocations; then slab 1 (freed first) before slab 0.
        c.free(s[14]);
        c.free(s[0]);
        let next = alloc_n(&mut c, 16);
        assert!(next[..14].iter().all(|&x| x == s[28]));
        assert_eq!((next[14], next[15]), (s[14], s[0]));
    }

    #[test]
    fn nodes_keep_their_own_lists() {
        let mut c = KmemCache::default();
        let a = c.alloc(0);
        let b = c.alloc(1);
        assert_ne!(a, b);
        assert_eq!(c.nr_slabs(), 2);
    }
}
