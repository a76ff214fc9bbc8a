//! The cache lines an LRU list operation writes, and which CPU wrote them last.
//!
//! Under lru_lock the kernel's cost per folio is not the few instructions of a list_add or
//! list_del: it is the cache lines those instructions write that another CPU wrote last.
//! Linking a folio at a list head writes the folio's own struct page (its `lru` links and
//! flags), the old first folio's `lru.prev`, and the lruvec's list head and size counters;
//! unlinking writes the folio and both neighbours' links and the lruvec's counters. On a
//! large machine those lines were last written by whichever CPU touched the list before,
//! so every operation of a lock hold can pay a transfer, and the hold time, the wait of
//! every other CPU, grows with the number of CPUs taking turns at the list. This is the
//! contention seed 000's lru_add_drain_cpu site shows, and what makes isolation from a
//! list that other CPUs filled expensive.
//!
//! The model keeps one byte per frame (`Frames::line_cpu`: the CPU that last wrote the
//! folio's struct page under an lru_lock, plus one; 0 when unknown) and one per lruvec
//! (`Lruvec::line_cpu`: its list heads and size counters, taken as one line). While a task
//! holds an lru_lock ([`LineTracker::arm`] in lock_lruvec), each list operation marks the
//! lines it writes as this CPU's and counts those another CPU wrote last, same node or
//! remote, or from the other hardware thread of its core where cores have several
//! (`machine.threads_per_core`); unlock_lruvec charges them (`cacheline_transfer`,
//! `cacheline_transfer_remote`, `cacheline_transfer_smt`) before it releases the lock, so
//! they lengthen the hold as in the kernel. The lock word itself is the engine's
//! (engine/mod.rs), charged when the lock is taken. Which of the four a line is comes
//! from a table of 256 bytes per CPU, built from the topology once, so a write costs one
//! byte load and no comparison of nodes or cores.
//!
//! The tracker is one for the machine, not one per CPU: a task never yields while it holds
//! an lru_lock (every critical section of the model is free of await points), so holds do
//! not interleave.
//!
//! Simplified: only writes under an lru_lock move a line (folio_mark_accessed on another
//! CPU, the fault path's struct page writes and the rmap walk do not); a freed frame's line
//! is forgotten (the next writer takes it from memory, charged nothing extra); the lruvec's
//! heads and counters are one line; MGLRU's moves of a folio between generations in
//! place (sort_folio, folio_inc_gen) are not counted, its additions and deletions are; the byte holds the CPU number modulo 255, so on
//! machines of more than 255 CPUs two CPUs can share a code and a transfer between them is
//! missed.

use crate::engine::{Topology, Transfer};

/// Line owners of the frames and lruvecs, and the transfers of the current lock hold.
#[derive(Debug, Clone, Default)]
pub struct LineTracker {
    /// For each CPU, what a line whose owner byte is `w` costs it, as an index of
    /// `counts` (0: nothing, a cold line or its own; 1: from its core's other thread;
    /// 2: from another core of its node; 3: from another node): Topology::transfer's
    /// rule for the CPU `w - 1`, read once per write instead of the topology.
    class: Box<[[u8; 256]]>,
    /// The owner byte of the CPU holding an lru_lock now (`code`); 0 when list operations
    /// are not under one (a fixture's placement), which moves no line.
    me: u8,
    /// That CPU's row of `class`.
    row: usize,
    /// The current hold's lines by `class` index.
    counts: [u64; 4],
}

/// The byte stored for `cpu`.
#[inline]
fn code(cpu: u32) -> u8 {
    (cpu % 255) as u8 + 1
}

impl LineTracker {
    pub fn new(topology: Topology) -> Self {
        let n = topology.len() as u32;
        let class = (0..n)
            .map(|cpu| {
                let mut row = [0u8; 256];
                for (w, k) in row.iter_mut().enumerate().skip(1) {
                    let from = w as u32 - 1;
                    if from < n && w as u8 != code(cpu) {
                        *k = match topology.transfer(from, cpu) {
                            Transfer::None => 0,
                            Transfer::Sibling => 1,
                            Transfer::Local => 2,
                            Transfer::Remote => 3,
                        };
                    }
                }
                row
            })
            .collect();
        LineTracker {
            class,
            ..Default::default()
        }
    }

    /// Whether list operations are being accounted (an lru_lock is held).
    #[inline]
    pub fn armed(&self) -> bool {
        self.me != 0
    }

    /// `cpu` took an lru_lock: its list operations write lines from now on.
    pub fn arm(&mut self, cpu: u32) {
        // No task yields while it holds an lru_lock, and none nests two: one hold at a time.
        debug_assert!(!self.armed(), "lru_lock holds overlap");
        self.me = code(cpu);
        self.row = cpu as usize;
        self.counts = [0; 4];
    }

    /// The lock is about to be released: the hold's transfers, (from the core's other
    /// thread, from another core of the node, from another node).
    pub fn disarm(&mut self) -> (u64, u64, u64) {
        self.me = 0;
        (self.counts[1], self.counts[2], self.counts[3])
    }

    /// The current CPU writes the line whose owner byte is `owner`: a line another CPU
    /// wrote last is one transfer, from a sibling thread, same node or remote
    /// (Topology::transfer's rule, looked up in this CPU's row of `class`).
    #[inline]
    pub fn write(&mut self, owner: &mut u8) {
        let was = *owner;
        if was == self.me || self.me == 0 {
            return;
        }
        let k = self.class[self.row][was as usize];
        self.counts[(k & 3) as usize] += 1;
        *owner = self.me;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_another_cpu_wrote_is_one_transfer_then_local() {
        // CPUs 0, 1 on node 0; CPU 2 on node 1.
        let mut t = LineTracker::new(vec![0, 0, 1].into());
        let mut line = 0u8;
        t.write(&mut line); // not armed: nothing moves
        assert_eq!(line, 0);
        t.arm(0);
        t.write(&mut line); // a cold line: no transfer
        t.write(&mut line); // ours already
        assert_eq!(t.disarm(), (0, 0, 0));
        t.arm(1);
        t.write(&mut line); // CPU 0 wrote it: same node
        t.write(&mut line);
        assert_eq!(t.disarm(), (0, 1, 0));
        t.arm(2);
        t.write(&mut line); // CPU 1 wrote it: remote
        assert_eq!(t.disarm(), (0, 0, 1));
        assert_eq!(line, code(2));
    }

    #[test]
    fn a_line_the_other_thread_of_the_core_wrote_is_a_sibling_transfer() {
        // 8 CPUs on 2 nodes, 2 threads a core: node 0's cores are {0, 2} and {1, 3}.
        let mut t = LineTracker::new(Topology::machine(8, 2, 2, 0));
        let (mut a, mut b) = (0u8, 0u8);
        t.arm(0);
        t.write(&mut a);
        t.write(&mut b);
        t.disarm();
        t.arm(2); // CPU 0's sibling takes line a: a sibling transfer
        t.write(&mut a);
        assert_eq!(t.disarm(), (1, 0, 0));
        t.arm(1); // CPU 1 takes b from CPU 0 (another core, same node) and a from CPU 2
        t.write(&mut b);
        t.write(&mut a);
        assert_eq!(t.disarm(), (0, 2, 0));
        t.arm(3); // CPU 1's sibling takes both back from CPU 1
        t.write(&mut a);
        t.write(&mut b);
        assert_eq!(t.disarm(), (2, 0, 0));
        t.arm(6); // node 1 (CPUs 4-7): remote, whatever the thread
        t.write(&mut a);
        assert_eq!(t.disarm(), (0, 0, 1));
    }

    #[test]
    fn codes_wrap_past_255_cpus() {
        assert_eq!(code(0), 1);
        assert_eq!(code(254), 255);
        assert_eq!(code(255), 1);
    }
}
