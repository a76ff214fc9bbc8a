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

/// Where tracefs is mounted (`root` of the functions below).
pub const TRACEFS: &str = "/sys/kernel/tracing";

/// Mount tracefs and define the kprobe events, when the plan asks for any histogram.
pub fn setup(kprobes: &[String], hists: &[Hist]) -> Result<(), String> {
    if hists.is_empty() && kprobes.is_empty() {
        return Ok(());
    }
    sys::mount("tracefs", TRACEFS, "tracefs", "")
        .map_err(|e| format!("{e} (the kernel needs CONFIG_FTRACE for --trace-hist)"))?;
    define_kprobes(TRACEFS, kprobes)
}

/// Add each kprobe event's line to `root`/kprobe_events.
fn define_kprobes(root: &str, kprobes: &[String]) -> Result<(), String> {
    for k in kprobes {
        append(root, "kprobe_events", k)?;
    }
    Ok(())
}

/// Install each histogram's trigger on its event.
pub fn start(root: &str, hists: &[Hist]) -> Result<(), String> {
    for h in hists {
        append(root, &format!("events/{}/trigger", h.event), &h.trigger)?;
    }
    Ok(())
}

/// Each histogram's table as the kernel prints it (tracing/events/E/hist), then its
/// trigger removed.
pub fn stop(root: &str, hists: &[Hist]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for h in hists {
        let path = format!("{root}/events/{}/hist", h.event);
        out.push(std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?);
        append(
            root,
            &format!("events/{}/trigger", h.event),
            &format!("!{}", h.trigger),
        )?;
    }
    Ok(out)
}

/// Append `line` to the tracefs file `root`/`rel`, as `echo LINE >> FILE` does (a trigger
/// or a kprobe definition is added to what is there).
fn append(root: &str, rel: &str, line: &str) -> Result<(), String> {
    let path = format!("{root}/{rel}");
    let res = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .and_then(|mut f| f.write_all(line.as_bytes()));
    res.map_err(|e| {
        // error_log's last entry: "[time] SOURCE: error: WHY", the command, a caret.
        let why = std::fs::read_to_string(format!("{root}/error_log"))
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    /// A directory laid out as tracefs is for one event (files the kernel would make).
    fn fake_tracefs(name: &str) -> String {
        let root =
            std::env::temp_dir().join(format!("reclaimsim-guest-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&root);
        fs::create_dir_all(root.join("events/kprobes/prio")).unwrap();
        fs::write(root.join("events/kprobes/prio/trigger"), "").unwrap();
        fs::write(
            root.join("events/kprobes/prio/hist"),
            "{ prio: 12 } hitcount: 3\n",
        )
        .unwrap();
        fs::write(root.join("kprobe_events"), "").unwrap();
        root.to_str().unwrap().to_string()
    }

    fn hist() -> Hist {
        Hist {
            event: "kprobes/prio".into(),
            trigger: "hist:keys=prio".into(),
        }
    }

    #[test]
    fn a_rep_installs_reads_and_removes_each_trigger() {
        let root = fake_tracefs("rep");
        define_kprobes(&root, &["p:prio vmpressure_prio prio=%dx:s32".into()]).unwrap();
        assert_eq!(
            fs::read_to_string(format!("{root}/kprobe_events")).unwrap(),
            "p:prio vmpressure_prio prio=%dx:s32"
        );
        start(&root, &[hist()]).unwrap();
        let tables = stop(&root, &[hist()]).unwrap();
        assert_eq!(tables, vec!["{ prio: 12 } hitcount: 3\n".to_string()]);
        // appended, as echo >> does: the trigger, then its removal
        let trigger = fs::read_to_string(format!("{root}/events/kprobes/prio/trigger")).unwrap();
        assert_eq!(trigger, "hist:keys=prio!hist:keys=prio");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_refused_write_names_the_line_the_file_and_the_error_log() {
        let root = fake_tracefs("refused");
        fs::write(
            format!("{root}/error_log"),
            "[  1.0] hist:sched:sched_switch: error: Couldn't find field\n  Command: hist:keys=x\n     ^\n",
        )
        .unwrap();
        let bad = Hist {
            event: "sched/sched_switch".into(),
            trigger: "hist:keys=x".into(),
        };
        let e = start(&root, &[bad]).unwrap_err();
        assert!(
            e.contains("\"hist:keys=x\"") && e.contains("sched_switch/trigger"),
            "{e}"
        );
        assert!(
            e.contains("error_log: [  1.0] hist:sched:sched_switch: error: Couldn't find field"),
            "{e}"
        );
        fs::remove_dir_all(&root).unwrap();
    }
}
