//! Cache coherence: what a write to a shared line costs, and what couples two lines.
//!
//! Shared counters (a memcg's page counter, the batched statistics' atomics, rstat's
//! stats_updates) are lines that many CPUs write. A line holds one writer at a time: a
//! writer that finds it busy (another CPU's transfer or atomic in progress) waits, then
//! takes it from its last writer, from a CPU of its own node (`cacheline_transfer`) or
//! of another (`cacheline_transfer_remote`), and does the atomic (`atomic_rmw`). Each
//! line is thus a FIFO server, and many CPUs on one line serialize.
//!
//! Independent servers are not enough for a hot path that writes two contended lines in
//! turn: two work-conserving queues in series have the throughput of the slower one, so
//! the first line spaces the writers out and the second serves them as they arrive (one
//! transfer more, no second queue). Seed 004 measured the opposite: a second root atomic
//! per statistics spill cost a 192-thread, four-socket Skylake-SP about a quarter of its
//! page-fault throughput. What couples lines on such a machine:
//!
//! - **The home agent.** A line lives in one node's memory, and a transfer between CPUs
//!   of different nodes is ordered by the home agent (the directory and snoop logic) of
//!   that node: it is occupied by the transfer for `home_agent_occupancy` nanoseconds,
//!   and every line homed on the node queues there with it. Two hot lines homed on one
//!   node then share one server's capacity, where two lines on two nodes do not. A line's
//!   home is the node its memory was allocated on: [`CacheLine::homed`] (a lruvec's
//!   lines live on its node, as kzalloc_node puts struct mem_cgroup_per_node; a memcg's
//!   own lines on node 0, where the model creates every memcg).
//!
//! Simplifications:
//! - One agent per node. Skylake-SP spreads the home function over its caching/home
//!   agents by address hash, so two lines of one node may well be served by different
//!   slices; one agent per node is the coarsest reading, and its occupancy is what a
//!   measurement of two lines in turn across sockets would give (calibrate's
//!   `contended_lines_2_one_home` against `contended_lines_2_two_homes` on a host with
//!   two or more nodes: the same transfers, one agent or two).
//! - Only cross-node transfers occupy the agent; a transfer inside one node (its caching
//!   agents resolve it) and a line with no previous writer do not.
//! - A lock word (Engine::lock, homed on its lruvec's or node's node) occupies the agent
//!   as a line does; the time it queues there is part of the acquisition, not a wait for
//!   the holder (perf lock would not see it). The lists' lines (mm/lru_lines.rs) count
//!   transfers inside lock holds and occupy no agent.
//! - The agent serves requests in the order the engine runs them (the conservative
//!   synchronization order), as the lines themselves do.
//! - SMT siblings share only their line transfers here (below); the core's execution
//!   units they also share are not modeled: a thread runs as fast beside a busy sibling
//!   as alone.
//!
//! A profile without a figure (every built-in one today: no published measurement of a
//! home agent's capacity was found) leaves `home_agent_occupancy` at 0, and the lines are
//! independent as before.
//!
//! - **SMT siblings.** A machine with `machine.threads_per_core` > 1 has hardware threads,
//!   not cores: the two threads of a core share its L1 and L2, so a line one wrote last
//!   is in the other's cache already, and taking it costs `cacheline_transfer_smt` (a few
//!   nanoseconds; published core-to-core figures give 4-10 ns on x86 parts, against
//!   40-55 ns between cores of one socket), with no home agent involved. The CPU ids of
//!   a node are laid out as Linux enumerates an SMT machine: first one thread of each of
//!   the node's cores, then the second threads in the same order, so a node of `k` CPUs
//!   and `t` threads per core has `k / t` cores and CPU `lo + j`'s core is
//!   `lo + j % (k / t)` ([`Topology::machine`]). A scenario that places fewer tasks than
//!   the machine has cores, on its lowest CPUs, gives each its own core, as the
//!   scheduler's select_idle_core does.

use super::{Engine, Time};
use std::rc::Rc;

/// A cache line shared between CPUs: the CPU that last wrote it, the node whose memory
/// it lives in, and until when it is busy moving to or being written by its owner.
#[derive(Debug, Clone, Copy)]
pub struct CacheLine {
    owner: u32,
    home: u32,
    busy_until: Time,
}

impl Default for CacheLine {
    /// A line of node 0's memory that nobody has written.
    fn default() -> Self {
        CacheLine::homed(0)
    }
}

impl CacheLine {
    /// A line of `node`'s memory that nobody has written.
    pub fn homed(node: u32) -> Self {
        CacheLine {
            owner: u32::MAX,
            home: node,
            busy_until: 0,
        }
    }
}

/// The node of every CPU id, and its core where cores have several threads: what tells
/// a sibling's, a local and a remote cache-line transfer apart, shared (not copied) by
/// the engine's locks and lines and by the LRU lists' lines (mm/lru_lines.rs).
#[derive(Debug, Clone, Default)]
pub struct Topology {
    node: Rc<[u32]>,
    /// The core of every CPU id (the id of its first thread); None: every CPU is a core.
    core: Option<Rc<[u32]>>,
}

/// Where a line a CPU writes comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// The writer wrote it last, or nobody did (a cold line is charged nothing extra).
    None,
    /// The other hardware thread of the writer's core wrote it last.
    Sibling,
    /// Another CPU of the writer's node wrote it last.
    Local,
    /// A CPU of another node wrote it last.
    Remote,
}

impl Topology {
    /// A line last written by `from` (`u32::MAX`: by nobody) and now written by `to`.
    #[inline]
    pub fn transfer(&self, from: u32, to: u32) -> Transfer {
        if from == to || from == u32::MAX {
            Transfer::None
        } else if self.node.get(from as usize) != self.node.get(to as usize) {
            Transfer::Remote
        } else if self.siblings(from, to) {
            // Siblings share a node (Topology::machine lays them out so).
            Transfer::Sibling
        } else {
            Transfer::Local
        }
    }

    /// Whether CPUs `a` and `b` are hardware threads of one core (a CPU is its own).
    #[inline]
    pub fn siblings(&self, a: u32, b: u32) -> bool {
        match &self.core {
            None => a == b,
            Some(core) => core.get(a as usize) == core.get(b as usize),
        }
    }

    /// How many nodes the CPU ids name (the highest node plus one).
    pub fn nodes(&self) -> usize {
        self.node.iter().max().map_or(1, |&n| n as usize + 1)
    }

    /// The machine's CPUs: `cpus` over `nodes` in contiguous blocks (node n owns
    /// [n*cpus/nodes, (n+1)*cpus/nodes)), each block's cores laid out as the module's
    /// text says for `threads_per_core` threads a core (which divides every block; the
    /// scenario's validation checks it), then `extra` CPUs, one per node in turn, each a
    /// core of its own (the kernel threads' CPUs).
    pub fn machine(cpus: u32, nodes: u32, threads_per_core: u32, extra: u32) -> Self {
        let node_of = |c: u32| {
            (0..nodes)
                .rev()
                .find(|&n| n * cpus / nodes <= c)
                .unwrap_or(0)
        };
        let mut node: Vec<u32> = (0..cpus).map(node_of).collect();
        node.extend((0..extra).map(|i| i % nodes));
        if threads_per_core <= 1 {
            return Topology::from(node);
        }
        let core = (0..cpus + extra)
            .map(|c| {
                if c >= cpus {
                    return c;
                }
                let n = node[c as usize];
                let (lo, hi) = (n * cpus / nodes, (n + 1) * cpus / nodes);
                let cores = ((hi - lo) / threads_per_core).max(1);
                lo + (c - lo) % cores
            })
            .collect::<Vec<u32>>();
        Topology {
            node: node.into(),
            core: Some(core.into()),
        }
    }
}

impl From<Vec<u32>> for Topology {
    /// One core per CPU id, on the node given for it.
    fn from(cpu_node: Vec<u32>) -> Self {
        Topology {
            node: cpu_node.into(),
            core: None,
        }
    }
}

impl std::ops::Deref for Topology {
    type Target = [u32];
    fn deref(&self) -> &[u32] {
        &self.node
    }
}

impl Engine {
    /// An atomic read-modify-write of `line` by the current CPU; returns its cost [ns].
    ///
    /// The writer waits for the line to be free, then, for a transfer from a CPU of
    /// another node, for the home agent of the line's node (occupied
    /// `home_agent_occupancy` by each such transfer), then pays the transfer (from its
    /// core's other thread, local or remote) and the RMW. Many CPUs writing one line thus
    /// serialize, and lines homed on one node share its agent (the module's text).
    /// Not a yield point: callers charge the cost (and sync where the kernel path would).
    #[inline]
    pub fn rmw_line(&self, line: &mut CacheLine) -> u64 {
        let (now, cpu) = (self.now(), self.cpu());
        let mut start = now.max(line.busy_until);
        let transfer = self.topology.transfer(line.owner, cpu);
        if transfer == Transfer::Remote && self.costs.home_agent_occupancy > 0 {
            start = self.home_agent_grant(line.home, start);
        }
        let done = start + self.transfer_cost(transfer) + self.costs.atomic_rmw;
        line.busy_until = done;
        line.owner = cpu;
        done - now
    }

    /// The home agent of `node` takes a transfer that asks for it at `at`: when it starts
    /// serving it (it serves one at a time, each for `home_agent_occupancy`).
    fn home_agent_grant(&self, node: u32, at: Time) -> Time {
        let mut agents = self.home_agents.borrow_mut();
        let Some(free_at) = agents.get_mut(node as usize) else {
            return at;
        };
        let grant = at.max(*free_at);
        *free_at = grant + self.costs.home_agent_occupancy;
        grant
    }

    /// What taking a lock word homed on `home`, last written by `last_cpu`, costs `cpu`
    /// from `at` [ns]: the transfer, after the home agent for one across nodes. Part of
    /// the acquisition, not of the wait for the holder.
    pub(super) fn lock_word_cost(&self, last_cpu: u32, cpu: u32, home: u32, at: Time) -> u64 {
        let transfer = self.topology.transfer(last_cpu, cpu);
        let queued = if transfer == Transfer::Remote && self.costs.home_agent_occupancy > 0 {
            self.home_agent_grant(home, at) - at
        } else {
            0
        };
        queued + self.transfer_cost(transfer)
    }

    fn transfer_cost(&self, t: Transfer) -> u64 {
        match t {
            Transfer::None => 0,
            Transfer::Sibling => self.costs.cacheline_transfer_smt,
            Transfer::Local => self.costs.cacheline_transfer,
            Transfer::Remote => self.costs.cacheline_transfer_remote,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::EngineCosts;
    use std::cell::RefCell;

    // Local transfer 100, remote 200, between siblings 7, atomic 5; the home agent
    // occupied 300 per cross-node transfer.
    const H: u64 = 300;

    fn engine_on(occupancy: u64, topology: Topology) -> Rc<Engine> {
        let costs = EngineCosts {
            lock_uncontended: 10,
            cacheline_transfer: 100,
            cacheline_transfer_remote: 200,
            cacheline_transfer_smt: 7,
            atomic_rmw: 5,
            home_agent_occupancy: occupancy,
        };
        Rc::new(Engine::new(costs, topology))
    }

    fn engine(occupancy: u64) -> Rc<Engine> {
        // CPUs 0 and 1 on node 0, 2 and 3 on node 1, each a core.
        engine_on(occupancy, vec![0, 0, 1, 1].into())
    }

    /// Each (time, cpu, line) writes `line` once; the cost each write returned, in order.
    fn writes(e: &Rc<Engine>, lines: Vec<CacheLine>, w: &[(Time, u32, usize)]) -> Vec<u64> {
        let lines = Rc::new(RefCell::new(lines));
        let out = Rc::new(RefCell::new(vec![0; w.len()]));
        for (i, &(at, cpu, l)) in w.iter().enumerate() {
            let (e2, lines, out) = (e.clone(), lines.clone(), out.clone());
            e.spawn(at, cpu, async move {
                let c = e2.rmw_line(&mut lines.borrow_mut()[l]);
                out.borrow_mut()[i] = c;
            });
        }
        e.run_until(1_000_000, 1, &mut |_| true);
        let v = out.borrow().clone();
        v
    }

    #[test]
    fn a_line_costs_its_transfer_and_the_atomic_and_serves_one_writer_at_a_time() {
        let e = engine(0);
        // Cold: the atomic only (5). cpu1 (same node) at 10: 100 + 5. cpu2 (other
        // node) at 10 as well, after cpu1 by CPU order: waits for cpu1's write to end
        // at 115, then 200 + 5: done at 320, 310 after it asked.
        let c = writes(
            &e,
            vec![CacheLine::default()],
            &[(0, 0, 0), (10, 1, 0), (10, 2, 0)],
        );
        assert_eq!(c, vec![5, 105, 310]);
    }

    #[test]
    fn two_lines_homed_on_one_node_queue_at_its_agent_and_on_two_nodes_do_not() {
        // Node 0's CPUs write both lines first (cold), then at 1000 node 1's CPUs write
        // one each: two cross-node transfers at the same instant.
        let w = [(0, 0, 0), (0, 1, 1), (1000, 2, 0), (1000, 3, 1)];
        // Both lines of node 0: cpu2 is granted the agent at 1000 (200 + 5); cpu3 waits
        // for the agent until 1000 + H, then 200 + 5.
        let same = writes(&engine(H), vec![CacheLine::homed(0); 2], &w);
        assert_eq!(same, vec![5, 5, 205, H + 205]);
        // One line on each node: two agents, neither waits.
        let two = writes(
            &engine(H),
            vec![CacheLine::homed(0), CacheLine::homed(1)],
            &w,
        );
        assert_eq!(two, vec![5, 5, 205, 205]);
        // Both lines of node 1, written from node 1 first and then from node 0: node 1's
        // agent is the one that queues.
        let w1 = [(0, 2, 0), (0, 3, 1), (1000, 0, 0), (1000, 1, 1)];
        let node1 = writes(&engine(H), vec![CacheLine::homed(1); 2], &w1);
        assert_eq!(node1, vec![5, 5, 205, H + 205]);
        // No agent (occupancy 0): independent lines, whatever their home.
        let none = writes(&engine(0), vec![CacheLine::homed(0); 2], &w);
        assert_eq!(none, vec![5, 5, 205, 205]);
    }

    #[test]
    fn an_agent_serves_one_cross_node_transfer_per_occupancy_so_one_node_serves_half_of_two() {
        // Four lines, last written on node 0 (cpu0, cold, one after the other), then all
        // four written at 5000 from node 1 (cpu2 and cpu3, two lines each, in turn).
        let mut w: Vec<(Time, u32, usize)> = (0..4).map(|l| (l as Time * 10, 0, l)).collect();
        w.extend([(5000, 2, 0), (5000, 3, 1), (5001, 2, 2), (5001, 3, 3)]);
        let last = |c: &[u64]| (4..8).map(|i| w[i].0 + c[i]).max().unwrap();
        // All four homed on node 0: grants at 5000, +H, +2H, +3H; the last done
        // 5000 + 3H + 205.
        let one = writes(&engine(H), vec![CacheLine::homed(0); 4], &w);
        assert_eq!(last(&one), 5000 + 3 * H + 205);
        // Two on each node: each agent takes two, the second at +H.
        let homes = [0, 1, 0, 1].map(CacheLine::homed).to_vec();
        let two = writes(&engine(H), homes, &w);
        assert_eq!(last(&two), 5000 + H + 205);
    }

    /// cpu1 writes a line homed on `line_home` at 0 and cpu0 takes and drops a lock of
    /// node 0 at 0; at 1000 cpu2 writes the line and cpu3 takes the lock (both from node
    /// 1). Returns when cpu3 held the lock, and the contentions recorded.
    fn lock_after_line(line_home: u32) -> (Time, u64) {
        use crate::engine::{LockClass, Site};
        let e = engine(H);
        let l = e.new_lock(LockClass::LruLock, 0);
        let line = Rc::new(RefCell::new(CacheLine::homed(line_home)));
        let held = Rc::new(RefCell::new(0));
        for (at, cpu) in [(0, 1), (1000, 2)] {
            let (e2, line) = (e.clone(), line.clone());
            e.spawn(at, cpu, async move {
                let c = e2.rmw_line(&mut line.borrow_mut());
                e2.charge(c);
            });
        }
        for (at, cpu) in [(0, 0), (1000, 3)] {
            let (e2, held) = (e.clone(), held.clone());
            e.spawn(at, cpu, async move {
                e2.lock(l, Site::ShrinkInactiveList).await;
                *held.borrow_mut() = e2.now();
                e2.unlock(l);
            });
        }
        e.run_until(1_000_000, 1, &mut |_| true);
        let contended = e.lock_stats().iter().map(|(_, _, s)| s.contended).sum();
        let t = *held.borrow();
        (t, contended)
    }

    #[test]
    fn a_lock_word_queues_at_its_nodes_agent_as_part_of_the_acquisition() {
        // The line's transfer takes node 0's agent at 1000 until 1000 + H; the lock word,
        // also node 0's and last written on node 0, waits for it, then 200 + 10 (lock).
        // No holder was in the way: no contention recorded.
        assert_eq!(lock_after_line(0), (1000 + H + 210, 0));
        // The line homed on node 1: node 0's agent is free.
        assert_eq!(lock_after_line(1), (1000 + 210, 0));
    }

    #[test]
    fn smt_cores_are_each_nodes_first_threads_then_their_siblings() {
        // 12 CPUs on 2 nodes, 2 threads a core, 2 extra: node 0 = CPUs 0-5, cores
        // {0,3} {1,4} {2,5}; node 1 = CPUs 6-11, cores {6,9} {7,10} {8,11}; CPUs 12
        // (node 0) and 13 (node 1) cores of their own.
        let t = Topology::machine(12, 2, 2, 2);
        assert_eq!(&t[..], &[0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 0, 1]);
        let pairs: Vec<(u32, u32)> = (0..14)
            .flat_map(|a| (a + 1..14).map(move |b| (a, b)))
            .filter(|&(a, b)| t.siblings(a, b))
            .collect();
        assert_eq!(pairs, [(0, 3), (1, 4), (2, 5), (6, 9), (7, 10), (8, 11)]);
        assert_eq!(t.transfer(3, 0), Transfer::Sibling);
        assert_eq!(t.transfer(1, 0), Transfer::Local);
        assert_eq!(t.transfer(9, 0), Transfer::Remote);
        assert_eq!(t.transfer(12, 0), Transfer::Local);
        assert_eq!(t.transfer(0, 0), Transfer::None);
        // Four threads a core: node 0 = CPUs 0-7, cores {0,2,4,6} and {1,3,5,7}.
        let t4 = Topology::machine(8, 1, 4, 0);
        assert!(t4.siblings(1, 7) && t4.siblings(0, 6) && !t4.siblings(0, 1));
        // One thread a core: siblings only of themselves, the layout of `From`.
        let t1 = Topology::machine(12, 2, 1, 2);
        assert!((0..14).all(|a| (0..14).all(|b| t1.siblings(a, b) == (a == b))));
        assert_eq!(&t1[..], &t[..]);
    }

    #[test]
    fn a_line_from_the_cores_other_thread_costs_the_smt_transfer_and_no_agent() {
        // 4 CPUs on 2 nodes, 2 threads a core: cores {0,1} on node 0, {2,3} on node 1.
        let e = engine_on(H, Topology::machine(4, 2, 2, 0));
        // A line homed on node 1. cpu0 writes it cold at 0 (5). cpu2 at 100: remote,
        // node 1's agent is granted at 100 (busy until 100 + H), 200 + 5: done at 305.
        // cpu3, cpu2's sibling, asks at 150, while the agent is still busy: it waits
        // for the line only (until 305), then 7 + 5. cpu0 at 1000: remote from cpu3,
        // the agent free again, 205. cpu1, cpu0's sibling, also at 1000 and run after
        // cpu0 (the lower CPU first): waits for cpu0's write (until 1205), then 7 + 5.
        let w = [
            (0, 0, 0),
            (100, 2, 0),
            (150, 3, 0),
            (1000, 0, 0),
            (1000, 1, 0),
        ];
        let c = writes(&e, vec![CacheLine::homed(1)], &w);
        assert_eq!(c, vec![5, 205, 305 - 150 + 12, 205, 1205 - 1000 + 12]);
    }

    #[test]
    fn a_transfer_inside_a_node_never_waits_for_the_agent() {
        // cpu2 takes node 0's line at 1000 (the agent busy until 1000 + H); cpu3, on
        // cpu2's node, takes it next: a local transfer, after cpu2's write ends at 1205.
        let w = [(0, 0, 0), (1000, 2, 0), (1010, 3, 0)];
        let c = writes(&engine(H), vec![CacheLine::homed(0)], &w);
        assert_eq!(c, vec![5, 205, 1205 - 1010 + 105]);
    }
}
