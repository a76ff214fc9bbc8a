//! The OOM killer and address-space teardown.
//!
//! Models mm/oom_kill.c: out_of_memory() selects the process with the highest badness
//! (resident anon pages, swap entries and page-table pages: oom_badness without
//! oom_score_adj) among the processes of the OOMing memcg's subtree (or all of them for a
//! global OOM), counts oom_kill, and tears its address space down (exit_mmap ->
//! zap_pte_range in memory.rs, as the exiting victim and the OOM reaper would). Callers
//! hold oom_lock for the selection and the kill, not for the teardown: an OOM that finds
//! a victim of its domain still tearing down (tsk_is_oom_victim without MMF_OOM_SKIP)
//! kills nobody and reports progress, so its caller retries instead of killing again.
//! An OOM is an event in the run, never a crash: if there is nothing to kill, the
//! allocation fails and the faulting task is the one that ends.

use super::vmstat::VmEvent;
use super::MemcgId;
use crate::sim::Sim;

/// oom_rs, the rate limit of oom_kill_process's reports (DEFAULT_RATELIMIT_INTERVAL,
/// DEFAULT_RATELIMIT_BURST): at most 10 in 5 s.
pub const OOM_RS_INTERVAL: u64 = 5_000_000_000;
pub const OOM_RS_BURST: u32 = 10;

/// A struct ratelimit_state (lib/ratelimit.c): an interval starts at the first call and
/// allows `burst` calls; the first call after the interval has passed starts the next.
/// Simplified: no count of the calls it suppressed.
#[derive(Debug, Clone, Copy, Default)]
pub struct RateLimit {
    begin: Option<u64>,
    printed: u32,
}

impl RateLimit {
    /// ___ratelimit() at `now`: true when the call may go ahead.
    pub fn allow(&mut self, now: u64, interval: u64, burst: u32) -> bool {
        let begin = *self.begin.get_or_insert(now);
        if now > begin + interval {
            self.begin = Some(now);
            self.printed = 0;
        }
        if burst > self.printed {
            self.printed += 1;
            return true;
        }
        false
    }
}

/// What select_bad_process() found.
enum Chosen {
    /// Nobody to kill.
    None,
    /// A victim of an earlier OOM in this domain is still exiting: wait for it.
    Abort,
    Victim(u32),
}

impl super::Mm {
    /// dump_header() of oom_kill_process, for what it changes: a memcg OOM's report
    /// (mem_cgroup_print_oom_meminfo) prints the memcg's memory.stat, and formatting it
    /// flushes the memcg's statistics first (memory_stat_format -> mem_cgroup_flush_stats),
    /// so reclaim after the kill reads fresh list sizes (inactive_is_low). A global OOM
    /// prints the node counters (__show_mem), which flushes nothing. The printing is not
    /// costed.
    fn dump_header(&mut self, memcg: Option<MemcgId>, now: u64) {
        if let Some(m) = memcg {
            self.mem_cgroup_flush_stats(m, now);
        }
    }

    /// oom_badness() without oom_score_adj: resident pages, swap entries and page-table
    /// pages of the process.
    pub fn oom_badness(&self, mmid: u32) -> u64 {
        let m = &self.mms[mmid as usize];
        let pgtables = m.pte_tables.iter().filter(|&&t| t).count() as u64;
        m.rss + m.swapents + pgtables
    }

    /// select_bad_process(): the process of the OOM domain (a memcg's subtree, or all)
    /// with the highest badness, the first of equals.
    fn select_bad_process(&self, memcg: Option<MemcgId>) -> Chosen {
        let mut best: Option<(u64, u32)> = None;
        for (i, m) in self.mms.iter().enumerate() {
            if memcg.is_some_and(|oc| !self.memcg_in_subtree(oc, m.memcg)) {
                continue;
            }
            if m.oom_victim && !m.oom_skip {
                return Chosen::Abort;
            }
            if !m.alive {
                continue;
            }
            let points = self.oom_badness(i as u32);
            if best.is_none_or(|(b, _)| points > b) {
                best = Some((points, i as u32));
            }
        }
        best.map_or(Chosen::None, |b| Chosen::Victim(b.1))
    }
}

impl Sim {
    /// out_of_memory() with oom_lock held by the caller: kill the worst process of the
    /// domain and release oom_lock; the teardown (the victim's exit, the OOM reaper)
    /// runs after it. True when it made progress: a kill, or a victim still exiting.
    pub async fn out_of_memory(&self, memcg: Option<MemcgId>) -> bool {
        let chosen = self.mm.borrow().select_bad_process(memcg);
        let v = match chosen {
            Chosen::None => {
                self.mutex_unlock_oom();
                return false;
            }
            Chosen::Abort => {
                self.mutex_unlock_oom();
                return true;
            }
            Chosen::Victim(v) => v,
        };
        {
            let mut mm = self.mm.borrow_mut();
            let now = self.e.now();
            if mm.oom_rs.allow(now, OOM_RS_INTERVAL, OOM_RS_BURST) {
                mm.dump_header(memcg, now);
            }
            let vm = mm.mms[v as usize].memcg;
            let m = &mut mm.mms[v as usize];
            m.alive = false;
            m.oom_victim = true;
            mm.count_event(VmEvent::OomKill, 1);
            mm.memcg_memory_event(vm, super::memcontrol::MemcgEvent::OomKill);
            let now = self.e.now();
            mm.oom_log.push((now, memcg.unwrap_or(0), v));
        }
        self.mutex_unlock_oom();
        self.exit_mmap(v).await;
        // MMF_OOM_SKIP: the victim's memory is gone; later OOMs look past it.
        self.mm.borrow_mut().mms[v as usize].oom_skip = true;
        true
    }

    /// mutex_lock_killable(&oom_lock): wait while another task holds it. False when the
    /// current task was killed while waiting (the lock is then not taken).
    pub async fn mutex_lock_oom(&self) -> bool {
        while self.oom_lock.get() {
            let wq = self.oom_wait.clone();
            self.wait_event_timeout(&wq, None).await;
            if self.current_killed() {
                return false;
            }
        }
        self.oom_lock.set(true);
        true
    }

    /// mutex_trylock(&oom_lock).
    pub fn mutex_trylock_oom(&self) -> bool {
        !self.oom_lock.replace(true)
    }

    /// mutex_unlock(&oom_lock): wake the waiters (they race for it again).
    pub fn mutex_unlock_oom(&self) {
        self.oom_lock.set(false);
        let wq = self.oom_wait.clone();
        if wq.active() {
            self.wake_up_all(&wq);
        }
    }

    /// mem_cgroup_out_of_memory(): under oom_lock, kill in `memcg`'s subtree unless the
    /// charge fits by now (another task's kill freed memory while this one waited for
    /// the lock). True when the charge should be retried.
    pub async fn mem_cgroup_out_of_memory(&self, memcg: MemcgId) -> bool {
        if !self.mutex_lock_oom().await {
            return true;
        }
        if self.mm.borrow().mem_cgroup_margin(memcg) >= 1 {
            self.mutex_unlock_oom();
            return true;
        }
        if self.current_killed() {
            self.mutex_unlock_oom();
            return true;
        }
        self.out_of_memory(Some(memcg)).await
    }

    /// exit_mmap(): unmap and free every page and swap slot of an address space.
    pub async fn exit_mmap(&self, mmid: u32) {
        let n = self.mm.borrow().mms[mmid as usize].ptes.len() as u32;
        self.zap_pte_range(mmid, 0, n).await;
        self.mm.borrow_mut().mm_release_lru_gen(mmid);
        // free_pgtables(): the PTE pages go with the mm.
        let cpu = self.e.cpu();
        let mut mm = self.mm.borrow_mut();
        let m = &mut mm.mms[mmid as usize];
        let tables = m.pte_tables.iter().filter(|&&t| t).count() as u64;
        m.pte_tables.fill(false);
        let memcg = m.memcg;
        // Each table's NR_PAGETABLE - 1 (pagetable_dtor), a statistics update.
        mm.memcg_rstat_updated(memcg, tables);
        mm.memcg_kmem_uncharge(cpu, memcg, tables * PAGE_SIZE, KmemKind::Pagetables);
    }
}

use super::memcontrol::KmemKind;
use super::PAGE_SIZE;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratelimit_allows_a_burst_per_interval_from_its_first_call() {
        // lib/ratelimit.c with interval 5 s and burst 10: the interval starts at the first
        // call (t = 1 s), ten calls go ahead, the rest wait until it has passed (strictly
        // after 6 s), when the next call starts a new one.
        let mut rs = RateLimit::default();
        let s = 1_000_000_000;
        let allowed: Vec<bool> = (0..12).map(|i| rs.allow(s + i, 5 * s, 10)).collect();
        assert_eq!(allowed, [[true; 10].as_slice(), &[false, false]].concat());
        assert!(!rs.allow(6 * s, 5 * s, 10));
        assert!(rs.allow(6 * s + 1, 5 * s, 10));
        assert_eq!(
            (1..10)
                .filter(|i| rs.allow(6 * s + 1 + i, 5 * s, 10))
                .count(),
            9
        );
        assert!(!rs.allow(7 * s, 5 * s, 10));
    }
}
