//! Kernel event histograms over each rep (`kernel-run --vm --trace-hist`, `--kprobe`).
//!
//! The model's counters say what reclaim did; some questions about the kernel beside it
//! are about why (which work preempted a reclaimer, at which priority reclaim ran), and
//! the kernel answers them with its own tracing: a hist trigger
//! (Documentation/trace/histogram.rst) counts an event's hits per key inside the kernel,
//! so nothing is lost however often it fires and nothing is written out but the table.
//! A kprobe event (Documentation/trace/kprobetrace.rst) makes an event of a kernel
//! function and its arguments where the kernel has no tracepoint.
//!
//! Setup (once per boot): mount tracefs and define the plan's kprobe events. Per rep: the
//! plan's triggers are installed on their events just before the workloads start and read
//! and removed when they have ended, so each rep's table counts that rep only. A kernel
//! that refuses a definition or a trigger (an unknown event, field or symbol) ends the run
//! with its error and the last line of tracing/error_log, which says why.

use crate::plan::Hist;
use crate::sys;
use std::io::Write;

/// Where tracefs is mounted.
const TRACEFS: &str = "/sys/kernel/tracing";

/// Mount tracefs and define the kprobe events, when the plan asks for any histogram.
pub fn setup(kprobes: &[String], hists: &[Hist]) -> Result<(), String> {
    if hists.is_empty() && kprobes.is_empty() {
        return Ok(());
    }
    sys::mount("tracefs", TRACEFS, "tracefs", "")
        .map_err(|e| format!("{e} (the kernel needs CONFIG_FTRACE for --trace-hist)"))?;
    for k in kprobes {
        append("kprobe_events", k)?;
    }
    Ok(())
}

/// Install each histogram's trigger on its event.
pub fn start(hists: &[Hist]) -> Result<(), String> {
    for h in hists {
        append(&format!("events/{}/trigger", h.event), &h.trigger)?;
    }
    Ok(())
}

/// Each histogram's table as the kernel prints it (tracing/events/E/hist), then its
/// trigger removed.
pub fn stop(hists: &[Hist]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for h in hists {
        let path = format!("{TRACEFS}/events/{}/hist", h.event);
        out.push(std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?);
        append(
            &format!("events/{}/trigger", h.event),
            &format!("!{}", h.trigger),
        )?;
    }
    Ok(out)
}

/// Append `line` to the tracefs file `rel`, as `echo LINE >> FILE` does (a trigger or a
/// kprobe definition is added to what is there).
fn append(rel: &str, line: &str) -> Result<(), String> {
    let path = format!("{TRACEFS}/{rel}");
    let res = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    res.map_err(|e| {
        // error_log's last entry: "[time] SOURCE: error: WHY", the command, a caret.
        let why = std::fs::read_to_string(format!("{TRACEFS}/error_log"))
            .ok()
            .and_then(|l| {
                l.lines()
                    .rev()
                    .find(|s| s.contains("error:"))
                    .map(str::to_string)
            })
            .map(|l| format!(" (error_log: {})", l.trim()))
            .unwrap_or_default();
        format!("cannot write {line:?} to {path}: {e}{why}")
    })
}
