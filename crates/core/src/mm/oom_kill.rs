//! The OOM killer and address-space teardown.
//!
//! Models mm/oom_kill.c: out_of_memory() selects the process with the highest badness
//! (resident anon pages plus swap entries, oom_badness without oom_score_adj) among the
//! processes of the OOMing memcg's subtree (or all of them for a global OOM), counts
//! oom_kill, and tears its address space down (exit_mmap -> zap_pte_range in memory.rs,
//! as the OOM reaper would). An OOM is an event in the run, never a crash: if there is nothing to kill, the
//! allocation fails and the faulting task is the one that ends.

use super::mm_types::*;
use super::vmstat::{NodeStat, VmEvent};
use super::MemcgId;
use crate::sim::Sim;

impl Sim {
    /// out_of_memory(): pick and kill a victim; false if there was none.
    pub async fn out_of_memory(&self, memcg: Option<MemcgId>) -> bool {
        let victim = {
            let mm = self.mm.borrow();
            let mut best: Option<(u64, u32)> = None;
            for (i, m) in mm.mms.iter().enumerate() {
                if !m.alive {
                    continue;
                }
                if let Some(oc) = memcg {
                    if !mm.memcg_in_subtree(oc, m.memcg) {
                        continue;
                    }
                }
                let points = m.rss + m.swapents;
                if best.is_none_or(|(b, _)| points > b) {
                    best = Some((points, i as u32));
                }
            }
            best.map(|b| b.1)
        };
        let Some(v) = victim else {
            return false;
        };
        {
            let mut mm = self.mm.borrow_mut();
            let vm = mm.mms[v as usize].memcg;
            mm.mms[v as usize].alive = false;
            mm.count_event(VmEvent::OomKill, 1);
            mm.memcg_memory_event(vm, super::memcontrol::MemcgEvent::OomKill);
            let now = self.e.now();
            mm.oom_log.push((now, memcg.unwrap_or(0), v));
        }
        self.exit_mmap(v).await;
        true
    }

    /// exit_mmap(): unmap and free every page and swap slot of an address space.
    pub async fn exit_mmap(&self, mmid: u32) {
        let n = self.mm.borrow().mms[mmid as usize].ptes.len() as u32;
        self.zap_pte_range(mmid, 0, n).await;
        // free_pgtables(): the PTE pages go with the mm.
        let mut mm = self.mm.borrow_mut();
        let m = &mut mm.mms[mmid as usize];
        let tables = m.pte_tables.iter().filter(|&&t| t).count() as u64;
        m.pte_tables.fill(false);
        let memcg = m.memcg;
        mm.memcg_kmem_uncharge(memcg, tables * PAGE_SIZE, KmemKind::Pagetables);
    }
}

use super::memcontrol::KmemKind;
use crate::scenario::PAGE_SIZE;

impl super::Mm {
    /// delete_from_swap_cache() + swap_free() for a folio whose owner goes away.
    pub fn delete_from_swap_cache(&mut self, pfn: u32) {
        let p = self.pages[pfn as usize];
        if !p.test(PG_SWAPCACHE) {
            return;
        }
        if let Some(s) = self.swap.as_mut() {
            s.free_slot(p.private);
        }
        let m = p.memcg as usize;
        self.memcgs[m].swap_usage = self.memcgs[m].swap_usage.saturating_sub(1);
        let lv = self.folio_lruvec(pfn) as usize;
        self.lruvecs[lv].mod_state(NodeStat::NrSwapcache, -1);
        self.lruvecs[lv].mod_state(NodeStat::NrFilePages, -1);
        self.pages[pfn as usize].clear(PG_SWAPCACHE);
    }
}
