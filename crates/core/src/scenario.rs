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

use crate::error::{quoted, Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

pub use crate::trace::{CsvColumn, CsvColumns, TraceFormat};

/// Bytes in a base page; the simulator has no large folios yet.
pub const PAGE_SIZE: u64 = 4096;

// ---------------------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------------------

/// A size in bytes. Deserializes from an integer or from `"<number><K|M|G|T>"` (binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl Size {
    pub fn pages(self) -> u64 {
        self.0 / PAGE_SIZE
    }
}

/// `v * mult` as an integer, or an error when it does not fit in 64 bits.
fn scaled(v: f64, mult: f64, what: &str) -> std::result::Result<u64, String> {
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("a {what} must be a non-negative number"));
    }
    let x = (v * mult).round();
    // 2^64 as f64 is exact; anything at or above it does not fit.
    if x >= 18_446_744_073_709_551_616.0 {
        return Err(format!("too large for a {what} (at most 2^64 - 1)"));
    }
    Ok(x as u64)
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let m = match unit.as_str() {
                "B" => 1,
                "K" | "KB" | "KIB" => 1 << 10,
                "M" | "MB" | "MIB" => 1 << 20,
                "G" | "GB" | "GIB" => 1 << 30,
                "T" | "TB" | "TIB" => 1 << 40,
                _ => return Err(format!("unknown size unit {}", quoted(&unit))),
            };
            (&t[..i], m)
        }
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a number", quoted(num)))?;
    scaled(v, mult as f64, "size")
}

/// A scenario value as the user wrote it (for messages): strings quoted, tables and lists
/// abbreviated.
fn shown(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(_) => "a table".into(),
        serde_json::Value::Array(_) => "a list".into(),
        v => {
            let s = v.to_string();
            if s.len() > 60 {
                format!("{}...", &s[..s.floor_char_boundary(57)])
            } else {
                s
            }
        }
    }
}

/// The integer or string of a size, duration or limit field; anything else is an error
/// naming the value and `expected`.
enum Raw {
    Int(u64),
    Str(String),
}

fn raw<'de, D: Deserializer<'de>>(d: D, expected: &str) -> std::result::Result<Raw, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match v {
        serde_json::Value::Number(ref n) => match n.as_u64() {
            Some(x) => Ok(Raw::Int(x)),
            None => Err(serde::de::Error::custom(format!(
                "{}: {expected}",
                shown(&v)
            ))),
        },
        serde_json::Value::String(s) => Ok(Raw::Str(s)),
        v => Err(serde::de::Error::custom(format!(
            "{}: {expected}",
            shown(&v)
        ))),
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected = "expected bytes as a non-negative integer or a string with a binary suffix B, K, M, G or T (e.g. \"512M\")";
        match raw(d, expected)? {
            Raw::Int(v) => Ok(Size(v)),
            Raw::Str(s) => parse_size(&s).map(Size).map_err(|e| {
                serde::de::Error::custom(format!("invalid size {} ({e}): {expected}", quoted(&s)))
            }),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A memory.max/high value: bytes, or `"max"` for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Max,
    Bytes(u64),
}

impl Limit {
    pub fn pages(self) -> u64 {
        match self {
            Limit::Max => u64::MAX,
            Limit::Bytes(b) => b / PAGE_SIZE,
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected =
            "expected \"max\" or bytes (a non-negative integer or a string like \"512M\")";
        match raw(d, expected)? {
            Raw::Int(v) => Ok(Limit::Bytes(v)),
            Raw::Str(s) if s.trim() == "max" => Ok(Limit::Max),
            Raw::Str(s) => parse_size(&s).map(Limit::Bytes).map_err(|e| {
                serde::de::Error::custom(format!("invalid limit {} ({e}): {expected}", quoted(&s)))
            }),
        }
    }
}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Limit::Max => s.serialize_str("max"),
            Limit::Bytes(b) => s.serialize_u64(*b),
        }
    }
}

/// A duration in nanoseconds. Deserializes from an integer (ns) or `"<number><ns|us|ms|s>"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub u64);

impl Dur {
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
}

fn parse_dur(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let i = t
        .char_indices()
        .find(|(_, c)| c.is_ascii_alphabetic())
        .map(|(i, _)| i)
        .ok_or_else(|| "missing unit".to_string())?;
    let mult = match &t[i..] {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        u => return Err(format!("unknown time unit {}", quoted(u))),
    };
    let v: f64 = t[..i]
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a number", quoted(&t[..i])))?;
    scaled(v, mult, "duration")
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected = "expected nanoseconds as a non-negative integer or a string with a unit ns, us, ms, s or min (e.g. \"30s\")";
        match raw(d, expected)? {
            Raw::Int(v) => Ok(Dur(v)),
            Raw::Str(s) => parse_dur(&s).map(Dur).map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {} ({e}): {expected}",
                    quoted(&s)
                ))
            }),
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

// ---------------------------------------------------------------------------------------
// Schema
// ---------------------------------------------------------------------------------------

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

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Machine {
    /// NUMA nodes, 1..=8. CPUs and memory are split evenly; each node has one zone (Normal).
    #[serde(default = "one")]
    pub nodes: u32,
    /// CPUs in the machine (all nodes), 1..=4096. Node n owns CPUs [n*cpus/nodes, (n+1)*cpus/nodes).
    pub cpus: u32,
    /// Memory of each node [bytes].
    pub memory_per_node: Size,
    /// The swap device; absent means no swap.
    #[serde(default)]
    pub swap: Option<Swap>,
    /// A built-in hardware profile (`reclaimsim profiles`): published figures of a machine
    /// class for the cost table. Below `costs_profile` and `[costs]`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum SwapDevice {
    /// Synchronous (zram-like): a pageout completes inside shrink_folio_list.
    Zram,
    /// Asynchronous block device: the folio stays under writeback for `write_latency`.
    Ssd,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Swap {
    /// Swap space [bytes].
    pub size: Size,
    /// `zram` (synchronous) or `ssd` (asynchronous block device).
    #[serde(default = "default_swap_device")]
    pub device: SwapDevice,
    /// Time to read one page back [ns]; default from the cost table (`zram_read` or `ssd_read_latency`).
    #[serde(default)]
    pub read_latency: Option<Dur>,
    /// Time to write one page out [ns]; default from the cost table (`zram_write` or `ssd_write_latency`).
    #[serde(default)]
    pub write_latency: Option<Dur>,
}

fn default_swap_device() -> SwapDevice {
    SwapDevice::Ssd
}

/// Kernel knobs, named as in /proc/sys/vm.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Kernel {
    /// vm.swappiness, 0..=200.
    #[serde(default = "default_swappiness")]
    pub swappiness: u32,
    /// vm.min_free_kbytes; absent = the kernel's default, clamp(sqrt(16 * lowmem_kbytes), 128, 262144).
    #[serde(default)]
    pub min_free_kbytes: Option<u64>,
    /// vm.watermark_scale_factor, 1..=3000 (units of 0.01% of the zone).
    #[serde(default = "default_wsf")]
    pub watermark_scale_factor: u32,
    /// The memory_recursiveprot cgroup2 mount option.
    #[serde(default)]
    pub memory_recursiveprot: bool,
    /// When the periodic memcg statistics flush (flush_memcg_stats_dwork, every 2 s) first
    /// runs, 0..2s after the start; absent = drawn from the seed (the work was queued at
    /// boot, so its phase relative to a workload is arbitrary).
    #[serde(default)]
    pub memcg_flush_phase: Option<Dur>,
    /// The memory controller's cgroup version: 2 (the unified hierarchy) or 1. Version 1
    /// has memory.swappiness but no memory.high/low/min, and its limit reclaim skips the
    /// isolation throttle (writeback_throttling_sane).
    #[serde(default = "default_cgroup_version")]
    pub cgroup_version: u32,
    /// The LRU: "classic" (active and inactive lists) or "mglru" (the multi-gen LRU,
    /// lru_gen).
    #[serde(default)]
    pub lru: LruKind,
    /// The knobs of /sys/kernel/mm/lru_gen (with `lru = "mglru"`).
    #[serde(default)]
    pub lru_gen: LruGenKnobs,
}

/// Which LRU the kernel runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LruKind {
    #[default]
    Classic,
    Mglru,
}

impl LruKind {
    /// The value as a scenario spells it (`kernel.lru`).
    pub fn name(self) -> &'static str {
        match self {
            LruKind::Classic => "classic",
            LruKind::Mglru => "mglru",
        }
    }
}

/// /sys/kernel/mm/lru_gen/{enabled,min_ttl_ms}.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LruGenKnobs {
    /// The capability bitmask of `enabled`: 0x1 the core, 0x2 the page-table walk of
    /// aging, 0x4 clearing young bits in non-leaf PMD entries. Absent: 0x7 with
    /// `lru = "mglru"` (the default of a CONFIG_LRU_GEN_ENABLED x86 kernel).
    #[serde(default)]
    pub enabled: Option<u32>,
    /// `min_ttl_ms`: kswapd OOM-kills when no memcg's oldest generation is older than
    /// this (0: off).
    #[serde(default)]
    pub min_ttl_ms: u64,
}

impl Kernel {
    /// The lru_gen capability bits in effect (0 with the classic LRU).
    pub fn lru_gen_caps(&self) -> u32 {
        match self.lru {
            LruKind::Classic => 0,
            LruKind::Mglru => self.lru_gen.enabled.unwrap_or(0x7),
        }
    }
}

impl Default for Kernel {
    fn default() -> Self {
        Kernel {
            swappiness: default_swappiness(),
            min_free_kbytes: None,
            watermark_scale_factor: default_wsf(),
            memory_recursiveprot: false,
            memcg_flush_phase: None,
            cgroup_version: default_cgroup_version(),
            lru: LruKind::Classic,
            lru_gen: LruGenKnobs::default(),
        }
    }
}

fn default_cgroup_version() -> u32 {
    2
}

fn default_swappiness() -> u32 {
    60
}
fn default_wsf() -> u32 {
    10
}

/// One cgroup. `memory.max = "512M"` in TOML is the dotted key of the `memory` table.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSpec {
    /// Absolute path, e.g. `/workload/leaf`; its parent must be listed before it (or be `/`).
    pub path: String,
    #[serde(default)]
    pub memory: CgroupMemory,
    /// This many cgroups like this one, in order, `{i}` in the path standing for 0, 1, ...
    /// (e.g. 128 memcgs `/memcg{i}` under the root); expanded when the scenario is read.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub copies: u32,
}

fn is_one(n: &u32) -> bool {
    *n == 1
}

/// The most copies a `copies` key may ask for (the cgroup limit).
const MAX_COPIES: u32 = 4095;

#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupMemory {
    /// memory.max: hard limit; reclaim, then OOM, above it.
    #[serde(default)]
    pub max: Option<Limit>,
    /// memory.high: throttle and reclaim above it.
    #[serde(default)]
    pub high: Option<Limit>,
    /// memory.low: best-effort protection.
    #[serde(default)]
    pub low: Option<Size>,
    /// memory.min: hard protection.
    #[serde(default)]
    pub min: Option<Size>,
    /// memory.swappiness (cgroup v1 knob); absent = inherit vm.swappiness.
    #[serde(default)]
    pub swappiness: Option<u32>,
    /// memory.swap.* (cgroup v2): `memory.swap.max = "256M"` in TOML.
    #[serde(default)]
    pub swap: CgroupSwap,
}

/// A cgroup's swap knobs (cgroup v2).
#[derive(Debug, Clone, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CgroupSwap {
    /// memory.swap.max: the most swap the cgroup's subtree may use (bytes or "max").
    #[serde(default)]
    pub max: Option<Limit>,
}

/// A workload: a set of tasks placed in one cgroup, on CPUs.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum WorkloadSpec {
    Usemem(Usemem),
    FileRead(FileRead),
    RequestChurn(RequestChurn),
    Trace(Trace),
}

/// Marks the path inside a workload in an error message (see `from_json`): serde loses
/// the path below an internally tagged enum, so the workload reports it itself.
const INNER_PATH: char = '\u{1}';

/// The fields every workload takes ([`Placement`]'s), as a scenario spells them.
const SHARED_FIELDS: &[&str] = &["name", "cgroup", "cpus", "start", "copies"];

/// The fields of each workload type besides [`SHARED_FIELDS`], as a scenario spells them
/// (for the list an unknown field's error gives: serde lists none for a struct with a
/// flattened part). A field of the type missing here is refused as unknown, so a test
/// that uses it fails; `scenario_limits.rs` checks the lists against the serialized
/// fields.
const USEMEM_FIELDS: &[&str] = &[
    "processes",
    "threads",
    "size",
    "prealloc",
    "prefault",
    "fill",
    "random",
    "step",
    "repeat",
    "runtime",
    "unmap",
    "mapping",
    "rate",
    "rate_catch_up",
    "text",
];
const FILE_READ_FIELDS: &[&str] = &[
    "threads",
    "files",
    "pattern",
    "theta",
    "passes",
    "accesses",
    "hot_per_stream",
];
const REQUEST_CHURN_FIELDS: &[&str] = &["threads", "request_size", "service", "load", "requests"];
const TRACE_FIELDS: &[&str] = &["path", "format", "target", "requests", "csv"];

/// A workload table: `type` picks the variant, whose fields are then read with their
/// paths tracked (an error names e.g. `workload[0].size`, not `workload[0]`). The shared
/// fields ([`Placement`], flattened into each variant, where serde loses their path) are
/// read first, on their own, and an unknown field is refused listing the type's fields
/// and the shared ones.
impl<'de> Deserialize<'de> for WorkloadSpec {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        use serde::de::Error as _;
        let v = serde_json::Value::deserialize(d)?;
        let serde_json::Value::Object(mut map) = v else {
            return Err(D::Error::custom(format!(
                "{}: expected a workload table with a `type`",
                shown(&v)
            )));
        };
        let kinds = "`usemem`, `file_read`, `request_churn` or `trace`";
        let kind = match map.remove("type") {
            None => return Err(D::Error::custom(format!("missing field `type` ({kinds})"))),
            Some(serde_json::Value::String(k)) => k,
            Some(other) => {
                return Err(D::Error::custom(format!(
                    "type {}: expected {kinds}",
                    shown(&other)
                )))
            }
        };
        fn variant<T: serde::de::DeserializeOwned, E: serde::de::Error>(
            map: serde_json::Map<String, serde_json::Value>,
        ) -> std::result::Result<T, E> {
            serde_path_to_error::deserialize(serde_json::Value::Object(map)).map_err(|e| {
                let path = e.path().to_string();
                let msg = plain_words(&e.into_inner().to_string());
                if path == "." || path.is_empty() {
                    E::custom(msg)
                } else {
                    E::custom(format!("{INNER_PATH}{path}{INNER_PATH}{msg}"))
                }
            })
        }
        type Map = serde_json::Map<String, serde_json::Value>;
        type Make<E> = fn(Map) -> std::result::Result<WorkloadSpec, E>;
        let (own, make): (&[&str], Make<D::Error>) = match kind.as_str() {
            "usemem" => (USEMEM_FIELDS, |m| variant(m).map(WorkloadSpec::Usemem)),
            "file_read" => (FILE_READ_FIELDS, |m| variant(m).map(WorkloadSpec::FileRead)),
            "request_churn" => (REQUEST_CHURN_FIELDS, |m| {
                variant(m).map(WorkloadSpec::RequestChurn)
            }),
            "trace" => (TRACE_FIELDS, |m| variant(m).map(WorkloadSpec::Trace)),
            k => {
                return Err(D::Error::custom(format!(
                    "unknown type {}: expected {kinds}",
                    quoted(k)
                )))
            }
        };
        if let Some(k) = map
            .keys()
            .find(|k| !own.contains(&k.as_str()) && !SHARED_FIELDS.contains(&k.as_str()))
        {
            let allowed: Vec<String> = SHARED_FIELDS
                .iter()
                .chain(own)
                .map(|f| format!("`{f}`"))
                .collect();
            return Err(D::Error::custom(format!(
                "{INNER_PATH}{k}{INNER_PATH}unknown field `{k}` (type = {}), expected one of {}",
                quoted(&kind),
                allowed.join(", ")
            )));
        }
        let shared: Map = SHARED_FIELDS
            .iter()
            .filter_map(|f| map.remove(*f).map(|v| (f.to_string(), v)))
            .collect();
        let placement: Placement = variant(shared)?;
        let mut w = make(map)?;
        *w.common_mut() = placement;
        Ok(w)
    }
}

impl WorkloadSpec {
    pub fn common(&self) -> &Placement {
        match self {
            WorkloadSpec::Usemem(u) => &u.placement,
            WorkloadSpec::FileRead(f) => &f.placement,
            WorkloadSpec::RequestChurn(r) => &r.placement,
            WorkloadSpec::Trace(t) => &t.placement,
        }
    }
    fn common_mut(&mut self) -> &mut Placement {
        match self {
            WorkloadSpec::Usemem(u) => &mut u.placement,
            WorkloadSpec::FileRead(f) => &mut f.placement,
            WorkloadSpec::RequestChurn(r) => &mut r.placement,
            WorkloadSpec::Trace(t) => &mut t.placement,
        }
    }
    pub fn type_name(&self) -> &'static str {
        match self {
            WorkloadSpec::Usemem(_) => "usemem",
            WorkloadSpec::FileRead(_) => "file_read",
            WorkloadSpec::RequestChurn(_) => "request_churn",
            WorkloadSpec::Trace(_) => "trace",
        }
    }
    /// Tasks of the workload (usemem: processes * threads, computed without overflow).
    pub fn nr_tasks(&self) -> u64 {
        match self {
            WorkloadSpec::Usemem(u) => u.processes as u64 * u.threads as u64,
            WorkloadSpec::FileRead(f) => f.threads as u64,
            WorkloadSpec::RequestChurn(r) => r.threads as u64,
            WorkloadSpec::Trace(_) => 1,
        }
    }
}

/// Where and when a workload runs.
#[derive(Debug, Clone, Deserialize, Serialize)]
pub struct Placement {
    /// Name in reports; defaults to the type and index.
    #[serde(default)]
    pub name: String,
    /// Cgroup path; `/` (the root) by default.
    #[serde(default = "root_path")]
    pub cgroup: String,
    /// CPU list like "0-15,32"; default: the next CPUs not yet taken, in order.
    #[serde(default)]
    pub cpus: Option<String>,
    /// Virtual start time [ns], before the end of the run (`duration`).
    #[serde(default)]
    pub start: Dur,
    /// This many workloads like this one, in order, `{i}` in `name` and `cgroup` standing
    /// for 0, 1, ... (one per memcg of a `copies` cgroup); expanded when the scenario is read.
    #[serde(default = "one", skip_serializing_if = "is_one")]
    pub copies: u32,
}

/// `copies` is 1..=MAX_COPIES, and more than one copy needs `{i}` in a field that names it
/// (a path must differ from copy to copy).
fn check_copies(at: &str, copies: u32, fields: &[&str]) -> Result<()> {
    if !(1..=MAX_COPIES).contains(&copies) {
        return Err(Error::scenario(
            format!("{at}.copies"),
            format!("{copies}: allowed 1..={MAX_COPIES}"),
        ));
    }
    if copies > 1 && at.contains("cgroup[") && !fields.iter().any(|f| f.contains("{i}")) {
        return Err(Error::scenario(
            format!("{at}.path"),
            format!(
                "{:?} with copies = {copies}: put {{i}} in the path to number the copies",
                fields[0]
            ),
        ));
    }
    Ok(())
}

fn root_path() -> String {
    "/".into()
}

/// vm-scalability's usemem: each task maps `size` of anonymous memory and writes it.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Usemem {
    #[serde(flatten)]
    pub placement: Placement,
    /// Processes (`-n`); each has its own address space.
    #[serde(default = "one")]
    pub processes: u32,
    /// Threads per process (`-t`); the threads of a process split its area.
    #[serde(default = "one")]
    pub threads: u32,
    /// Bytes mapped per process, a multiple of 4096 (whole pages).
    pub size: Size,
    /// `--prealloc`: a parent process maps (and with `prefault` populates) the area, then
    /// forks the `processes` workers, which share its pages copy-on-write until each
    /// writes them (mm/fork.rs); an anonymous mapping only, without `unmap`.
    #[serde(default)]
    pub prealloc: bool,
    /// `--prefault`: populate the whole area before the timed passes (MAP_POPULATE: each
    /// page faulted in and its folio marked accessed, mm/gup.rs).
    #[serde(default)]
    pub prefault: bool,
    /// Write each page of a thread's span once, in address order, before the passes: a
    /// first sequential pass of ordinary write faults (not MAP_POPULATE: no folio is
    /// marked accessed), counted as accesses. Not with `prefault`.
    #[serde(default)]
    pub fill: bool,
    /// `--random`: each access writes a uniformly random page of the area; else sequential.
    #[serde(default)]
    pub random: bool,
    /// `--step` [bytes] for sequential passes, a multiple of the page size.
    #[serde(default = "page_step")]
    pub step: Size,
    /// Passes over the area (`--repeat`); 0 = until `runtime` or the end of the run.
    #[serde(default = "one_u64")]
    pub repeat: u64,
    /// `--runtime`: stop after this much virtual time [ns]; absent = no limit.
    #[serde(default)]
    pub runtime: Option<Dur>,
    /// munmap the area after each pass and map it afresh, as will-it-scale's
    /// page_fault1 does (mmap, write every page, munmap; one op per page fault).
    #[serde(default)]
    pub unmap: bool,
    /// `anon` (default) or `shared_file`: each process maps a file of `size` MAP_SHARED
    /// (will-it-scale page_fault3); after the first pass its pages stay in the page cache
    /// and a write fault only maps them.
    #[serde(default)]
    pub mapping: MappingKind,
    /// Pace each thread's accesses to at most this many bytes per second (a page per
    /// access), sleeping when ahead of the pace, as fio's `rate` does; absent = as fast as
    /// possible (at least 1: fio's `rate = 0`, no limit, is said by leaving it out).
    #[serde(default)]
    pub rate: Option<Size>,
    /// With `rate`: whether a thread that fell behind its pace (stalled in a fault or in
    /// reclaim) catches up by running unpaced until it is back on schedule, as fio's rate
    /// does (true, the default: an open loop), or resumes the pace from where it is (false:
    /// a closed loop, a server whose client waits for each answer; time lost to stalls is
    /// work not done).
    #[serde(default = "yes")]
    pub rate_catch_up: bool,
    /// The program's hot text [bytes, a multiple of 4096; default 0]: the executable pages
    /// its access loop runs from, one file mapped VM_EXEC by all its processes after their
    /// areas. Every access runs from all of them (setting their PTEs young); the first run
    /// of a page, and the first after reclaim took it, faults it in from the disk, charged
    /// to the faulting process's memcg. 0 = the text is cached and charged outside the
    /// workload's memcg, out of its reclaim's reach.
    #[serde(default = "no_text")]
    pub text: Size,
}

fn no_text() -> Size {
    Size(0)
}

fn page_step() -> Size {
    Size(PAGE_SIZE)
}
fn one_u64() -> u64 {
    1
}

/// What a usemem area maps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MappingKind {
    /// An anonymous private mapping.
    #[default]
    Anon,
    /// A file of the area's size mapped MAP_SHARED (page-cache folios on the file LRU).
    SharedFile,
    /// A shared anonymous mapping (MAP_SHARED of /dev/zero, as fio's mmap engine maps it):
    /// shmem folios, swap-backed, on the anon LRU, swapped through the swap cache; a
    /// swapped-out page comes back dirty and gives its swap slot up (shmem_swapin_folio).
    /// Every access writes, so in the model these folios behave exactly as anonymous ones
    /// (simplified: memory.stat counts them as anon, not shmem).
    Shmem,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FilePattern {
    /// Sequential passes over each file in turn.
    Seq,
    /// Uniformly random pages over all files.
    Uniform,
    /// Zipf-distributed pages over all files (rank 1 = page 0 of the first file).
    Zipf,
    /// A hot set (the first file) re-read uniformly while the second file streams once.
    Hotscan,
}

/// Buffered reads of page-cache files with readahead off (one page per access).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileRead {
    #[serde(flatten)]
    pub placement: Placement,
    /// Reader threads, all reading the same files.
    #[serde(default = "one")]
    pub threads: u32,
    /// File sizes [bytes, each a multiple of 4096]; the workload creates one file per entry.
    pub files: Vec<Size>,
    /// `seq`, `uniform`, `zipf` or `hotscan`.
    #[serde(default = "default_pattern")]
    pub pattern: FilePattern,
    /// Zipf exponent (pattern = zipf), > 0.
    #[serde(default = "default_theta")]
    pub theta: f64,
    /// Passes (pattern = seq); 0 = until the end of the run.
    #[serde(default = "one_u64")]
    pub passes: u64,
    /// Accesses per thread (uniform, zipf, hotscan); 0 = until the end of the run.
    #[serde(default)]
    pub accesses: u64,
    /// hotscan: hot-set accesses per streamed page.
    #[serde(default = "default_hot_ratio")]
    pub hot_per_stream: u32,
}

/// What a trace's ids address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceTarget {
    /// Pages of one page-cache file, read with readahead off.
    File,
    /// Pages of one anonymous area, written.
    Anon,
}

fn yes() -> bool {
    true
}

/// Replay of a page-access trace through the full model by one task: each request's
/// object maps to consecutive pages (objects larger than a page span several), ids are
/// given dense page indices in order of first appearance, requests run back to back.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Trace {
    #[serde(flatten)]
    pub placement: Placement,
    /// The trace file. The Python front resolves a relative path against the scenario
    /// file's directory; the core takes it as given (relative to the working directory).
    pub path: String,
    /// `auto`, `text`, `csv`, `oracle_general`, `oracle_general_zst` or `damon`.
    #[serde(default = "default_trace_format")]
    pub format: TraceFormat,
    /// `file` (page cache) or `anon`.
    #[serde(default = "default_trace_target")]
    pub target: TraceTarget,
    /// Requests to replay; 0 = the whole trace.
    #[serde(default)]
    pub requests: u64,
    /// Column mapping for `csv` (default: a header with `obj_id`, optional `obj_size`,
    /// `op`, `time`).
    #[serde(default)]
    pub csv: Option<CsvColumns>,
}

fn default_trace_format() -> TraceFormat {
    TraceFormat::Auto
}
fn default_trace_target() -> TraceTarget {
    TraceTarget::File
}

/// Short-lived requests served by a pipeline of worker threads of one process, as a busy
/// server serves them: when a request arrives, worker i first frees (munmap) the buffers
/// worker i-1 handed it, then maps a buffer, writes it (page faults put its folios in CPU
/// i's lru_add batch), spends `service` of CPU time, and hands the buffer to worker i+1. Requests arrive as a
/// Poisson process whose rate keeps each worker busy `load` of the time.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RequestChurn {
    #[serde(flatten)]
    pub placement: Placement,
    /// Worker threads (at least 2), each on its own CPU.
    #[serde(default = "two")]
    pub threads: u32,
    /// Anonymous memory each request maps and writes [bytes, a multiple of 4096].
    #[serde(default = "default_request_size")]
    pub request_size: Size,
    /// CPU time of a request besides its memory work [ns].
    #[serde(default = "default_service")]
    pub service: Dur,
    /// Busy fraction of each worker, in (0, 1].
    #[serde(default = "default_load")]
    pub load: f64,
    /// Requests per worker; 0 = until the end of the run.
    #[serde(default)]
    pub requests: u64,
}

fn two() -> u32 {
    2
}
fn default_request_size() -> Size {
    Size(64 << 10)
}
fn default_service() -> Dur {
    Dur(20_000)
}
fn default_load() -> f64 {
    0.95
}

fn default_pattern() -> FilePattern {
    FilePattern::Seq
}
fn default_theta() -> f64 {
    0.99
}
fn default_hot_ratio() -> u32 {
    1
}

// ---------------------------------------------------------------------------------------
// Limits: what the model can represent (docs/scenarios.md, "Limits")
// ---------------------------------------------------------------------------------------

/// Frames of the whole machine (all nodes): a PTE holds a 29-bit page frame number
/// (`mm_types::pte::PFN_MASK`), so at most 2^29 pages = 2 TiB.
pub const MAX_FRAMES: u64 = crate::mm::mm_types::pte::PFN_MASK as u64 + 1;
/// Swap slots: a swap PTE holds a 30-bit slot (`mm_types::pte::SLOT_MASK`): 4 TiB.
pub const MAX_SWAP_SLOTS: u64 = crate::mm::mm_types::pte::SLOT_MASK as u64 + 1;
/// Pages of one address space or one file: page indices are 32-bit (16 TiB - 4 KiB).
pub const MAX_AREA_PAGES: u64 = u32::MAX as u64;
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

// ---------------------------------------------------------------------------------------
// Parsing and validation
// ---------------------------------------------------------------------------------------

/// Parse a CPU list like "0-3,8,10-11" of a machine with `ncpus` CPUs: every CPU must
/// exist and appear once (ranges are checked before they are expanded).
pub fn parse_cpu_list(s: &str, ncpus: u32) -> std::result::Result<Vec<u32>, String> {
    let mut out = Vec::new();
    let mut seen = vec![false; ncpus as usize];
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let bad = || {
            format!(
                "{} is not a CPU number or range (like \"0-3,8\")",
                quoted(part)
            )
        };
        let a: u32 = a.parse().map_err(|_| bad())?;
        let b: u32 = b.parse().map_err(|_| bad())?;
        if b < a {
            return Err(format!("range {} is reversed", quoted(part)));
        }
        if b >= ncpus {
            return Err(format!(
                "CPU {b} does not exist: allowed 0..={}",
                ncpus.saturating_sub(1)
            ));
        }
        for c in a..=b {
            if std::mem::replace(&mut seen[c as usize], true) {
                return Err(format!(
                    "CPU {c} is listed twice: each task needs its own CPU"
                ));
            }
            out.push(c);
        }
    }
    if out.is_empty() {
        return Err("the CPU list is empty".into());
    }
    Ok(out)
}

/// A serde message in the scenario's words: no Rust type names.
pub(crate) fn plain_words(msg: &str) -> String {
    let mut m = msg.to_string();
    for (from, to) in [
        ("floating point `", "number `"),
        ("invalid type: map,", "invalid type: table,"),
        ("invalid type: sequence,", "invalid type: list,"),
        ("expected u8", "expected an integer in 0..=255"),
        ("expected u16", "expected an integer in 0..=65535"),
        ("expected u32", "expected an integer in 0..=4294967295"),
        (
            "expected u64",
            "expected an integer in 0..=18446744073709551615",
        ),
        (
            "expected usize",
            "expected an integer in 0..=18446744073709551615",
        ),
        ("expected i64", "expected an integer"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a table"),
        ("expected variant identifier", "expected a name (a string)"),
        (
            "expected internally tagged enum WorkloadSpec",
            "expected a workload table with a `type`",
        ),
        (
            "data did not match any variant of untagged enum CsvColumn",
            "expected a column name (a string) or a 1-based column number",
        ),
    ] {
        m = m.replace(from, to);
    }
    // "expected struct Machine" -> "expected a table"
    while let Some(i) = m.find("expected struct ") {
        let rest = &m[i + "expected struct ".len()..];
        let n = rest
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        m = format!("{}expected a table{}", &m[..i], &rest[n..]);
    }
    m
}

/// A TOML value as JSON; a date or time (no scenario field takes one) is an error at
/// its path.
fn toml_to_json(v: toml::Value, path: &mut String) -> Result<serde_json::Value> {
    use serde_json::Value as J;
    Ok(match v {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => J::Number(n),
            None => {
                return Err(Error::scenario(
                    path.clone(),
                    format!("{f}: expected a finite number"),
                ))
            }
        },
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(d) => {
            return Err(Error::scenario(
                path.clone(),
                format!("{d} is a TOML date/time, which no scenario field takes: write a number, or a quoted string like \"30s\" or \"512M\""),
            ))
        }
        toml::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, x) in a.into_iter().enumerate() {
                let n = path.len();
                path.push_str(&format!("[{i}]"));
                out.push(toml_to_json(x, path)?);
                path.truncate(n);
            }
            J::Array(out)
        }
        toml::Value::Table(t) => {
            let mut out = serde_json::Map::new();
            for (k, x) in t {
                let n = path.len();
                path.push('.');
                path.push_str(&k);
                let x = toml_to_json(x, path)?;
                path.truncate(n);
                out.insert(k, x);
            }
            J::Object(out)
        }
    })
}

/// Every string of a scenario, keys included, is printable text: a control character
/// (C0, DEL or C1: an escape sequence, a line break, NUL; or a line or paragraph
/// separator) in a name or a path would reach a terminal, a cgroup file name or a log
/// raw. The first one found is an error at its path, the string shown escaped.
fn check_printable(v: &serde_json::Value, path: &mut String) -> Result<()> {
    let bad = |s: &str| {
        s.chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
    };
    let refuse = |path: &str, s: &str| {
        Error::scenario(
            path.to_string(),
            format!(
                "{}: control characters (escapes, line breaks, NUL) are not allowed; names, paths and values are printable text",
                quoted(s)
            ),
        )
    };
    match v {
        serde_json::Value::String(s) if bad(s) => Err(refuse(path, s)),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let n = path.len();
                path.push_str(&format!("[{i}]"));
                check_printable(x, path)?;
                path.truncate(n);
            }
            Ok(())
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if bad(k) {
                    return Err(refuse(path, k));
                }
                let n = path.len();
                path.push('.');
                path.push_str(k);
                check_printable(x, path)?;
                path.truncate(n);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A cgroup path's components are names the kernel can make under the run's own tree:
/// none empty, none `.` or `..` (which would name a cgroup beside or above the tree).
fn check_cgroup_components(p: &str, at: &str) -> Result<()> {
    for c in p.split('/').skip(1) {
        if c.is_empty() || c == "." || c == ".." {
            return Err(Error::scenario(
                at.to_string(),
                format!(
                    "{}: the component {} is not a cgroup name; each component between slashes is a name, not empty, \".\" or \"..\"",
                    quoted(p),
                    quoted(c)
                ),
            ));
        }
    }
    Ok(())
}

/// 1-based line and column of byte `at` in `text`.
fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

impl Scenario {
    /// Deserialize from JSON text, naming the failing field's path.
    pub fn from_json(text: &str) -> Result<Scenario> {
        // Text that is no JSON value is left to the deserializer's message.
        if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
            check_printable(&v, &mut "scenario".to_string())?;
        }
        let de = &mut serde_json::Deserializer::from_str(text);
        let s: Scenario = serde_path_to_error::deserialize(de).map_err(|e| {
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
            Error::scenario(path, msg)
        })?;
        let mut s = s;
        s.expand_copies()?;
        s.validate()?;
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
            check_copies(&format!("scenario.cgroup[{k}]"), c.copies, &[&c.path])?;
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
            check_copies(
                &format!("scenario.workload[{k}]"),
                p.copies,
                &[&p.cgroup, &p.name],
            )?;
            for i in 0..p.copies {
                let mut e = w.clone();
                let q = e.common_mut();
                q.cgroup = q.cgroup.replace("{i}", &i.to_string());
                q.name = q.name.replace("{i}", &i.to_string());
                q.copies = 1;
                workloads.push(e);
            }
        }
        self.workloads = workloads;
        Ok(())
    }

    /// kernel.lru and the lru_gen knobs agree: `enabled` is a 3-bit mask whose bit 0 is the
    /// multi-gen LRU itself.
    fn check_lru_gen(&self) -> Result<()> {
        let k = &self.kernel;
        if let Some(e) = k.lru_gen.enabled {
            if e > 0x7 {
                return Err(Error::scenario(
                    "scenario.kernel.lru_gen.enabled",
                    format!("{e:#x}: allowed 0x0..=0x7 (0x1 core, 0x2 page-table walk, 0x4 non-leaf PMD young bits)"),
                ));
            }
            let on = e & 1 != 0;
            if on != (k.lru == LruKind::Mglru) {
                return Err(Error::scenario(
                    "scenario.kernel.lru_gen.enabled",
                    format!(
                        "{e:#x} {} the multi-gen LRU but kernel.lru = {:?}: set bit 0x1 exactly when kernel.lru = \"mglru\"",
                        if on { "turns on" } else { "leaves off" },
                        k.lru.name()
                    ),
                ));
            }
        }
        if k.lru == LruKind::Classic && k.lru_gen.min_ttl_ms != 0 {
            return Err(Error::scenario(
                "scenario.kernel.lru_gen.min_ttl_ms",
                "only with kernel.lru = \"mglru\"",
            ));
        }
        if k.lru_gen.min_ttl_ms > 1 << 40 {
            return Err(Error::scenario(
                "scenario.kernel.lru_gen.min_ttl_ms",
                format!("{}: allowed 0..=2^40", k.lru_gen.min_ttl_ms),
            ));
        }
        Ok(())
    }

    /// Knobs that exist in only one cgroup version.
    fn check_cgroup_version(&self, i: usize, m: &CgroupMemory) -> Result<()> {
        let v1 = self.kernel.cgroup_version == 1;
        let only_v2 = [
            ("high", m.high.is_some()),
            ("low", m.low.is_some()),
            ("min", m.min.is_some()),
            ("swap.max", m.swap.max.is_some()),
        ];
        for (knob, set) in only_v2 {
            if v1 && set {
                return Err(Error::scenario(
                    format!("scenario.cgroup[{i}].memory.{knob}"),
                    "cgroup v1 has no such knob (kernel.cgroup_version = 1); allowed: memory.max, memory.swappiness",
                ));
            }
        }
        if !v1 && m.swappiness.is_some() {
            return Err(Error::scenario(
                format!("scenario.cgroup[{i}].memory.swappiness"),
                "a cgroup v1 knob: cgroup v2 has no per-cgroup swappiness (set kernel.cgroup_version = 1, or use kernel.swappiness)",
            ));
        }
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

    /// The CPUs of every workload's tasks, in task order: its `cpus` list (the first
    /// nr_tasks of them), else the lowest CPUs no other workload takes. Errors name the
    /// field; the run places tasks with this very function.
    pub fn placements(&self) -> Result<Vec<Vec<u32>>> {
        let ncpu = self.machine.cpus;
        let mut taken = vec![false; ncpu as usize];
        let mut out: Vec<Option<Vec<u32>>> = Vec::with_capacity(self.workloads.len());
        for (i, w) in self.workloads.iter().enumerate() {
            let at = format!("scenario.workload[{i}].cpus");
            let n = w.nr_tasks();
            match &w.common().cpus {
                Some(cl) => {
                    let cpus = parse_cpu_list(cl, ncpu)
                        .map_err(|e| Error::scenario(&at, format!("{}: {e}", quoted(cl))))?;
                    if (cpus.len() as u64) < n {
                        return Err(Error::scenario(
                            at,
                            format!("{} lists {} CPUs for {n} tasks: each task needs its own CPU (time sharing is not modeled)", quoted(cl), cpus.len()),
                        ));
                    }
                    let mine: Vec<u32> = cpus.into_iter().take(n as usize).collect();
                    for &c in &mine {
                        if std::mem::replace(&mut taken[c as usize], true) {
                            return Err(Error::scenario(
                                at,
                                format!("CPU {c} is already taken by another workload's task"),
                            ));
                        }
                    }
                    out.push(Some(mine));
                }
                None => out.push(None),
            }
        }
        let free = taken.iter().filter(|t| !**t).count() as u64;
        let wanted: u64 = self
            .workloads
            .iter()
            .filter(|w| w.common().cpus.is_none())
            .map(|w| w.nr_tasks())
            .sum();
        if wanted > free {
            return Err(Error::scenario(
                "scenario.machine.cpus",
                format!("{ncpu} CPUs leave {free} free for {wanted} unplaced tasks: each task needs its own CPU"),
            )
            .with_hint("raise machine.cpus or lower the workloads' processes/threads"));
        }
        let mut next = 0usize;
        Ok(out
            .into_iter()
            .zip(&self.workloads)
            .map(|(o, w)| {
                o.unwrap_or_else(|| {
                    let mut v = Vec::with_capacity(w.nr_tasks() as usize);
                    while (v.len() as u64) < w.nr_tasks() {
                        if !std::mem::replace(&mut taken[next], true) {
                            v.push(next as u32);
                        }
                        next += 1;
                    }
                    v
                })
            })
            .collect())
    }

    /// Semantic checks that the types cannot express. Every limit is checked before any
    /// work proportional to the value (a million cgroups or a CPU range of billions is
    /// refused at once), and the checks are linear in the scenario's size.
    pub fn validate(&self) -> Result<()> {
        let m = &self.machine;
        let max_nodes = crate::mm::page_alloc::MAX_NUMNODES as u32;
        if !(1..=max_nodes).contains(&m.nodes) {
            return Err(Error::scenario(
                "scenario.machine.nodes",
                format!("{} nodes: allowed 1..={max_nodes}", m.nodes),
            ));
        }
        if m.cpus < m.nodes || m.cpus > MAX_CPUS {
            return Err(Error::scenario(
                "scenario.machine.cpus",
                format!(
                    "{} CPUs: allowed nodes..={MAX_CPUS} (at least one CPU per node)",
                    m.cpus
                ),
            ));
        }
        let node_pages = m.memory_per_node.pages();
        let max_node = MAX_FRAMES / m.nodes as u64;
        if !(4096..=max_node).contains(&node_pages) {
            return Err(Error::scenario(
                "scenario.machine.memory_per_node",
                format!(
                    "{} bytes: allowed 16M..={}G per node with {} node(s): the machine holds at most 2T (a PTE holds a 29-bit page frame number)",
                    m.memory_per_node.0,
                    (max_node * PAGE_SIZE) >> 30,
                    m.nodes
                ),
            ));
        }
        if let Some(sw) = &m.swap {
            if sw.size.pages() > MAX_SWAP_SLOTS {
                return Err(Error::scenario(
                    "scenario.machine.swap.size",
                    format!(
                        "{} bytes: allowed up to 4T (a swap PTE holds a 30-bit slot)",
                        sw.size.0
                    ),
                ));
            }
            for (f, l) in [
                ("read_latency", sw.read_latency),
                ("write_latency", sw.write_latency),
            ] {
                if let Some(d) = l {
                    if d.0 > MAX_COST {
                        return Err(Error::scenario(
                            format!("scenario.machine.swap.{f}"),
                            format!("{} ns: allowed 0..={MAX_COST} (about 4.3 s)", d.0),
                        ));
                    }
                }
            }
        }
        if !(1..=MAX_DURATION).contains(&self.duration.0) {
            return Err(Error::scenario(
                "scenario.duration",
                format!(
                    "{} ns: allowed 1ns..={MAX_DURATION} ns (about 146 years)",
                    self.duration.0
                ),
            ));
        }
        if self.warmup.0 >= self.duration.0 {
            return Err(Error::scenario(
                "scenario.warmup",
                format!(
                    "{} ns: must be less than duration ({} ns)",
                    self.warmup.0, self.duration.0
                ),
            ));
        }
        if !(1..=MAX_DURATION).contains(&self.sample_interval.0) {
            return Err(Error::scenario(
                "scenario.sample_interval",
                format!(
                    "{} ns: allowed 1ns..={MAX_DURATION} ns",
                    self.sample_interval.0
                ),
            ));
        }
        if self.kernel.swappiness > 200 {
            return Err(Error::scenario(
                "scenario.kernel.swappiness",
                format!("{}: allowed 0..=200", self.kernel.swappiness),
            ));
        }
        if let Some(p) = self.kernel.memcg_flush_phase {
            if p.0 >= crate::mm::memcontrol::FLUSH_TIME {
                return Err(Error::scenario(
                    "scenario.kernel.memcg_flush_phase",
                    format!(
                        "{} ns: allowed 0s..2s (below FLUSH_TIME), or absent for a seeded phase",
                        p.0
                    ),
                ));
            }
        }
        self.check_lru_gen()?;
        if !(1..=2).contains(&self.kernel.cgroup_version) {
            return Err(Error::scenario(
                "scenario.kernel.cgroup_version",
                format!("{}: allowed 1 or 2", self.kernel.cgroup_version),
            ));
        }
        if !(1..=3000).contains(&self.kernel.watermark_scale_factor) {
            return Err(Error::scenario(
                "scenario.kernel.watermark_scale_factor",
                format!("{}: allowed 1..=3000", self.kernel.watermark_scale_factor),
            ));
        }
        if let Some(k) = self.kernel.min_free_kbytes {
            if !(128..=1_048_576).contains(&k) {
                return Err(Error::scenario(
                    "scenario.kernel.min_free_kbytes",
                    format!("{k}: allowed 128..=1048576"),
                ));
            }
        }
        let names = crate::engine::cost::CostTable::names();
        for (k, v) in &self.costs {
            if !names.contains(&k.as_str()) {
                return Err(Error::scenario(
                    format!("scenario.costs.{k}"),
                    format!("unknown cost name; allowed: {}", names.join(", ")),
                ));
            }
            if *v > MAX_COST {
                return Err(Error::scenario(
                    format!("scenario.costs.{k}"),
                    format!("{v} ns: allowed 0..={MAX_COST} (about 4.3 s)"),
                ));
            }
        }
        // The profiles exist, parse and name only known costs.
        crate::engine::cost_profile::resolve(self)?;
        if self.cgroups.len() > MAX_CGROUPS {
            return Err(Error::scenario(
                "scenario.cgroup",
                format!(
                    "{} cgroups: allowed at most {MAX_CGROUPS} below the root",
                    self.cgroups.len()
                ),
            ));
        }
        let mut paths: std::collections::HashSet<&str> =
            std::collections::HashSet::with_capacity(self.cgroups.len() + 1);
        paths.insert("/");
        for (i, c) in self.cgroups.iter().enumerate() {
            let p = c.path.as_str();
            let at = format!("scenario.cgroup[{i}].path");
            if !p.starts_with('/') || p == "/" || p.ends_with('/') || p.contains("//") {
                return Err(Error::scenario(
                    at,
                    format!(
                        "{}: expected an absolute path below the root, like \"/a/b\"",
                        shown(&serde_json::Value::String(p.into()))
                    ),
                ));
            }
            check_cgroup_components(p, &at)?;
            let parent = parent_path(p);
            if !paths.contains(parent) {
                return Err(Error::scenario(
                    at,
                    format!(
                        "the parent {} of {} is not listed before it",
                        quoted(parent),
                        quoted(p)
                    ),
                ));
            }
            if !paths.insert(p) {
                return Err(Error::scenario(
                    at,
                    format!("{} is listed twice", quoted(p)),
                ));
            }
            self.check_cgroup_version(i, &c.memory)?;
            if let Some(s) = c.memory.swappiness {
                if s > 200 {
                    return Err(Error::scenario(
                        format!("scenario.cgroup[{i}].memory.swappiness"),
                        format!("{s}: allowed 0..=200"),
                    ));
                }
            }
        }
        if self.workloads.is_empty() {
            return Err(Error::scenario(
                "scenario.workload",
                "at least one [[workload]] is required",
            ));
        }
        if self.workloads.len() > m.cpus as usize {
            return Err(Error::scenario(
                "scenario.workload",
                format!(
                    "{} workloads on {} CPUs: each workload's tasks need CPUs of their own",
                    self.workloads.len(),
                    m.cpus
                ),
            ));
        }
        for (i, w) in self.workloads.iter().enumerate() {
            let at = |f: &str| format!("scenario.workload[{i}].{f}");
            let pl = w.common();
            if !paths.contains(pl.cgroup.as_str()) {
                let mut all: Vec<&str> = paths.iter().copied().collect();
                all.sort_unstable();
                let listed = if all.len() > 20 {
                    format!("{} and {} more", all[..20].join(", "), all.len() - 20)
                } else {
                    all.join(", ")
                };
                return Err(Error::scenario(
                    at("cgroup"),
                    format!(
                        "{} is not a cgroup of the scenario; allowed: {listed}",
                        quoted(&pl.cgroup)
                    ),
                ));
            }
            if pl.start.0 >= self.duration.0 {
                return Err(Error::scenario(
                    at("start"),
                    format!(
                        "{} ns: the workload must start before the end of the run ({} ns)",
                        pl.start.0, self.duration.0
                    ),
                ));
            }
            let n = w.nr_tasks();
            if n == 0 || n > MAX_CPUS as u64 {
                let (field, what) = match w {
                    WorkloadSpec::Usemem(u) => (
                        "processes",
                        format!(
                            "processes * threads = {} * {} = {n} tasks",
                            u.processes, u.threads
                        ),
                    ),
                    _ => ("threads", format!("{n} tasks")),
                };
                return Err(Error::scenario(
                    at(field),
                    format!("{what}: allowed 1..={MAX_CPUS} (each task needs its own CPU)"),
                ));
            }
            match w {
                WorkloadSpec::Usemem(u) => {
                    let pages = u.size.pages();
                    if !(1..=MAX_AREA_PAGES).contains(&pages) || u.size.0 % PAGE_SIZE != 0 {
                        return Err(Error::scenario(
                            at("size"),
                            format!("{} bytes: allowed a multiple of 4096 in 4K..=16T - 4K per process (page indices are 32-bit)", u.size.0),
                        ));
                    }
                    if pages < u.threads as u64 {
                        return Err(Error::scenario(
                            at("threads"),
                            format!(
                                "{} threads for {pages} pages: each thread needs at least one page",
                                u.threads
                            ),
                        ));
                    }
                    if u.step.0 == 0 || u.step.0 % PAGE_SIZE != 0 || u.step.0 > u.size.0 {
                        return Err(Error::scenario(
                            at("step"),
                            format!(
                                "{}: allowed a multiple of 4096 in 4096..=size ({})",
                                u.step.0, u.size.0
                            ),
                        ));
                    }
                    if u.text.0 % PAGE_SIZE != 0 || pages + u.text.pages() > MAX_AREA_PAGES {
                        return Err(Error::scenario(
                            at("text"),
                            format!(
                                "{} bytes: allowed a multiple of 4096, at most 16T - 4K with the area ({} bytes)",
                                u.text.0, u.size.0
                            ),
                        ));
                    }
                    if let Some(r) = u.runtime {
                        if r.0 > MAX_DURATION {
                            return Err(Error::scenario(
                                at("runtime"),
                                format!("{} ns: allowed up to {MAX_DURATION} ns", r.0),
                            ));
                        }
                    }
                    if u.prealloc && (u.mapping != MappingKind::Anon || u.unmap) {
                        return Err(Error::scenario(
                            at("prealloc"),
                            "true: the parent's area is shared copy-on-write with its forked workers, which needs mapping = \"anon\" and unmap = false",
                        ));
                    }
                    if u.fill && u.prefault {
                        return Err(Error::scenario(
                            at("fill"),
                            "true: the area is populated by `prefault` already; allowed: one of fill and prefault",
                        ));
                    }
                    if u.rate == Some(Size(0)) {
                        return Err(Error::scenario(
                            at("rate"),
                            "0 bytes per second: allowed 1 or more; to run without a limit (fio's rate = 0), leave `rate` out",
                        ));
                    }
                    if !u.rate_catch_up && u.rate.is_none() {
                        return Err(Error::scenario(
                            at("rate_catch_up"),
                            "false: needs a `rate` (an unpaced thread has no schedule to keep)",
                        ));
                    }
                }
                WorkloadSpec::Trace(t) => {
                    if let Some(c) = &t.csv {
                        if c.delimiter.len() != 1 {
                            return Err(Error::scenario(
                                at("csv.delimiter"),
                                format!("{}: one ASCII character", quoted(&c.delimiter)),
                            ));
                        }
                        for (name, col) in [
                            ("obj_id", Some(&c.obj_id)),
                            ("obj_size", c.obj_size.as_ref()),
                            ("op", c.op.as_ref()),
                            ("time", c.time.as_ref()),
                        ] {
                            match col {
                                Some(CsvColumn::Number(0)) => {
                                    return Err(Error::scenario(
                                        at(&format!("csv.{name}")),
                                        "0: column numbers start at 1",
                                    ));
                                }
                                Some(CsvColumn::Name(_)) if !c.header => {
                                    return Err(Error::scenario(at(&format!("csv.{name}")), "a column name needs header = true; give its 1-based number instead"));
                                }
                                _ => {}
                            }
                        }
                    }
                    if !std::path::Path::new(&t.path).is_file() {
                        return Err(Error::scenario(
                            at("path"),
                            format!("{}: no such file", quoted(&t.path)),
                        ));
                    }
                    // The trace opens and has a first request (an empty trace, a CSV
                    // with only a header or an empty DAMON list is refused here).
                    crate::trace::probe(&t.path, t.format, t.csv.as_ref(), self.seed)?;
                }
                WorkloadSpec::RequestChurn(r) => {
                    if r.threads < 2 {
                        return Err(Error::scenario(
                            at("threads"),
                            format!("{}: a pipeline needs at least 2 workers", r.threads),
                        ));
                    }
                    let req = r.request_size.pages();
                    if req == 0 || req > 65536 || r.request_size.0 % PAGE_SIZE != 0 {
                        return Err(Error::scenario(
                            at("request_size"),
                            format!(
                                "{} bytes: allowed a multiple of 4096 in 4K..=256M",
                                r.request_size.0
                            ),
                        ));
                    }
                    // Each worker's buffers are a ring of REQUEST_RING requests in the
                    // process's one address space.
                    let area = req * crate::workload::REQUEST_RING * r.threads as u64;
                    if area > MAX_AREA_PAGES {
                        return Err(Error::scenario(
                            at("request_size"),
                            format!(
                                "{} bytes * {} buffers * {} workers = {area} pages: the process's area holds at most {MAX_AREA_PAGES} pages (page indices are 32-bit)",
                                r.request_size.0,
                                crate::workload::REQUEST_RING,
                                r.threads
                            ),
                        ));
                    }
                    if !(r.load > 0.0 && r.load <= 1.0) {
                        return Err(Error::scenario(
                            at("load"),
                            format!("{}: allowed (0, 1]", r.load),
                        ));
                    }
                    if r.service.0 > MAX_DURATION {
                        return Err(Error::scenario(
                            at("service"),
                            format!("{} ns: allowed up to {MAX_DURATION} ns", r.service.0),
                        ));
                    }
                }
                WorkloadSpec::FileRead(f) => {
                    if f.files.is_empty() {
                        return Err(Error::scenario(
                            at("files"),
                            "an empty list: one or more file sizes of at least one page",
                        ));
                    }
                    for (j, sz) in f.files.iter().enumerate() {
                        if !(1..=MAX_AREA_PAGES).contains(&sz.pages()) || sz.0 % PAGE_SIZE != 0 {
                            return Err(Error::scenario(
                                at(&format!("files[{j}]")),
                                format!("{} bytes: allowed a multiple of 4096 in 4K..=16T - 4K per file (page indices are 32-bit)", sz.0),
                            ));
                        }
                    }
                    if f.pattern == FilePattern::Hotscan && f.files.len() != 2 {
                        return Err(Error::scenario(
                            at("files"),
                            format!("{} files: pattern \"hotscan\" needs exactly two: [hot set, streamed file]", f.files.len()),
                        ));
                    }
                    if f.pattern == FilePattern::Zipf && !(f.theta > 0.0 && f.theta.is_finite()) {
                        return Err(Error::scenario(
                            at("theta"),
                            format!("{}: allowed a finite number > 0", f.theta),
                        ));
                    }
                }
            }
        }
        // CPU placement must fit, also for the default (next free CPUs) placement.
        self.placements()?;
        let mut sorted: Vec<&str> = paths.iter().copied().collect();
        sorted.sort_unstable();
        self.validate_reclaim(&sorted)?;
        self.validate_lru_gen(&sorted)?;
        Ok(())
    }
}

/// The parent of a cgroup path ("/a/b" -> "/a", "/a" -> "/").
pub fn parent_path(p: &str) -> &str {
    match p.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &p[..i],
    }
}

// ---------------------------------------------------------------------------------------
// Proactive reclaim schedules
// ---------------------------------------------------------------------------------------

/// The `swappiness=` argument of a memory.reclaim write: 0..=200, or `"max"` (anon only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReclaimSwappiness {
    Value(u32),
    Max,
}

impl<'de> Deserialize<'de> for ReclaimSwappiness {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Int(i64),
            Str(String),
        }
        let expected = "expected an integer 0..=200 or \"max\"";
        match Raw::deserialize(d)
            .map_err(|_| serde::de::Error::custom(format!("invalid swappiness: {expected}")))?
        {
            Raw::Int(v) if (0..=200).contains(&v) => Ok(ReclaimSwappiness::Value(v as u32)),
            Raw::Str(s) if s.trim() == "max" => Ok(ReclaimSwappiness::Max),
            Raw::Int(v) => Err(serde::de::Error::custom(format!(
                "invalid swappiness {v}: {expected}"
            ))),
            Raw::Str(s) => Err(serde::de::Error::custom(format!(
                "invalid swappiness {s:?}: {expected}"
            ))),
        }
    }
}

impl Serialize for ReclaimSwappiness {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            ReclaimSwappiness::Value(v) => s.serialize_u32(*v),
            ReclaimSwappiness::Max => s.serialize_str("max"),
        }
    }
}

/// A `[[reclaim]]` entry: a user task that writes `bytes` (and `swappiness=`, if given) to
/// the cgroup's memory.reclaim `times` times, the k-th write due at `at + k * every`. A
/// write that is still running when the next is due delays it: the next starts as soon as
/// it returns (back to back), and every write is made. Each entry's task runs on a CPU of
/// its own: the lowest CPUs no workload task uses, in entry order.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ReclaimSchedule {
    /// The cgroup whose memory.reclaim is written ("/" = the root: the whole machine).
    #[serde(default = "root_path")]
    pub cgroup: String,
    /// When the first write is due [ns].
    pub at: Dur,
    /// Period between due times [ns]; needed when `times` > 1.
    #[serde(default)]
    pub every: Option<Dur>,
    /// How many writes.
    #[serde(default = "one_u64")]
    pub times: u64,
    /// Bytes written to memory.reclaim (at least one page).
    pub bytes: Size,
    /// The write's `swappiness=` argument; absent = the memcg's swappiness.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swappiness: Option<ReclaimSwappiness>,
}

impl ReclaimSchedule {
    /// The text written to memory.reclaim.
    pub fn buffer(&self) -> String {
        match self.swappiness {
            None => format!("{}", self.bytes.0),
            Some(ReclaimSwappiness::Value(v)) => format!("{} swappiness={v}", self.bytes.0),
            Some(ReclaimSwappiness::Max) => format!("{} swappiness=max", self.bytes.0),
        }
    }

    /// When the k-th write (from 0) is due, if that time exists.
    pub fn due(&self, k: u64) -> Option<u64> {
        due_at(self.at, self.every, k)
    }
}

/// When the k-th write (from 0) of a schedule starting `at` with period `every` is due,
/// if that time exists.
fn due_at(at: Dur, every: Option<Dur>, k: u64) -> Option<u64> {
    k.checked_mul(every.map_or(0, |d| d.0))?.checked_add(at.0)
}

impl Scenario {
    /// The CPUs of each workload's tasks, as the workloads are spawned, and which CPUs
    /// are taken: [`Scenario::placements`], which validation checked (explicit `cpus`
    /// lists first, then every other workload, in order, on the lowest CPUs still free).
    /// A scenario whose placement does not fit (refused by validation) places nothing.
    pub fn workload_cpus(&self) -> (Vec<Vec<u32>>, Vec<bool>) {
        let placement = self
            .placements()
            .unwrap_or_else(|_| vec![Vec::new(); self.workloads.len()]);
        let mut taken = vec![false; self.machine.cpus as usize];
        for &c in placement.iter().flatten() {
            taken[c as usize] = true;
        }
        (placement, taken)
    }

    /// The lowest `n` CPUs no workload task takes ([`Scenario::workload_cpus`]); None when
    /// fewer are free.
    fn free_cpus(&self, n: usize) -> Option<Vec<u32>> {
        let (_, taken) = self.workload_cpus();
        let free: Vec<u32> = (0..self.machine.cpus)
            .filter(|&c| !taken[c as usize])
            .take(n)
            .collect();
        (free.len() == n).then_some(free)
    }

    /// The CPU of each `[[reclaim]]` entry's writer task: the lowest free CPUs, in entry
    /// order. None when too few are free.
    pub fn reclaim_cpus(&self) -> Option<Vec<u32>> {
        self.free_cpus(self.reclaims.len())
    }

    /// The CPU of each `[[lru_gen]]` entry's writer task: the free CPUs after those of the
    /// `[[reclaim]]` entries, in entry order (every writer has a CPU of its own). None
    /// when too few are free.
    pub fn lru_gen_cpus(&self) -> Option<Vec<u32>> {
        let mut cpus = self.free_cpus(self.reclaims.len() + self.lru_gens.len())?;
        Some(cpus.split_off(self.reclaims.len()))
    }

    /// Checks shared by every schedule entry: `at` names the entry's fields.
    fn validate_timing(
        &self,
        at: &dyn Fn(&str) -> String,
        first: Dur,
        every: Option<Dur>,
        times: u64,
    ) -> Result<()> {
        if times == 0 {
            return Err(Error::scenario(at("times"), "must be at least 1"));
        }
        match every {
            Some(Dur(0)) => {
                return Err(Error::scenario(at("every"), "must be > 0"));
            }
            None if times > 1 => {
                return Err(Error::scenario(
                    at("every"),
                    format!("{times} writes need a period between them"),
                ));
            }
            _ => {}
        }
        if first.0 >= self.duration.0 {
            return Err(Error::scenario(
                at("at"),
                format!(
                    "{} ns: the first write must be due before the end of the run ({} ns)",
                    first.0, self.duration.0
                ),
            ));
        }
        Ok(())
    }

    /// `cgroup` is one of the scenario's cgroups (`paths`, sorted).
    fn validate_cgroup(at: &dyn Fn(&str) -> String, cgroup: &str, paths: &[&str]) -> Result<()> {
        if paths.contains(&cgroup) {
            return Ok(());
        }
        Err(Error::scenario(
            at("cgroup"),
            format!(
                "{cgroup:?} is not a cgroup of the scenario; allowed: {}",
                paths.join(", ")
            ),
        ))
    }

    /// Checks of the `[[reclaim]]` entries; `paths` are the scenario's cgroups.
    fn validate_reclaim(&self, paths: &[&str]) -> Result<()> {
        for (i, r) in self.reclaims.iter().enumerate() {
            let at = |f: &str| format!("scenario.reclaim[{i}].{f}");
            if self.kernel.cgroup_version != 2 {
                return Err(Error::scenario(
                    at("cgroup"),
                    "memory.reclaim is a cgroup v2 file: it needs kernel.cgroup_version = 2",
                ));
            }
            Self::validate_cgroup(&at, &r.cgroup, paths)?;
            if r.bytes.pages() == 0 {
                return Err(Error::scenario(
                    at("bytes"),
                    format!(
                        "{} bytes: at least one page ({PAGE_SIZE}); less reclaims nothing",
                        r.bytes.0
                    ),
                ));
            }
            self.validate_timing(&at, r.at, r.every, r.times)?;
        }
        if !self.reclaims.is_empty() && self.reclaim_cpus().is_none() {
            return Err(Error::scenario(
                "scenario.reclaim",
                format!(
                    "{} memory.reclaim writer tasks need as many CPUs that no workload task uses",
                    self.reclaims.len()
                ),
            )
            .with_hint("raise machine.cpus: each task needs its own CPU"));
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// /sys/kernel/debug/lru_gen schedules
// ---------------------------------------------------------------------------------------

/// The most writes of one `[[lru_gen]]` entry that may fall within the run.
pub const MAX_LRU_GEN_WRITES: u64 = 1_000_000;

/// The command of a `[[lru_gen]]` entry: `"+"` ages (run_aging), `"-"` evicts
/// (run_eviction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LruGenCmd {
    Age,
    Evict,
}

impl LruGenCmd {
    /// The command character written to debugfs.
    pub fn as_char(self) -> char {
        match self {
            LruGenCmd::Age => '+',
            LruGenCmd::Evict => '-',
        }
    }
}

impl<'de> Deserialize<'de> for LruGenCmd {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d).map_err(|e| {
            if e.to_string().starts_with("missing field") {
                return e;
            }
            serde::de::Error::custom("expected a string: allowed \"+\" or \"-\"")
        })?;
        match s.as_str() {
            "+" => Ok(LruGenCmd::Age),
            "-" => Ok(LruGenCmd::Evict),
            _ => Err(serde::de::Error::custom(format!(
                "{s:?}: allowed \"+\" or \"-\""
            ))),
        }
    }
}

impl Serialize for LruGenCmd {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(if *self == LruGenCmd::Age { "+" } else { "-" })
    }
}

/// A `[[lru_gen]]` entry: a user task that writes one command to /sys/kernel/debug/lru_gen
/// `times` times, the k-th write due at `at + k * every` (late writes follow back to back,
/// as with `[[reclaim]]`), on a CPU of its own (the free CPUs after the `[[reclaim]]`
/// entries'). The line written is `cmd memcg_id node gen [swappiness [opt]]`, opt being
/// `force_scan` for "+" and `nr_to_reclaim` for "-".
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct LruGenSchedule {
    pub cmd: LruGenCmd,
    /// The memcg (the kernel memcg id of this cgroup is written).
    #[serde(default = "root_path")]
    pub cgroup: String,
    /// The node of the lruvec.
    #[serde(default)]
    pub node: u32,
    /// When the first write is due [ns].
    pub at: Dur,
    /// Period between due times [ns]; needed when `times` > 1.
    #[serde(default)]
    pub every: Option<Dur>,
    /// How many writes.
    #[serde(default = "one_u64")]
    pub times: u64,
    /// The generation written; absent = read from debugfs just before the write: max_seq
    /// for "+", the oldest generation evictable at the command's swappiness for "-".
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gen: Option<u64>,
    /// The swappiness field; absent = the kernel's get_swappiness() (the memcg's, or 0
    /// without swap space). "max" = 201: anon only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swappiness: Option<ReclaimSwappiness>,
    /// "+" only: whether the page-table walk scans every PMD; absent = the kernel's
    /// default (the omitted field reads as -1, i.e. true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force_scan: Option<bool>,
    /// "-" only: stop after this many pages reclaimed; absent = no limit (-1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nr_to_reclaim: Option<u64>,
}

impl LruGenSchedule {
    /// When the k-th write (from 0) is due, if that time exists.
    pub fn due(&self, k: u64) -> Option<u64> {
        due_at(self.at, self.every, k)
    }

    /// The swappiness field as the kernel parses it (None: omitted).
    pub fn swappiness_field(&self) -> Option<u32> {
        self.swappiness.map(|s| match s {
            ReclaimSwappiness::Value(v) => v,
            ReclaimSwappiness::Max => crate::mm::lru_gen::SWAPPINESS_ANON_ONLY,
        })
    }

    /// The command's last field (`force_scan` or `nr_to_reclaim`), if given.
    pub fn opt_field(&self) -> Option<u64> {
        match self.cmd {
            LruGenCmd::Age => self.force_scan.map(u64::from),
            LruGenCmd::Evict => self.nr_to_reclaim,
        }
    }

    /// The line written to debugfs for kernel memcg id `memcg_id` and generation `gen`.
    pub fn line(&self, memcg_id: u32, gen: u64) -> String {
        let mut l = format!("{} {memcg_id} {} {gen}", self.cmd.as_char(), self.node);
        if let Some(s) = self.swappiness {
            match s {
                ReclaimSwappiness::Value(v) => l += &format!(" {v}"),
                ReclaimSwappiness::Max => l += " max",
            }
        }
        if let Some(o) = self.opt_field() {
            l += &format!(" {o}");
        }
        l
    }
}

impl Scenario {
    /// Checks of the `[[lru_gen]]` entries; `paths` are the scenario's cgroups.
    fn validate_lru_gen(&self, paths: &[&str]) -> Result<()> {
        for (i, g) in self.lru_gens.iter().enumerate() {
            let at = |f: &str| format!("scenario.lru_gen[{i}].{f}");
            if self.kernel.lru != LruKind::Mglru {
                return Err(Error::scenario(
                    format!("scenario.lru_gen[{i}]"),
                    "/sys/kernel/debug/lru_gen is the multi-gen LRU's: it needs kernel.lru = \"mglru\"",
                ));
            }
            Self::validate_cgroup(&at, &g.cgroup, paths)?;
            if g.node >= self.machine.nodes {
                return Err(Error::scenario(
                    at("node"),
                    format!(
                        "{}: allowed 0..={} (the machine's nodes)",
                        g.node,
                        self.machine.nodes - 1
                    ),
                ));
            }
            self.validate_lru_gen_opt(&at, g)?;
            self.validate_timing(&at, g.at, g.every, g.times)?;
            self.validate_lru_gen_writes(&at, g)?;
        }
        if !self.lru_gens.is_empty() && self.lru_gen_cpus().is_none() {
            return Err(Error::scenario(
                "scenario.lru_gen",
                format!(
                    "{} writer tasks ([[reclaim]] and [[lru_gen]] entries) need as many CPUs that no workload task uses",
                    self.reclaims.len() + self.lru_gens.len()
                ),
            )
            .with_hint("raise machine.cpus: each task needs its own CPU"));
        }
        Ok(())
    }

    /// A failing write takes no virtual time, so the writes that fall within the run are
    /// bounded by the schedule alone: at most MAX_LRU_GEN_WRITES of them (each is logged).
    fn validate_lru_gen_writes(
        &self,
        at: &dyn Fn(&str) -> String,
        g: &LruGenSchedule,
    ) -> Result<()> {
        let span = self.duration.0 - g.at.0 - 1;
        let within = g.every.map_or(1, |e| span / e.0 + 1).min(g.times);
        if within <= MAX_LRU_GEN_WRITES {
            return Ok(());
        }
        Err(Error::scenario(
            at("every"),
            format!(
                "{} ns: {within} writes within the run; allowed at most {MAX_LRU_GEN_WRITES} per entry",
                g.every.map_or(0, |e| e.0)
            ),
        ))
    }

    /// `force_scan` belongs to "+" and `nr_to_reclaim` to "-", and either needs
    /// `swappiness`: the kernel reads the fields by position.
    fn validate_lru_gen_opt(&self, at: &dyn Fn(&str) -> String, g: &LruGenSchedule) -> Result<()> {
        let (field, other) = match g.cmd {
            LruGenCmd::Age => ("force_scan", g.nr_to_reclaim.is_some()),
            LruGenCmd::Evict => ("nr_to_reclaim", g.force_scan.is_some()),
        };
        if other {
            let (f, c) = match g.cmd {
                LruGenCmd::Age => ("nr_to_reclaim", "-"),
                LruGenCmd::Evict => ("force_scan", "+"),
            };
            return Err(Error::scenario(
                at(f),
                format!("allowed only with cmd = \"{c}\""),
            ));
        }
        if g.opt_field().is_some() && g.swappiness.is_none() {
            return Err(Error::scenario(
                at(field),
                "needs swappiness too: the kernel reads the command's fields by position",
            ));
        }
        Ok(())
    }
}
