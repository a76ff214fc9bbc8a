//! A block device: a fixed latency per 4 KiB IO plus a throughput limit shared by reads and
//! writes.
//!
//! IOs are serviced in submission order by one server: an IO submitted at `t` starts at
//! `max(t, free_at)`, occupies the device for its direction's `interval` (1 / that
//! direction's IOPS), and completes its direction's `latency` after it started. Below
//! saturation an IO costs just its latency; at saturation completions are spaced by the
//! intervals, as on a real device whose queue is full. Reads and writes share the server:
//! a mix of them saturates at the harmonic mean of the two IOPS figures (a 70/30 mix at
//! 1 / (0.7 / read_iops + 0.3 / write_iops)), the way an SSD's mixed-workload throughput
//! falls between its read and write figures, and the way a virtual disk whose backend
//! serves one request at a time behaves.
//! The device queue holds at most `queue_depth` IOs (blk-mq nr_requests); a submitter that
//! finds it full sleeps in submit_bio until a slot frees, which is what throttles a
//! reclaimer to the device's speed. Simplified: the queue's fill is the server's backlog in
//! time divided by the submitting direction's interval.
//! Defaults (cost table) describe a PCIe 4 datacenter NVMe drive (PM9A3 class: 4 KiB random
//! read ~1M IOPS at ~80 us, random write ~180K IOPS at ~20 us).
//!
//! **Where a read completes.** A task that reads sleeps until the completion interrupt
//! has run blk_mq_complete_request for its request and woken it. An NVMe drive has a
//! completion queue per CPU whose interrupt goes to the submitting CPU, so the reader is
//! woken where it sleeps. A device with one queue (a virtio disk, an older SATA
//! controller) interrupts one CPU. A read submitted from another CPU is either completed
//! back on the submitter through an IPI (blk_mq_complete_request_remote, when the two CPUs
//! share no cache) or completed on the interrupt's CPU, which wakes the reader across CPUs
//! (ttwu_queue_wakelist's IPI, as on the measured guest); either way the reader's CPU
//! leaves idle, and the read costs `ssd_remote_wakeup` more (0 for a per-CPU-queue device;
//! `reclaimsim calibrate` measures it as the difference between reads pinned to each CPU).
//! Which CPU a reader submits from is the scheduler's: readers migrate (on a two-vCPU
//! guest, each of two swapping processes moved between the CPUs several times a second
//! and both ended within 0.2% of each other, docs/fidelity.md), and a lone reader settles
//! on the interrupt's CPU. The model keeps each task on its CPU for everything else and
//! draws the submitting CPU instead: with workload threads on `m` CPUs, a read is on the
//! interrupt's CPU with probability 1/m (its own random stream, so runs stay
//! deterministic), which is the long-run share of a scheduler that spreads the readers
//! evenly. Simplified: no placement history (a reader that just paid is as likely to
//! pay again), the interrupt handlers' time on that CPU is not charged, and a writeback
//! waiter woken by a write's completion pays no cross-CPU wakeup.

use super::rng::Rng;
use super::Time;
use rand::Rng as _;

#[derive(Debug, Clone)]
pub struct BlockDevice {
    pub read_latency: u64,
    pub write_latency: u64,
    pub read_interval: u64,
    pub write_interval: u64,
    /// When the server finishes the IOs submitted so far.
    free_at: Time,
    /// Requests the device can have queued (blk-mq nr_requests).
    pub queue_depth: u64,
    /// Extra wait of a read submitted off the interrupt's CPU (0: per-CPU queues).
    pub remote_wakeup: u64,
    /// Draws the CPU each read is submitted from (see the module's essay).
    placement: Rng,
}

/// A submitted IO: when the submitter may go on (it slept if the queue was full) and when
/// the IO completes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Submitted {
    pub submitted_at: Time,
    pub done_at: Time,
}

impl BlockDevice {
    pub fn new(
        read_latency: u64,
        write_latency: u64,
        read_interval: u64,
        write_interval: u64,
    ) -> Self {
        BlockDevice {
            read_latency,
            write_latency,
            read_interval,
            write_interval,
            free_at: 0,
            queue_depth: 1024,
            remote_wakeup: 0,
            placement: super::rng::stream(0, super::streams::UNSEEDED_DEVICE_STREAM),
        }
    }

    /// Seed the draws of the submitting CPU (a run's own stream for this device).
    pub fn seed_placement(&mut self, rng: Rng) {
        self.placement = rng;
    }

    /// The completion of a read and the wakeup of its reader (blk_mq_complete_request,
    /// try_to_wake_up), when workload threads run on `cpus` CPUs: the extra wait [ns]
    /// beyond the device's latency. Simplified: the submitting CPU is drawn, 1 in `cpus`
    /// on the interrupt's CPU, rather than followed through the scheduler's migrations.
    pub fn read_wakeup(&mut self, cpus: u32) -> u64 {
        if self.remote_wakeup == 0 || cpus <= 1 || self.placement.random_range(0..cpus) == 0 {
            0
        } else {
            self.remote_wakeup
        }
    }

    fn submit(free_at: &mut Time, interval: u64, latency: u64, depth: u64, now: Time) -> Submitted {
        let start = now.max(*free_at);
        *free_at = start + interval;
        // IOs ahead of this one that have not started; past the queue depth, wait.
        let backlog = start - now;
        let submitted_at = now + backlog.saturating_sub(depth.saturating_sub(1) * interval);
        Submitted {
            submitted_at,
            done_at: start + latency,
        }
    }

    /// Submit a one-page read at `now`.
    pub fn submit_read(&mut self, now: Time) -> Submitted {
        Self::submit(
            &mut self.free_at,
            self.read_interval,
            self.read_latency,
            self.queue_depth,
            now,
        )
    }

    /// Submit a one-page write at `now`.
    pub fn submit_write(&mut self, now: Time) -> Submitted {
        Self::submit(
            &mut self.free_at,
            self.write_interval,
            self.write_latency,
            self.queue_depth,
            now,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_alone_below_saturation_then_spaced_by_interval() {
        let mut d = BlockDevice::new(100, 20, 10, 50);
        let done = |s: Submitted| s.done_at;
        assert_eq!(done(d.submit_read(0)), 100);
        assert_eq!(done(d.submit_read(1000)), 1100);
        // Three at once: starts at 2000, 2010, 2020.
        assert_eq!(
            [
                d.submit_read(2000),
                d.submit_read(2000),
                d.submit_read(2000)
            ]
            .map(done),
            [2100, 2110, 2120]
        );
        // Writes queue behind them on the same server (free from 2030): the first starts at
        // 2030 and completes its 20 ns latency later; the second starts one write
        // interval (50) after it.
        assert_eq!(done(d.submit_write(2000)), 2050);
        assert_eq!(done(d.submit_write(2000)), 2100);
        // A read submitted then waits for both writes' service (free at 2130).
        assert_eq!(done(d.submit_read(2000)), 2230);
    }

    #[test]
    fn a_mix_saturates_at_the_harmonic_mean_of_the_iops() {
        // Reads of 10 ns service and writes of 40 ns, 3 to 1, all submitted at once: 300
        // reads and 100 writes keep the server busy 300 * 10 + 100 * 40 = 7000 ns, so the
        // last completes at 7000 - its interval + its latency.
        let mut d = BlockDevice::new(5, 5, 10, 40);
        let mut last = 0;
        for i in 0..400 {
            let s = if i % 4 == 3 {
                d.submit_write(0)
            } else {
                d.submit_read(0)
            };
            last = last.max(s.done_at);
        }
        assert_eq!(last, 7000 - 40 + 5);
    }

    #[test]
    fn a_read_pays_the_remote_wakeup_unless_submitted_on_the_interrupts_cpu() {
        let mut d = BlockDevice::new(100, 20, 10, 50);
        // Per-CPU completion queues: nobody pays, wherever threads run.
        assert_eq!(d.read_wakeup(4), 0);
        d.remote_wakeup = 55;
        // Threads on one CPU: it is the interrupt's CPU (a lone reader settles there).
        assert!((0..1000).all(|_| d.read_wakeup(1) == 0));
        // On m CPUs, (m - 1) / m of the reads pay, each the full wakeup: 10,000 draws
        // are within 3% of the share (over 6 standard deviations).
        for m in [2u32, 3, 8] {
            let w: Vec<u64> = (0..10_000).map(|_| d.read_wakeup(m)).collect();
            assert!(w.iter().all(|&x| x == 0 || x == 55));
            let paid = w.iter().filter(|&&x| x == 55).count() as f64 / 1e4;
            let share = (m - 1) as f64 / m as f64;
            assert!(
                (paid - share).abs() < 0.03,
                "m = {m}: {paid} against {share}"
            );
        }
    }

    #[test]
    fn a_full_queue_blocks_the_submitter() {
        let mut d = BlockDevice::new(100, 20, 10, 50);
        d.queue_depth = 2;
        let s: Vec<Submitted> = (0..4).map(|_| d.submit_write(0)).collect();
        // Two fit at once; the third waits for the first to start service... one interval.
        assert_eq!(
            s.iter().map(|x| x.submitted_at).collect::<Vec<_>>(),
            vec![0, 0, 50, 100]
        );
        assert_eq!(
            s.iter().map(|x| x.done_at).collect::<Vec<_>>(),
            vec![20, 70, 120, 170]
        );
    }
}
