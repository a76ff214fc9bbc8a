//! Machine states built by hand, for tests of one kernel path at a time.
//!
//! An end-to-end run shows what a whole workload does; it cannot show, say, that
//! shrink_lruvec stops after one proportional nudge, because which folios sit where when
//! that decision is taken depends on everything before it. A test of one path instead
//! builds a machine from a scenario whose workloads have not started yet, places folios
//! straight on an lruvec's lists in the state the fault and read paths leave them in
//! (allocated, charged, owned, counted, linked at the list head), runs one kernel function
//! in a probe task, and compares the counters with what the kernel's arithmetic gives.
//!
//! Simplified on purpose: fixture folios skip the per-CPU batches, the page-table and
//! xarray-node charges, and the memcg statistics cost model; the hierarchical statistics
//! reclaim reads are flushed once at the end of each placement.

use crate::engine::Time;
use crate::mm::mm_types::*;
use crate::mm::vmstat::NodeStat;
use crate::mm::{File, MemcgId, MmStruct, Pfn};
use crate::sim::Sim;
use std::future::Future;
use std::rc::Rc;

impl Sim {
    /// Allocate and charge one frame on `node` for `memcg`, ignoring watermarks.
    fn fixture_frame(&self, memcg: MemcgId, node: u32) -> Pfn {
        let mut mm = self.mm.borrow_mut();
        let pfn = mm
            .rmqueue(node)
            .expect("fixture: the node has a free frame");
        mm.page_counter_try_charge(memcg, 1)
            .expect("fixture: the memcg has room");
        let p = &mut mm.pages[pfn as usize];
        p.memcg = memcg;
        p.clear(PG_LOCKED);
        pfn
    }

    /// Link a set-up folio at the head of its lruvec's list and flush the statistics.
    /// On MGLRU the folios are placed as lru_gen_folio_seq places them (an unreferenced
    /// page-cache folio in the oldest generation) on every kernel version, so that a test
    /// of a later path starts from the same lists whatever version it runs; a test of the
    /// placement itself calls lru_gen_folio_seq.
    fn fixture_link(&self, pfns: &[Pfn]) {
        let now = self.e.now();
        let mut mm = self.mm.borrow_mut();
        let placement = std::mem::replace(&mut mm.rules.mglru_placement_from_max_seq, true);
        for &pfn in pfns {
            mm.lruvec_add_folio(pfn);
        }
        mm.rules.mglru_placement_from_max_seq = placement;
        mm.flush_stats(now);
    }

    /// `n` clean page-cache folios of a new file charged to `memcg`, on its inactive file
    /// list on `node` (page 0 at the tail, oldest), each with the extra page flags
    /// `flags` (e.g. PG_REFERENCED after one read). Returns the file and its folios.
    pub fn fixture_file_folios(
        &self,
        memcg: MemcgId,
        node: u32,
        n: u32,
        flags: u16,
    ) -> (u32, Vec<Pfn>) {
        let file = {
            let mut mm = self.mm.borrow_mut();
            mm.files.push(File::new(n as usize, memcg, None));
            (mm.files.len() - 1) as u32
        };
        let pfns: Vec<Pfn> = (0..n)
            .map(|index| self.fixture_cache_folio(memcg, node, file, index, flags))
            .collect();
        self.fixture_link(&pfns);
        (file, pfns)
    }

    /// A clean folio for page `index` of `file`, charged to `memcg` (with the xarray nodes
    /// its store needs) and in the page cache, not yet on a list.
    fn fixture_cache_folio(
        &self,
        memcg: MemcgId,
        node: u32,
        file: u32,
        index: u32,
        flags: u16,
    ) -> Pfn {
        let pfn = self.fixture_frame(memcg, node);
        let mut mm = self.mm.borrow_mut();
        let p = &mut mm.pages[pfn as usize];
        p.set(PG_OWNED | flags);
        p.set_owner(file);
        p.index = index;
        let nodes = mm.xa_create(file, index, node);
        fixture_kmem_charge(&mut mm, memcg, nodes * crate::mm::memcontrol::XA_NODE_SIZE);
        mm.page_cache_store(file, index, crate::mm::filemap::page_entry(pfn));
        let lv = mm.folio_lruvec(pfn) as usize;
        mm.lruvecs[lv].mod_state(NodeStat::NrFilePages, 1);
        pfn
    }

    /// `n` clean folios of a new file charged to `memcg`, mapped read-only (page i at
    /// virtual page MAPPED_FILE_BASE + i) as `how` says, on the file list of `node` its
    /// flags select (inactive unless `flags` has PG_ACTIVE; page 0 at the tail). Returns the
    /// file, its mappers and its folios.
    pub fn fixture_mapped_file_folios(
        &self,
        memcg: MemcgId,
        node: u32,
        n: u32,
        how: Mapped,
        flags: u16,
    ) -> (u32, Vec<u32>, Vec<Pfn>) {
        let Mapped {
            exec,
            mappers,
            young,
        } = how;
        let (file, mms) = {
            let mut mm = self.mm.borrow_mut();
            let mut f = File::text(n as usize, memcg, MAPPED_FILE_BASE);
            f.exec = exec;
            mm.files.push(f);
            let file = (mm.files.len() - 1) as u32;
            let mms: Vec<u32> = (0..mappers)
                .map(|_| {
                    let mmid =
                        mm.mm_alloc(MmStruct::new(MAPPED_FILE_BASE as usize, memcg, node, 0));
                    mm.map_text(mmid, file);
                    mmid
                })
                .collect();
            (file, mms)
        };
        let mut pfns = Vec::with_capacity(n as usize);
        for index in 0..n {
            let pfn = self.fixture_cache_folio(memcg, node, file, index, flags);
            let mut mm = self.mm.borrow_mut();
            mm.pages[pfn as usize].private = mappers;
            for &mmid in &mms {
                let vpn = (MAPPED_FILE_BASE + index) as usize;
                mm.mms[mmid as usize].ptes[vpn] = pte::mk_present(pfn, young, false);
            }
            let lv = mm.folio_lruvec(pfn) as usize;
            mm.lruvecs[lv].mod_state(NodeStat::NrFileMapped, mappers as i64);
            pfns.push(pfn);
        }
        self.fixture_link(&pfns);
        (file, mms, pfns)
    }

    /// `n` anonymous folios of a new process charged to `memcg`, each mapped by a dirty
    /// PTE (young when `young`, as right after the fault), on the anon list of `node` its
    /// flags select (inactive unless `flags` has PG_ACTIVE; page 0 at the tail). Returns
    /// the process and its folios.
    pub fn fixture_anon_folios(
        &self,
        memcg: MemcgId,
        node: u32,
        n: u32,
        young: bool,
        flags: u16,
    ) -> (u32, Vec<Pfn>) {
        let mmid = {
            let mut mm = self.mm.borrow_mut();
            mm.mm_alloc(MmStruct::new(n as usize, memcg, node, 0))
        };
        let mut pfns = Vec::with_capacity(n as usize);
        for vpn in 0..n {
            let pfn = self.fixture_frame(memcg, node);
            let mut mm = self.mm.borrow_mut();
            let p = &mut mm.pages[pfn as usize];
            p.set(PG_SWAPBACKED | PG_OWNED | flags);
            p.set_owner(mmid);
            p.index = vpn;
            let m = &mut mm.mms[mmid as usize];
            m.ptes[vpn as usize] = pte::mk_present(pfn, young, true);
            m.rss += 1;
            let lv = mm.folio_lruvec(pfn) as usize;
            mm.lruvecs[lv].mod_state(NodeStat::NrAnonMapped, 1);
            pfns.push(pfn);
        }
        self.fixture_link(&pfns);
        (mmid, pfns)
    }

    /// Take set-up folios off their list into `cpu`'s lru_add batch, as a fault or read
    /// leaves a new folio until the batch drains (at most FOLIO_BATCH_SIZE - 1 of them).
    pub fn fixture_to_lru_add_batch(&self, cpu: u32, pfns: &[Pfn]) {
        assert!(
            pfns.len() < crate::mm::FOLIO_BATCH_SIZE,
            "a full batch drains"
        );
        let now = self.e.now();
        let mut mm = self.mm.borrow_mut();
        for &pfn in pfns {
            mm.lruvec_del_folio(pfn);
            let p = &mut mm.pages[pfn as usize];
            p.clear(PG_LRU);
            p.set(PG_INBATCH);
            mm.batches[cpu as usize].lru_add.push(pfn);
        }
        mm.flush_stats(now);
    }
}

/// Where [`Sim::fixture_mapped_file_folios`] maps its file in each mapper: after an
/// untouched 16-page area, as a program's text follows its data.
pub const MAPPED_FILE_BASE: u32 = 16;

/// How [`Sim::fixture_mapped_file_folios`] maps its file: by `mappers` new processes,
/// VM_EXEC when `exec` (a program's text), each PTE young when `young`.
#[derive(Debug, Clone, Copy)]
pub struct Mapped {
    pub exec: bool,
    pub mappers: u32,
    pub young: bool,
}

/// Charge `bytes` of page-cache xarray nodes to `memcg` as obj_cgroup does (whole pages
/// from the page counter into the byte stock), without reclaim.
fn fixture_kmem_charge(mm: &mut crate::mm::Mm, memcg: MemcgId, bytes: u64) {
    let page = crate::scenario::PAGE_SIZE;
    while mm.memcgs[memcg as usize].obj_stock_bytes < bytes {
        mm.page_counter_try_charge(memcg, 1)
            .expect("fixture: the memcg has room");
        let m = &mut mm.memcgs[memcg as usize];
        m.kmem_pages += 1;
        m.obj_stock_bytes += page;
    }
    let m = &mut mm.memcgs[memcg as usize];
    m.obj_stock_bytes -= bytes;
    m.slab_reclaimable_bytes += bytes;
}

/// A machine of one node of `mem`, `swap` of zram (or none), the cgroup /a (memcg 1), a
/// workload that never starts, and the periodic stats flush out of the way; `extra` goes
/// into the `[kernel]` table.
pub fn one_node_machine(mem: &str, swap: Option<&str>, extra: &str) -> Rc<Sim> {
    let swap = swap.map_or(String::new(), |s| {
        format!("[machine.swap]\nsize = \"{s}\"\ndevice = \"zram\"\n")
    });
    let t = format!(
        r#"
duration = "1000s"
[machine]
cpus = 4
memory_per_node = "{mem}"
{swap}
[kernel]
memcg_flush_phase = "1.9s"
{extra}
[[cgroup]]
path = "/a"
[[workload]]
type = "usemem"
cgroup = "/a"
size = "4K"
start = "900s"
"#
    );
    Sim::build(&crate::Scenario::from_toml(&t).expect("fixture scenario")).expect("fixture machine")
}

/// Run the scenario in TOML `t` to its end, with the invariants checked after every
/// reclaim pass when `check` (run_checked), and return its report as JSON.
pub fn run_toml(t: &str, check: bool) -> serde_json::Value {
    let sc = crate::Scenario::from_toml(t).expect("valid scenario");
    let r = crate::sim::run_checked(&sc, check, &mut |_, _| true).expect("run");
    serde_json::to_value(&r).expect("report as JSON")
}

/// Run `f` as a task on `cpu` from virtual time `at` until it returns (other tasks of the
/// machine run meanwhile, in virtual-time order); returns the virtual time it ended at.
pub fn run_probe<F, Fut>(s: &Rc<Sim>, cpu: u32, at: Time, f: F) -> Time
where
    F: FnOnce(Rc<Sim>) -> Fut + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let done = Rc::new(std::cell::Cell::new(None));
    let (s2, d2) = (s.clone(), done.clone());
    s.e.spawn(at, cpu, async move {
        f(s2.clone()).await;
        let now = s2.e.now();
        d2.set(Some(now));
        s2.e.request_stop(now);
    });
    s.e.stop.set(false);
    s.e.run_until(Time::MAX, 1 << 20, &mut |_| true);
    done.get().expect("fixture: the probe task ran to its end")
}

/// lru_lock acquisitions at lru_add_drain_cpu so far (the drains of the per-CPU batches).
pub fn lru_add_drain_acquisitions(s: &Sim) -> u64 {
    s.e.lock_stats()
        .iter()
        .filter(|(c, site, _)| {
            *c == crate::engine::LockClass::LruLock && *site == crate::engine::Site::LruAddDrainCpu
        })
        .map(|(_, _, st)| st.acquisitions)
        .sum()
}
