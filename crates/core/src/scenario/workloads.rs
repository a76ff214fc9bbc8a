//! The `[[workload]]` table: its placement (cgroup, CPUs, start, copies) and its type.

use super::parse::{plain_words, shown};
use super::schema::{is_one, one, one_u64, root_path, yes, MAX_COPIES};
use super::units::{Dur, Size, PAGE_SIZE};
use super::{CsvColumns, TraceFormat};
use crate::error::{quoted, Error, Result};
use serde::{Deserialize, Deserializer, Serialize};

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
pub(super) const INNER_PATH: char = '\u{1}';

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
    pub(super) fn common_mut(&mut self) -> &mut Placement {
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
pub(super) fn check_copies(at: &str, copies: u32, fields: &[&str]) -> Result<()> {
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
