//! The scenario schema: everything a run needs, nothing else.
//!
//! The Python front reads TOML (or takes a dict), and hands the core JSON text; the core
//! deserializes it here with `deny_unknown_fields` everywhere, so a typo is an error that
//! names the field and lists the allowed ones. Semantic checks (ranges, cgroup paths that
//! exist, CPUs that exist) follow in [`Scenario::validate`]. Every error carries the path of
//! the field, e.g. `scenario.cgroup[1].memory.max`.
//!
//! Units: sizes are bytes (an integer, or a string with a binary suffix: `"512M"`, `"16G"`);
//! durations are nanoseconds (an integer, or a string with a unit: `"30s"`, `"80us"`).
//!
//! Files: this one holds [`Scenario`] and reading it (JSON, TOML, `copies`); `units.rs` the
//! sizes, durations and limits; `limits.rs` what the model can represent; `schema.rs` the
//! machine, kernel and cgroup tables; `workloads.rs` the `[[workload]]` table (placement
//! and type); `schedules.rs` the `[[reclaim]]` and `[[lru_gen]]` schedules and their
//! checks; `validate.rs` the other checks; `placement.rs` the CPUs of each task;
//! `parse.rs` TOML to JSON and serde's messages in the scenario's words; `strict.rs`
//! the reading of the JSON value (a table is never an array, a name is a string, an
//! integer fits its field's type).

mod limits;
mod parse;
mod placement;
mod schedules;
mod schema;
mod strict;
mod units;
mod validate;
mod workloads;

pub use crate::trace::{CsvColumn, CsvColumns, TraceFormat};
pub use limits::*;
pub(crate) use parse::{plain_words, struct_fields};
pub use placement::parse_cpu_list;
pub use schedules::*;
pub use schema::*;
pub(crate) use strict::Strict;
pub use units::*;
pub use workloads::*;

use crate::error::{Error, Result};
use parse::{check_printable, line_col, toml_to_json};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use workloads::{check_copies, INNER_PATH};

/// `msg` with an integer too large for 64 bits, which the JSON reader held as a float
/// ("100000000000000000000 is out of range"), shown with the digits `text` has for it.
fn with_digits(msg: String, text: &str) -> String {
    let Some((n, rest)) = msg.split_once(" is out of range;") else {
        return msg;
    };
    let beyond_64_bits = n
        .parse::<i128>()
        .is_ok_and(|x| i64::try_from(x).is_err() && u64::try_from(x).is_err());
    match n.parse::<f64>() {
        Ok(f) if beyond_64_bits => match strict::original_integer(text, f) {
            Some(digits) => format!("{digits} is out of range;{rest}"),
            None => msg,
        },
        _ => msg,
    }
}

/// A complete experiment. TOML tables: `[machine]`, `[machine.swap]`, `[kernel]`, `[costs]`,
/// `[[cgroup]]`, `[[workload]]`.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, shown in reports.
    #[serde(default)]
    pub name: String,
    /// One line saying what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Seed of every random stream in the run.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Virtual time to simulate [ns].
    pub duration: Dur,
    /// Time-series sampling interval [ns] (virtual time).
    #[serde(default = "default_sample_interval")]
    pub sample_interval: Dur,
    /// Virtual time before the workloads' throughput is measured (will-it-scale's and
    /// fio's warmup, discarded from the rate); counts stay whole-run. 0 = from the start.
    #[serde(default, skip_serializing_if = "Dur::is_zero")]
    pub warmup: Dur,
    pub machine: Machine,
    #[serde(default)]
    pub kernel: Kernel,
    /// Who observes lock contention during the run: `none`, `perf-lock` (`perf lock
    /// record -a`) or `perf-lock-bpf` (`perf lock contention -b -a`); each traced event
    /// costs what the cost table says, where the kernel pays it (engine/perf_lock.rs).
    #[serde(
        default,
        skip_serializing_if = "crate::engine::perf_lock::Observe::is_none"
    )]
    pub observe: crate::engine::perf_lock::Observe,
    /// Count the vmscan tracepoints the model fires (mm_vmscan_lru_shrink_inactive and
    /// mm_vmscan_lru_shrink_active per node and priority, mm_vmscan_lru_isolate per list
    /// and order, mm_shrink_slab_start per node and priority and mm_shrink_slab_end per
    /// node, both of the shadow-node shrinker), as a hist trigger counts them:
    /// the result's `tracepoints` table (mm/trace_vmscan.rs). kernel-run --vm --trace-hist
    /// sets it for the model beside the kernel.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub tracepoints: bool,
    /// The seed-patch switches of this run (variant.rs); defaults are upstream.
    #[serde(default)]
    pub variants: crate::variant::Variants,
    /// The A/B experiment `reclaimsim compare` runs on this scenario (read by the front;
    /// the core ignores it): `a` and `b` variant tables, `metrics`, `seeds`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub compare: Option<serde_json::Value>,
    /// Cost-table overrides: name = nanoseconds. Names: see `reclaimsim costs`. They take
    /// precedence over `costs_profile` and `machine.profile` (engine/cost_profile.rs).
    #[serde(default)]
    pub costs: BTreeMap<String, u64>,
    /// A cost profile file (TOML, e.g. written by `reclaimsim calibrate`); a relative path is
    /// relative to the scenario file. Above `machine.profile`, below `[costs]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs_profile: Option<String>,
    /// The cgroup tree below the root (`/` exists implicitly). Parents before children.
    #[serde(default, rename = "cgroup")]
    pub cgroups: Vec<CgroupSpec>,
    #[serde(rename = "workload")]
    pub workloads: Vec<WorkloadSpec>,
    /// Writes to cgroups' memory.reclaim on a schedule (proactive reclaim).
    #[serde(default, rename = "reclaim", skip_serializing_if = "Vec::is_empty")]
    pub reclaims: Vec<ReclaimSchedule>,
    /// Commands written to /sys/kernel/debug/lru_gen on a schedule (MGLRU aging and
    /// eviction from user space).
    #[serde(default, rename = "lru_gen", skip_serializing_if = "Vec::is_empty")]
    pub lru_gens: Vec<LruGenSchedule>,
}

fn default_seed() -> u64 {
    1
}
fn default_sample_interval() -> Dur {
    Dur(1_000_000_000)
}

impl Scenario {
    /// Deserialize from JSON text, naming the failing field's path.
    pub fn from_json(text: &str) -> Result<Scenario> {
        let mut s = Self::deserialize_json(text)?;
        s.expand_copies()?;
        s.validate()?;
        Ok(s)
    }

    /// Check a scenario written by a person (TOML, `--set`), as JSON text: every duration
    /// has a unit. A bare number would be nanoseconds, which a reader takes for seconds
    /// (`duration = 5`); 0 needs none. (Scenario JSON, such as `validate` prints, holds
    /// durations as nanoseconds and is read by `from_json`.) Only deserializes; the
    /// scenario's own checks are `from_json`'s.
    pub fn check_units(text: &str) -> Result<()> {
        units::with_units_required(|| Self::deserialize_json(text)).map(|_| ())
    }

    /// The scenario as written in JSON text, before copies are expanded and the checks.
    fn deserialize_json(text: &str) -> Result<Scenario> {
        // Text that is no JSON value is left to the deserializer's message.
        let value = match serde_json::from_str::<serde_json::Value>(text) {
            Ok(mut v) => {
                check_printable(&v, &mut "scenario".to_string())?;
                // Switches that are a kernel's own behavior default to the version's.
                crate::versions::fill_switch_defaults(&mut v);
                Some(v)
            }
            Err(_) => None,
        };
        let read = match &value {
            // A table is a table, a name a string, an integer in its type (strict.rs).
            Some(v) => serde_path_to_error::deserialize(Strict(v)),
            None => serde_path_to_error::deserialize(&mut serde_json::Deserializer::from_str(text)),
        };
        let s: Scenario = read.map_err(|e| {
            let path = e.path().to_string();
            let path = if path == "." || path.is_empty() {
                "scenario".to_string()
            } else {
                format!("scenario.{path}")
            };
            let mut path = path;
            let inner = e.into_inner();
            // The JSON is the front's rendering of the user's TOML: a position in it
            // means nothing to the user, so only the message is kept.
            let msg = if inner.is_syntax() || inner.is_eof() {
                "not a value the scenario can hold here (NaN and infinity are not numbers)"
                    .to_string()
            } else {
                let full = inner.to_string();
                let suffix = format!(" at line {} column {}", inner.line(), inner.column());
                let m = full.strip_suffix(&suffix).unwrap_or(&full);
                // A workload's own path inside it (see WorkloadSpec's Deserialize).
                match m
                    .strip_prefix(INNER_PATH)
                    .and_then(|r| r.split_once(INNER_PATH))
                {
                    Some((inner_path, m)) => {
                        path = format!("{path}.{inner_path}");
                        m.to_string()
                    }
                    None => plain_words(m),
                }
            };
            Error::scenario(path, with_digits(msg, text))
        })?;
        Ok(s)
    }

    /// Parse TOML text (used by Rust tests, benches and the fuzzers; the Python front
    /// parses TOML itself and hands over JSON).
    pub fn from_toml(text: &str) -> Result<Scenario> {
        let v: toml::Value = toml::from_str(text).map_err(|e| {
            let at = match e.span() {
                Some(r) => {
                    let (l, c) = line_col(text, r.start);
                    format!(" at line {l}, column {c}")
                }
                None => String::new(),
            };
            let msg = e.message().lines().next().unwrap_or("").trim().to_string();
            Error::scenario("scenario", format!("invalid TOML{at}: {msg}"))
        })?;
        let j = toml_to_json(v, &mut "scenario".to_string())?;
        let json = serde_json::to_string(&j).map_err(|e| Error::Internal(e.to_string()))?;
        Scenario::from_json(&json)
    }

    /// Expand `copies` of cgroups and workloads into as many entries, `{i}` numbering them.
    fn expand_copies(&mut self) -> Result<()> {
        let total: u64 = self.cgroups.iter().map(|c| c.copies as u64).sum();
        if total > MAX_COPIES as u64 {
            return Err(Error::scenario(
                "scenario.cgroup",
                format!("{total} cgroups with copies: allowed at most {MAX_COPIES}"),
            ));
        }
        let mut cgroups = Vec::with_capacity(total as usize);
        for (k, c) in self.cgroups.iter().enumerate() {
            check_copies(
                &format!("scenario.cgroup[{k}]"),
                c.copies,
                Some(("path", &c.path)),
            )?;
            for i in 0..c.copies {
                let mut e = c.clone();
                e.path = e.path.replace("{i}", &i.to_string());
                e.copies = 1;
                cgroups.push(e);
            }
        }
        self.cgroups = cgroups;
        let total: u64 = self
            .workloads
            .iter()
            .map(|w| w.common().copies as u64)
            .sum();
        if total > MAX_COPIES as u64 {
            return Err(Error::scenario(
                "scenario.workload",
                format!("{total} workloads with copies: allowed at most {MAX_COPIES}"),
            ));
        }
        let mut workloads = Vec::with_capacity(total as usize);
        for (k, w) in self.workloads.iter().enumerate() {
            let p = w.common();
            // An empty name is the type and position of each copy (see validate.rs).
            let named = (!p.name.is_empty()).then_some(("name", p.name.as_str()));
            check_copies(&format!("scenario.workload[{k}]"), p.copies, named)?;
            for i in 0..p.copies {
                let mut e = w.clone();
                let q = &mut e.placement;
                q.cgroup = q.cgroup.replace("{i}", &i.to_string());
                q.name = q.name.replace("{i}", &i.to_string());
                q.copies = 1;
                workloads.push(e);
            }
        }
        self.workloads = workloads;
        Ok(())
    }

    /// [`Scenario::from_toml`] of a file's bytes, which must be UTF-8.
    pub fn from_toml_bytes(bytes: &[u8]) -> Result<Scenario> {
        match std::str::from_utf8(bytes) {
            Ok(t) => Scenario::from_toml(t),
            Err(e) => {
                let at = e.valid_up_to();
                let good = std::str::from_utf8(&bytes[..at]).unwrap_or("");
                let (l, c) = line_col(good, at);
                Err(Error::scenario(
                    "scenario",
                    format!(
                        "not UTF-8 text: byte {:#04x} at line {l}, column {c}; a scenario is a UTF-8 TOML file",
                        bytes[at]
                    ),
                ))
            }
        }
    }
}
