//! The observer of lock contention: which waiters fire lock:contention_begin/end, and what
//! recording each event costs the CPU that fires it (`observe` in a scenario).
//!
//! Seed 000's figures are a `perf lock record -a` window; the observer is part of that
//! experiment. How the kernel and perf take the events:
//!
//! - queued_spin_lock_slowpath (kernel/locking/qspinlock.c) fires trace_contention_begin
//!   only on the MCS-queue path: an acquirer that finds the lock held by its owner alone
//!   sets the pending bit and spins on the owner, untraced; one that finds the pending bit
//!   or a queue tail (another CPU already waiting) goes to the queue, fires
//!   contention_begin before it publishes its tail (so the event's cost delays its place in
//!   the queue), and fires contention_end at the `release` label, after it has set the
//!   locked byte: the end event is written inside the critical section. Both run with
//!   interrupts off (spin_lock_irq turned them off before the slow path).
//! - A KVM guest with paravirtual spinlocks (`machine.paravirt_spinlocks`) runs
//!   __pv_queued_spin_lock_slowpath, which skips the pending bit and goes straight to the
//!   queue: there every waiter is traced, the first one included.
//! - `perf lock record` (tools/perf/builtin-lock.c) records both tracepoints as
//!   `perf record -R -m 1024 -c 1 --synth task --call-graph fp,8`: every event is a sample
//!   with its raw data and a frame-pointer call chain of kernel and user frames
//!   (`perf_lock_record_event` in the cost table, measured by `reclaimsim calibrate`).
//! - `perf lock contention -b` attaches BPF programs instead: the one on contention_begin
//!   takes the stack and a timestamp (`perf_lock_bpf_begin`, outside the hold), the one on
//!   contention_end looks them up and adds the wait to a map (`perf_lock_bpf_end`, inside).
//!
//! What the observer reads: for each traced acquisition, the time from contention_begin to
//! contention_end (the engine's wait of that acquisition, which includes the begin event's
//! cost); the pending-bit spinner's wait is invisible. Reports carry both that and the
//! truth (every acquisition's wait) of the same, observed, run.
//!
//! Simplified: the model's tasks are pinned and several may share a CPU, which the kernel
//! cannot have inside a spinlock (spin_lock_irq disables preemption), so a waiter counts as
//! "another CPU already waiting" only when its CPU is neither the acquirer's nor the
//! owner's; virt_spin_lock's test-and-set fallback (a guest without paravirt spinlocks,
//! where no event fires) and the bounded wait on a pending->locked handover are not
//! modeled; a sample's cost does not depend on the stack's depth.

/// The `observe` setting: who watches lock contention during the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Observe {
    /// Nobody: the tracepoints are off and cost nothing.
    #[default]
    None,
    /// `perf lock record -a` (then `perf lock contention` on its data).
    PerfLock,
    /// `perf lock contention -b -a`: BPF programs on the tracepoints.
    PerfLockBpf,
}

impl Observe {
    pub fn is_none(&self) -> bool {
        *self == Observe::None
    }
}

/// What one traced contention costs the waiter: at contention_begin (before it joins the
/// queue, outside the hold) and at contention_end (after it took the lock, inside the hold).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TraceCost {
    pub begin: u64,
    pub end: u64,
}

impl TraceCost {
    /// The costs of `observe` from the cost table's entries: perf lock record samples
    /// both tracepoints alike; perf lock contention -b's begin program takes the stack.
    pub fn of(observe: Observe, record_event: u64, bpf_begin: u64, bpf_end: u64) -> TraceCost {
        match observe {
            Observe::None => TraceCost::default(),
            Observe::PerfLock => TraceCost {
                begin: record_event,
                end: record_event,
            },
            Observe::PerfLockBpf => TraceCost {
                begin: bpf_begin,
                end: bpf_end,
            },
        }
    }
}

/// queued_spin_lock_slowpath()'s choice for an acquirer on `cpu` that finds the lock
/// owned by `owner_cpu`, with `waiting` the CPUs of the acquirers already waiting (the
/// pending spinner first, then the queue): the pending bit (false: untraced) when no other
/// CPU waits, else the MCS queue (true: contention_begin/end fire). Waiters that share the
/// acquirer's or the owner's CPU do not count (see the module's simplifications).
/// With `paravirt` (a guest's __pv_queued_spin_lock_slowpath), every waiter queues.
pub fn joins_mcs_queue(
    cpu: u32,
    owner_cpu: u32,
    waiting: impl IntoIterator<Item = u32>,
    paravirt: bool,
) -> bool {
    cpu != owner_cpu && (paravirt || waiting.into_iter().any(|w| w != cpu && w != owner_cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_waiter_spins_on_the_pending_bit_and_later_ones_queue() {
        // Owner on CPU 0; CPU 1 arrives to nobody waiting: pending, untraced.
        assert!(!joins_mcs_queue(1, 0, [], false));
        // CPU 2 arrives while CPU 1 spins on the pending bit: the queue.
        assert!(joins_mcs_queue(2, 0, [1], false));
        // A task sharing the owner's or a waiter's CPU cannot be inside the lock with it.
        assert!(!joins_mcs_queue(0, 0, [1], false));
        assert!(!joins_mcs_queue(1, 0, [1, 0], false));
        // A paravirt guest has no pending spinner: the first waiter queues too.
        assert!(joins_mcs_queue(1, 0, [], true));
        assert!(!joins_mcs_queue(0, 0, [], true));
    }

    #[test]
    fn observe_names_round_trip_and_costs_follow_the_mode() {
        // The names a scenario and --observe use (cli.py's choices).
        for (o, name) in [
            (Observe::None, "none"),
            (Observe::PerfLock, "perf-lock"),
            (Observe::PerfLockBpf, "perf-lock-bpf"),
        ] {
            let quoted = format!("\"{name}\"");
            assert_eq!(serde_json::to_string(&o).unwrap(), quoted);
            assert_eq!(serde_json::from_str::<Observe>(&quoted).unwrap(), o);
        }
        assert!(serde_json::from_str::<Observe>("\"perf\"").is_err());
        assert_eq!(
            TraceCost::of(Observe::None, 5, 3, 2),
            TraceCost { begin: 0, end: 0 }
        );
        assert_eq!(
            TraceCost::of(Observe::PerfLock, 5, 3, 2),
            TraceCost { begin: 5, end: 5 }
        );
        assert_eq!(
            TraceCost::of(Observe::PerfLockBpf, 5, 3, 2),
            TraceCost { begin: 3, end: 2 }
        );
    }
}
