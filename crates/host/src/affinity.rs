//! Where kernel-run's workload threads run: with `--pin`, on the CPUs the simulator gives
//! them.
//!
//! The simulator has no scheduler: each workload task owns one CPU for the whole run
//! (`Scenario::placements`, no time sharing). On the kernel, a task that sleeps on IO
//! wakes wherever the scheduler finds room. Where a task runs matters to reclaim: its
//! batched TLB flush (arch_tlbbatch_flush) interrupts every CPU of the unmapped mms'
//! mm_cpumask that is not in lazy-TLB mode, and since Linux 6.14 x86 leaves a CPU in that
//! mask after the mm left it (trimmed at most once a second, by a flush aimed at the mm).
//! `kernel-run --pin` pins each workload thread to its simulated CPU (sched_setaffinity),
//! so that both sides place tasks alike. The parent narrows its own affinity to the
//! process's CPUs before it forks the worker, so the new address space never runs
//! elsewhere (a CPU it ran on once would stay in its mask).
//!
//! Not the default: pinning has costs of its own that the model lacks. A disk with one
//! queue interrupts one CPU; a task pinned to another is woken across CPUs at every
//! completion, where the scheduler would have moved it next to the interrupt (on the
//! reference machine, a single-threaded page-cache replay took 40-60% longer pinned to the
//! CPU without the interrupt; see docs/fidelity.md, "Pinned or not").
//!
//! A host that lacks a CPU the scenario names (a 176-CPU scenario on a laptop) leaves the
//! threads where its scheduler puts them, and kernel-run's report says so.

use reclaimsim_core::scenario::Scenario;

/// The CPU of each thread of process `process` of workload `wi`, in thread order, as the
/// simulator places them (process p's thread t is task p * threads + t of the workload);
/// empty when the scenario's placement does not fit its machine (validation refuses it).
pub fn process_cpus(sc: &Scenario, wi: usize, process: u32) -> Vec<u32> {
    let (placement, _) = sc.workload_cpus();
    let n = sc
        .workloads
        .get(wi)
        .map_or(0, |w| crate::threads_per_process(w) as usize);
    placement.get(wi).map_or_else(Vec::new, |cpus| {
        cpus.iter()
            .skip(process as usize * n)
            .take(n)
            .copied()
            .collect()
    })
}

/// The CPUs the calling thread may run on (sched_getaffinity), in increasing order.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: reading this thread's affinity into a zeroed cpu_set_t.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Vec::new();
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .map(|c| c as u32)
            .collect()
    }
}

/// Let the calling thread run on `cpus` only (sched_setaffinity); false when the kernel
/// refuses the set (no such CPU) or a CPU is past the set's size.
pub fn set_allowed(cpus: &[u32]) -> bool {
    if cpus
        .iter()
        .any(|&c| c as usize >= libc::CPU_SETSIZE as usize)
    {
        return false;
    }
    // SAFETY: a zeroed cpu_set_t with the given bits set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c as usize, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Pin the calling thread to `cpu`; false when the affinity cannot be set (no such CPU).
pub fn pin_thread(cpu: u32) -> bool {
    set_allowed(&[cpu])
}

/// Pin the calling workload thread to its simulated CPU when the thread may run there
/// (kernel-run's parent allowed the process exactly its CPUs); otherwise leave it to the
/// scheduler. Returns the CPUs the thread may run on afterwards.
pub fn pin_workload_thread(cpu: Option<u32>) -> Vec<u32> {
    if let Some(c) = cpu {
        if allowed_cpus().contains(&c) {
            pin_thread(c);
        }
    }
    allowed_cpus()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scenario(toml: &str) -> Scenario {
        Scenario::from_toml(toml).unwrap()
    }

    #[test]
    fn processes_take_consecutive_runs_of_their_workloads_cpus() {
        // Workload 0 lists CPUs 4-7 for 2 processes x 2 threads: process 1 has tasks 2
        // and 3, CPUs 6 and 7. Workload 1 names none: it takes the lowest free CPU, 0.
        let sc = scenario(
            r#"
            duration = "1s"
            [machine]
            cpus = 8
            memory_per_node = "1G"
            [[workload]]
            type = "usemem"
            size = "4M"
            processes = 2
            threads = 2
            cpus = "4-7"
            [[workload]]
            type = "usemem"
            size = "4M"
            "#,
        );
        assert_eq!(process_cpus(&sc, 0, 0), vec![4, 5]);
        assert_eq!(process_cpus(&sc, 0, 1), vec![6, 7]);
        assert_eq!(process_cpus(&sc, 1, 0), vec![0]);
        assert_eq!(process_cpus(&sc, 2, 0), Vec::<u32>::new());
    }

    /// The calling thread's CPUs as the kernel prints them (Cpus_allowed_list, ranges).
    fn proc_allowed() -> Vec<u32> {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap();
        let line = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap();
        let mut out = Vec::new();
        for part in line.trim().split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap());
        }
        out
    }

    #[test]
    fn allowed_cpus_are_the_kernels_list() {
        let got = std::thread::spawn(|| (allowed_cpus(), proc_allowed()))
            .join()
            .unwrap();
        assert!(!got.1.is_empty());
        assert_eq!(got.0, got.1);
    }

    #[test]
    fn a_thread_is_pinned_only_to_a_cpu_it_may_use() {
        let before = proc_allowed();
        let last = *before.last().expect("a thread runs on some CPU");
        let got = std::thread::spawn(move || {
            let pinned = pin_workload_thread(Some(last));
            let seen = proc_allowed();
            // A CPU outside its mask leaves it pinned where it is.
            let refused = pin_workload_thread(Some(u32::MAX));
            // No such CPU: the kernel refuses the mask.
            let absent = pin_thread(libc::CPU_SETSIZE as u32 - 1);
            (pinned, seen, refused, absent, pin_thread(last))
        })
        .join()
        .unwrap();
        assert_eq!(got, (vec![last], vec![last], vec![last], false, true));
        let free = std::thread::spawn(|| pin_workload_thread(None))
            .join()
            .unwrap();
        assert_eq!(free, before);
        assert_eq!(
            proc_allowed(),
            before,
            "the caller's own affinity is untouched"
        );
    }
}
