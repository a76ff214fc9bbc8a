//! Limits: what the model can represent (docs/scenarios.md, "Limits").

/// Frames of the whole machine (all nodes): a PTE holds a 29-bit page frame number
/// (`mm_types::pte::PFN_MASK`), so at most 2^29 pages = 2 TiB.
pub const MAX_FRAMES: u64 = crate::mm::mm_types::pte::PFN_MASK as u64 + 1;
/// Swap slots: a swap PTE holds a 30-bit slot (`mm_types::pte::SLOT_MASK`): 4 TiB.
pub const MAX_SWAP_SLOTS: u64 = crate::mm::mm_types::pte::SLOT_MASK as u64 + 1;
/// Pages of one address space or one file: page indices are 32-bit (16 TiB - 4 KiB).
pub const MAX_AREA_PAGES: u64 = u32::MAX as u64;
/// Files of one file_read workload. A frame names its mm or file in 24 bits
/// (`mm_types::MAX_OWNERS`, beside MGLRU's generation byte in struct page): at most
/// MAX_CPUS workloads of this many files, a program text and a trace file each, and two
/// mms per task (a forking parent and its child) stay far below 2^24.
pub const MAX_FILES: usize = 1024;
/// CPUs of the machine (CPU ids index per-CPU state; each task needs its own CPU).
pub const MAX_CPUS: u32 = 4096;
/// Cgroups below the root: memcg ids are 16-bit and the kernel's MEM_CGROUP_ID_MAX
/// allows 65535, but per-(CPU, memcg) statistics make 4095 the practical bound.
pub const MAX_CGROUPS: usize = 4095;
/// Longest run [ns] (about 146 years): virtual clocks are u64 nanoseconds, and a run
/// ending by 2^62 leaves room for every charge made past the end to stay below 2^64.
pub const MAX_DURATION: u64 = 1 << 62;
/// Largest cost-table entry or device latency [ns] (about 4.3 s): 2^29 frames times this
/// stays below 2^62, so no pass over memory can overflow a clock.
pub const MAX_COST: u64 = 1 << 32;

// Every mm and file id fits the frame's 24-bit owner (see MAX_FILES).
const _: () = assert!(
    (MAX_CPUS as u64) * (MAX_FILES as u64 + 2) + 2 * (MAX_CPUS as u64)
        < crate::mm::mm_types::MAX_OWNERS as u64
);
