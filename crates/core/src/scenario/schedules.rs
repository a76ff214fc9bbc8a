//! The schedules of user-space writers: `[[reclaim]]` (memory.reclaim, proactive
//! reclaim) and `[[lru_gen]]` (/sys/kernel/debug/lru_gen commands), and their checks.

use super::schema::{one_u64, root_path, LruKind};
use super::units::{Dur, Size, PAGE_SIZE};
use super::Scenario;
use crate::error::{Error, Result};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

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
    pub(super) fn validate_reclaim(&self, paths: &[&str]) -> Result<()> {
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

/// The most writes of one `[[lru_gen]]` entry that may fall within the run.
pub const MAX_LRU_GEN_WRITES: u64 = 1_000_000;

/// The command of a `[[lru_gen]]` entry (defined with the debugfs file it writes to).
pub use crate::mm::lru_gen::debugfs::LruGenCmd;

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
    pub(super) fn validate_lru_gen(&self, paths: &[&str]) -> Result<()> {
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
