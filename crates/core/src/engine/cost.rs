//! The cost model: one table of nanosecond costs charged to a task's CPU clock.
//!
//! Defaults describe a modern two-socket x86 server (Sapphire Rapids / Genoa class) with an
//! NVMe swap and file device. Every entry can be overridden from the scenario's `[costs]`
//! table; `reclaimsim costs` prints this table. The figures are documented orders of
//! magnitude (DRAM latency ~80-100 ns, a cross-core cache-line transfer ~50-100 ns, a 4 KiB
//! NVMe read at queue depth 1 ~20-80 us, lz4 zram ~1-4 us per page), set once and used by
//! every scenario: no scenario tunes them to reach a result.

use std::collections::BTreeMap;

macro_rules! cost_table {
    ($( $(#[doc = $doc:literal])* $name:ident = $default:expr; )*) => {
        /// Nanosecond costs of the simulated machine's primitive operations.
        #[derive(Debug, Clone)]
        pub struct CostTable {
            $( $(#[doc = $doc])* pub $name: u64, )*
        }

        impl Default for CostTable {
            fn default() -> Self {
                CostTable { $( $name: $default, )* }
            }
        }

        impl CostTable {
            /// The names accepted in a scenario's `[costs]` table.
            pub fn names() -> Vec<&'static str> {
                vec![$( stringify!($name), )*]
            }

            /// (name, default [ns], doc) for every entry.
            pub fn describe() -> Vec<(&'static str, u64, String)> {
                vec![$( (stringify!($name), $default, concat!($($doc),*).trim().to_string()), )*]
            }

            /// The value of entry `name`.
            pub fn get(&self, name: &str) -> Option<u64> {
                match name {
                    $( stringify!($name) => Some(self.$name), )*
                    _ => None,
                }
            }

            /// Apply scenario overrides (names were validated with the scenario).
            pub fn with_overrides(mut self, o: &BTreeMap<String, u64>) -> Self {
                for (k, v) in o {
                    match k.as_str() {
                        $( stringify!($name) => self.$name = *v, )*
                        _ => {}
                    }
                }
                self
            }
        }
    };
}

cost_table! {
    /// One sequential access to a resident page (usemem step; hardware prefetch helps).
    access_seq = 10;
    /// One random access to a resident page (TLB miss plus a DRAM access).
    access_random = 90;
    /// read(2) of one resident page-cache page (syscall plus a 4 KiB copy).
    file_read_hit = 600;
    /// Page-fault exception entry and exit plus the page-table walk.
    fault_entry = 500;
    /// Clearing a 4 KiB page for a new anonymous mapping.
    page_zero = 250;
    /// Copying a 4 KiB page for a copy-on-write fault (wp_page_copy), with what the copy
    /// path adds to a fault that the other entries do not name (two page streams where a
    /// clear has one; `reclaimsim calibrate` derives it from timed copy-on-write faults).
    page_copy = 500;
    /// Allocating one page from the per-CPU free lists.
    page_alloc = 120;
    /// Freeing one page to the per-CPU free lists.
    page_free = 80;
    /// One LRU list operation (add, delete, move) on a folio.
    list_op = 6;
    /// Per-folio work of isolate_lru_folios (tests and list move).
    isolate_folio = 15;
    /// Per-folio fixed work of shrink_folio_list (trylock, flag tests, mapping checks).
    shrink_folio = 120;
    /// One rmap step of folio_referenced: find and test-and-clear a PTE young bit.
    pte_referenced = 40;
    /// Unmapping one PTE in try_to_unmap (including the TLB flush share).
    pte_unmap = 150;
    /// Mapping one PTE at the end of a fault.
    pte_map = 40;
    /// A TLB shootdown: the initiating CPU sends IPIs to the other CPUs running the
    /// address space and waits until each has flushed (flush_tlb_multi). Paid by a
    /// flush only when another CPU runs the mm; `reclaimsim calibrate` measures it.
    tlb_flush_ipi = 2000;
    /// A TLB shootdown's cost on each CPU it interrupts: interrupt entry, flush_tlb_func
    /// and exit, taken from the task running there (rmap.rs); `reclaimsim calibrate`
    /// measures it as the time a spinning thread loses per shootdown it receives.
    tlb_flush_ipi_target = 1000;
    /// Taking an uncontended spinlock whose line is local.
    lock_uncontended = 20;
    /// Moving a cache line last written by another CPU of the same node.
    cacheline_transfer = 80;
    /// Moving a cache line last written by a CPU of another node.
    cacheline_transfer_remote = 200;
    /// Moving a cache line last written by the other hardware thread of the same core
    /// (`machine.threads_per_core` > 1; engine/coherence.rs): both threads share the
    /// core's L1 and L2. An order of magnitude: published core-to-core ping-pong figures
    /// of x86 parts give 4-10 ns between siblings; `reclaimsim calibrate` measures it
    /// where the host has SMT.
    cacheline_transfer_smt = 8;
    /// An atomic read-modify-write on a local line.
    atomic_rmw = 8;
    /// What one transfer of a line between CPUs of two nodes occupies the home agent of
    /// the line's node (its directory and snoops), during which the agent serves no other
    /// line of that node (engine/coherence.rs). 0: no shared agent, every line an
    /// independent server. No built-in figure: no published measurement of that capacity
    /// was found; a host with two or more nodes gives it from calibrate's contended lines.
    home_agent_occupancy = 0;
    /// One per-CPU statistics update.
    stat_update = 3;
    /// Adding a folio to or removing it from the swap cache, slot allocation included.
    swap_cache_op = 200;
    /// 4 KiB random read latency of the NVMe device (swap-in, page-cache miss).
    ssd_read_latency = 80_000;
    /// 4 KiB random write latency of the NVMe device (swap-out; the folio stays under writeback).
    ssd_write_latency = 20_000;
    /// Time the NVMe device is busy per 4 KiB read (1 / read IOPS: 1M IOPS).
    ssd_read_interval = 1_000;
    /// Time the NVMe device is busy per 4 KiB write (1 / write IOPS: 180K IOPS).
    ssd_write_interval = 5_556;
    /// A device read's completion waking its reader on another CPU than the one the
    /// interrupt arrives at (try_to_wake_up's IPI and the idle CPU's exit), per read of a
    /// reader off that CPU (blkdev.rs). 0: the device has a completion queue per CPU, as
    /// NVMe drives do, so the interrupt arrives where the reader sleeps.
    ssd_remote_wakeup = 0;
    /// Decompressing one page from zram (synchronous, on the faulting CPU).
    zram_read = 2_000;
    /// Compressing one page into zram (synchronous, inside shrink_folio_list).
    zram_write = 4_000;
    /// Per-memcg-per-node fixed work of one shrink_lruvec call (get_scan_count and setup).
    shrink_lruvec_setup = 300;
    /// Flushing the memcg statistics of one cgroup (rstat flush work per cgroup per CPU batch).
    memcg_flush_per_cgroup = 2_000;
    /// MGLRU page-table walk: reading one PTE, testing and clearing its accessed bit.
    walk_pte = 4;
    /// MGLRU page-table walk: visiting one PTE table (its PMD entry, the Bloom filter test).
    walk_pmd = 60;
    /// One lock:contention_begin or contention_end sample as `perf lock record` takes it
    /// (`-c 1 --call-graph fp,8`: the raw data, up to 8 kernel and user frames, the ring
    /// buffer's write), paid by the CPU that fires it when the scenario observes with
    /// `perf-lock` (engine/perf_lock.rs). About 1-5 us by machine and stack;
    /// `reclaimsim calibrate` measures it on a syscall tracepoint with the same options.
    perf_lock_record_event = 1_500;
    /// `perf lock contention -b`'s BPF program on contention_begin (the stack, by
    /// bpf_get_stackid, and a timestamp in a map), outside the hold. An order of
    /// magnitude, not a measurement: a BPF stack walk of 8 frames and two map updates.
    perf_lock_bpf_begin = 500;
    /// `perf lock contention -b`'s BPF program on contention_end (look up the begin,
    /// add the wait to the caller's entry), inside the hold. An order of magnitude.
    perf_lock_bpf_end = 150;
}

impl CostTable {
    /// The NVMe block device these costs describe.
    pub fn ssd(&self) -> super::blkdev::BlockDevice {
        let mut d = super::blkdev::BlockDevice::new(
            self.ssd_read_latency,
            self.ssd_write_latency,
            self.ssd_read_interval,
            self.ssd_write_interval,
        );
        d.remote_wakeup = self.ssd_remote_wakeup;
        d
    }
}
