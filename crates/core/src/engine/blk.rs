//! The block layer's per-task plug: swap writes held back and submitted together.
//!
//! Models the plug of block/blk-core.c (blk_start_plug, blk_finish_plug and the flush of
//! the plugged requests, blk_flush_plug, which a task also runs when it goes to sleep).
//! Reclaim plugs its writes for the length of shrink_lruvec (vmscan.rs and MGLRU's
//! eviction.rs); the device itself is blkdev.rs. Simplified: the plug lives in the
//! reclaimer's scan_control rather than in the task (`ScanControl::plug`, as only reclaim
//! plugs), it holds swap writes only, whole: adjacent slots are not merged into one request
//! (each folio is one 4 KiB write), and BLK_MAX_REQUEST_COUNT is counted by the caller
//! that adds to it (vmscan.rs's pageout).

use crate::mm::vmscan::ScanControl;
use crate::sim::Sim;

impl Sim {
    /// blk_start_plug(): from here the task's swap writes wait in `sc.plug`. Returns
    /// whether this call started the plug: inside another plug it does nothing, and the
    /// outer one stays in charge (the kernel keeps current->plug).
    pub fn blk_start_plug(&self, sc: &mut ScanControl) -> bool {
        if sc.plug.is_some() {
            return false;
        }
        sc.plug = Some(Vec::new());
        true
    }

    /// blk_finish_plug(): submit what the plug holds and stop plugging, when `started`
    /// (this level's blk_start_plug made the plug; an inner level leaves it alone).
    pub async fn blk_finish_plug(&self, sc: &mut ScanControl, started: bool) {
        if started {
            self.blk_flush_plug(sc).await;
            sc.plug = None;
        }
    }

    /// blk_flush_plug(): submit the plugged swap writes to the device, in order; a full
    /// device queue makes the submitter sleep for a free request, as submit_bio does.
    /// Models block/blk-core.c's plug for swap writes only. Simplified: no merging of
    /// adjacent slots into one request (each folio is one 4 KiB write).
    pub(crate) async fn blk_flush_plug(&self, sc: &mut ScanControl) {
        let Some(plug) = sc.plug.as_mut() else {
            return;
        };
        for pfn in std::mem::take(plug) {
            let now = self.e.now();
            let io = {
                let mut mm = self.mm.borrow_mut();
                let s = mm.swap.as_mut().expect("a plugged swap write without swap");
                s.dev.submit_write(now)
            };
            self.submit_swap_write(pfn, io.done_at);
            if io.submitted_at > now {
                self.e.sleep(io.submitted_at - now).await;
            }
        }
    }
}
