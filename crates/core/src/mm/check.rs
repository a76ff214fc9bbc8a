//! The classic LRU's and the whole model's invariant checks (the kernel's VM_BUG_ON and
//! debug checks, gathered into one pass; no kernel file does this in one place).
//!
//! [`Mm::check_invariants`] is what tests call, and what a run with its checks switched on
//! calls after every reclaim pass (`Sim::after_reclaim_pass`): it walks every list and
//! frame and compares them with the counters kept beside them. The
//! multi-gen LRU's own checks (generations, their counters, the memcg LRU) are
//! lru_gen/check.rs, which this calls for lruvecs that use it. Simplified: a check is a
//! full walk, so it is for tests and debugging runs, never for measured ones.

use super::mm_types::{pte, PG_ALLOCATED, PG_HELD, PG_INBATCH, PG_ISOLATED, PG_LRU};
use super::{lru_gen, mmzone, vmstat, LruvecId, Mm, Pfn, NIL};

impl Mm {
    /// Mark the folios on lruvec `lv`'s MGLRU lists as seen on a list, checking each is
    /// there once and belongs to `lv`.
    fn mark_lru_gen_lists(
        &self,
        lv: LruvecId,
        seen: &mut [bool],
    ) -> std::result::Result<(), String> {
        let g = &self.lruvecs[lv as usize].lrugen;
        for gen in 0..lru_gen::MAX_NR_GENS as usize {
            for ty in 0..lru_gen::ANON_AND_FILE {
                for p in g.folios[gen][ty].iter() {
                    if seen[p as usize] {
                        return Err(format!("pfn {p} on two lists"));
                    }
                    if self.folio_lruvec(p) != lv {
                        return Err(format!(
                            "pfn {p} on lruvec {lv}'s generation {gen} but not its"
                        ));
                    }
                    seen[p as usize] = true;
                }
            }
        }
        Ok(())
    }

    /// Check the model's invariants; returns the first violation found.
    ///
    /// Every allocated frame is on one LRU list (PG_LRU, linked into its lruvec's list),
    /// isolated (PG_ISOLATED) or in the lru_add batch, and held by as many per-CPU batch
    /// entries as its batch references say (PG_INBATCH and `batch_refs`); an isolated
    /// folio is in no batch under rule lru_batch_clears_pg_lru; free
    /// frames are all-zero and counted in their node's free pages. List lengths equal
    /// their counters. Each memcg's usage equals its subtree's charged pages plus stocks.
    pub fn check_invariants(&self) -> std::result::Result<(), String> {
        let mut seen_on_list = vec![false; self.pages.len()];
        for (i, lv) in self.lruvecs.iter().enumerate() {
            if lv.lrugen.enabled {
                let walking = self.lru_gen_walks.get(i).is_some_and(|&n| n > 0);
                lru_gen::check_lru_gen(&self.pages, lv, walking)
                    .map_err(|e| format!("lruvec {i}: {e}"))?;
                self.mark_lru_gen_lists(i as LruvecId, &mut seen_on_list)?;
            }
            for lru in 0..mmzone::NR_LRU_LISTS {
                if lv.lrugen.enabled && lru != mmzone::LRU_UNEVICTABLE {
                    continue; // checked by check_lru_gen
                }
                let mut n = 0u64;
                let mut p = lv.lists[lru].head;
                let mut prev = NIL;
                while p != NIL {
                    let pg = &self.pages[p as usize];
                    if !pg.test(PG_LRU) || pg.lru_list() != lru || self.folio_lruvec(p) != i as u32
                    {
                        return Err(format!(
                            "pfn {p} on lruvec {i} list {lru} with flags {:#x}",
                            pg.flags
                        ));
                    }
                    let link = self.pages.links[p as usize];
                    if link.prev != prev {
                        return Err(format!("pfn {p}: broken prev link"));
                    }
                    if seen_on_list[p as usize] {
                        return Err(format!("pfn {p} on two lists"));
                    }
                    seen_on_list[p as usize] = true;
                    n += 1;
                    prev = p;
                    p = link.next;
                }
                if lv.lists[lru].tail != prev {
                    return Err(format!("lruvec {i} list {lru}: tail mismatch"));
                }
                if n != lv.nr[lru] || n as i64 != lv.stat[vmstat::LRU_STAT[lru] as usize] {
                    return Err(format!(
                        "lruvec {i} list {lru}: {n} folios but counted {}",
                        lv.nr[lru]
                    ));
                }
            }
        }
        let mut in_batch = vec![0u32; self.pages.len()];
        for b in &self.batches {
            for &p in b
                .lru_add
                .iter()
                .chain(&b.lru_activate)
                .chain(&b.lru_move_tail)
            {
                in_batch[p as usize] += 1;
            }
        }
        for &p in &self.draining {
            in_batch[p as usize] += 1;
        }
        if self.lru_gen_enabled() {
            for (n, nd) in self.nodes.iter().enumerate() {
                let members = self.memcgs.iter().map(|m| {
                    let lv = m.lruvecs[n];
                    (lv, &self.lruvecs[lv as usize].lrugen, true)
                });
                lru_gen::check_memcg_lru(&nd.memcg_lru, members)
                    .map_err(|e| format!("node {n} memcg LRU: {e}"))?;
            }
        }
        let mut charged = vec![0u64; self.memcgs.len()];
        let mut free = vec![0u64; self.nodes.len()];
        for (pfn, pg) in self.pages.iter().enumerate() {
            let node = self.pfn_node(pfn as Pfn) as usize;
            if pfn as u32 >= self.nodes[node].next_unused {
                continue;
            }
            if !pg.test(PG_ALLOCATED) {
                if pg.flags != 0 {
                    return Err(format!("free pfn {pfn} has flags {:#x}", pg.flags));
                }
                free[node] += 1;
                continue;
            }
            if pg.test(PG_LRU) != seen_on_list[pfn] {
                return Err(format!("pfn {pfn}: PG_lru does not match list membership"));
            }
            if self.folio_batch_refs(pfn as Pfn) != in_batch[pfn] {
                return Err(format!(
                    "pfn {pfn}: batch references do not match batch membership (flags {:#x}, in batches {})",
                    pg.flags, in_batch[pfn]
                ));
            }
            if pg.test(PG_ISOLATED) && pg.test(PG_LRU) {
                return Err(format!("pfn {pfn} isolated but on a list"));
            }
            if pg.test(PG_ISOLATED) && pg.test(PG_INBATCH) && self.rules.lru_batch_clears_pg_lru {
                return Err(format!(
                    "pfn {pfn} isolated while a batch holds PG_lru (rule lru_batch_clears_pg_lru)"
                ));
            }
            if !pg.test(PG_HELD) && !pg.test(PG_LRU) {
                return Err(format!(
                    "pfn {pfn} allocated, held by nobody and on no list: leaked"
                ));
            }
            charged[pg.memcg as usize] += 1;
        }
        for (n, nd) in self.nodes.iter().enumerate() {
            let untouched = nd.base as u64 + self.node_pages - nd.next_unused as u64;
            if free[n] + untouched != nd.free {
                return Err(format!(
                    "node {n}: {} free frames, counted {}",
                    free[n] + untouched,
                    nd.free
                ));
            }
        }
        self.check_fork_sharing()?;
        for (i, m) in self.mms.iter().enumerate() {
            if let (true, Some(sa)) = (m.alive, m.sampled.as_deref()) {
                sa.check(&m.ptes, &m.wrprotect)
                    .map_err(|e| format!("mm {i}: {e}"))?;
            }
        }
        for &m in self.memcg_preorder.iter() {
            if m == 0 {
                continue;
            }
            let mut expect = 0;
            for &c in &self.memcg_preorder {
                if self.memcg_in_subtree(m, c) {
                    expect +=
                        charged[c as usize] + self.stocked(c) + self.memcgs[c as usize].kmem_pages;
                }
            }
            let mc = &self.memcgs[m as usize];
            if mc.usage != expect {
                return Err(format!(
                    "memcg {}: usage {} but {} pages charged or stocked",
                    mc.path, mc.usage, expect
                ));
            }
            if mc.usage > mc.max {
                return Err(format!(
                    "memcg {}: usage {} above memory.max {}",
                    mc.path, mc.usage, mc.max
                ));
            }
        }
        Ok(())
    }

    /// Fork sharing (fork.rs): each shared anonymous folio's mapcount is the number of PTEs
    /// mapping it, and each slot's explicit swap count the number of swap PTEs naming it;
    /// a slot with the implicit count is named by at most one swap PTE.
    fn check_fork_sharing(&self) -> std::result::Result<(), String> {
        let mut maps: rustc_hash::FxHashMap<Pfn, u32> = Default::default();
        let mut swaps: rustc_hash::FxHashMap<u32, u32> = Default::default();
        for m in &self.mms {
            let area = m.text.map_or(m.ptes.len(), |t| t.base as usize);
            for &v in &m.ptes[..area.min(m.ptes.len())] {
                if pte::present(v) && self.folio_shared_anon(pte::pfn(v)) {
                    *maps.entry(pte::pfn(v)).or_insert(0) += 1;
                } else if pte::is_swap(v) {
                    *swaps.entry(pte::slot(v)).or_insert(0) += 1;
                }
            }
        }
        if maps != self.shared_mapcount {
            let bad = maps
                .iter()
                .find(|(p, c)| self.shared_mapcount.get(p) != Some(c))
                .map(|(p, c)| (*p, *c, self.shared_mapcount.get(p).copied()))
                .or_else(|| {
                    self.shared_mapcount
                        .iter()
                        .find(|(p, _)| !maps.contains_key(p))
                        .map(|(p, c)| (*p, 0, Some(*c)))
                });
            return Err(format!(
                "shared folio mapcount (pfn, PTEs, counted): {bad:?}"
            ));
        }
        let Some(sw) = self.swap.as_ref() else {
            return Ok(());
        };
        for (slot, c) in sw.explicit_counts() {
            let n = swaps.get(&slot).copied().unwrap_or(0);
            if n != c {
                return Err(format!("swap slot {slot}: {n} swap PTEs, count {c}"));
            }
        }
        for (&slot, &n) in &swaps {
            if n > 1 && sw.swap_count(slot).is_none() {
                return Err(format!("swap slot {slot}: {n} swap PTEs, implicit count"));
            }
        }
        Ok(())
    }
}
