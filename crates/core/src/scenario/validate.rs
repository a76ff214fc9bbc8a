//! Semantic checks of a scenario that its types cannot express, one short function per
//! part (machine, times, kernel, costs, cgroups, workloads); the schedules' checks are in
//! `schedules.rs`. Every limit is checked before any work proportional to the value (a
//! million cgroups or a CPU range of billions is refused at once), and the checks are
//! linear in the scenario's size. The first failing check is the error, so their order
//! is part of the interface.

use super::parse::shown;
use super::*;
use crate::error::{quoted, Error, Result};
use crate::workload::Check;
use std::collections::{HashMap, HashSet};

impl Scenario {
    /// Semantic checks that the types cannot express (see the module's doc).
    pub fn validate(&self) -> Result<()> {
        self.validate_machine()?;
        self.validate_times()?;
        self.validate_kernel()?;
        self.validate_costs()?;
        let paths = self.validate_cgroups()?;
        self.validate_workloads(&paths)?;
        // CPU placement must fit, also for the default (next free CPUs) placement.
        self.placements()?;
        let mut sorted: Vec<&str> = paths.iter().copied().collect();
        sorted.sort_unstable();
        self.validate_reclaim(&sorted)?;
        self.validate_lru_gen(&sorted)?;
        Ok(())
    }

    /// Nodes, CPUs, memory and swap within what the model represents.
    fn validate_machine(&self) -> Result<()> {
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
        let t = m.threads_per_core;
        if !(1..=8).contains(&t) || (t > 1 && !m.cpus.is_multiple_of(m.nodes * t)) {
            return Err(Error::scenario(
                "scenario.machine.threads_per_core",
                format!(
                    "{t} threads per core with {} CPUs on {} node(s): allowed 1..=8, and with more than 1 each node's CPUs a multiple of it",
                    m.cpus, m.nodes
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
            if sw.rotational && sw.device == SwapDevice::Zram {
                return Err(Error::scenario(
                    "scenario.machine.swap.rotational",
                    "true: allowed only with device = \"ssd\" (zram is not a rotational device)",
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
        Ok(())
    }

    /// The run's duration, warmup and sampling interval.
    fn validate_times(&self) -> Result<()> {
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
        Ok(())
    }

    /// The kernel's knobs.
    fn validate_kernel(&self) -> Result<()> {
        for name in self.kernel.rules.keys() {
            let allowed = crate::versions::settable();
            if !allowed.contains(&name.as_str()) {
                return Err(Error::scenario(
                    format!("scenario.kernel.rules.{name}"),
                    format!(
                        "no such rule; allowed: {} (`reclaimsim versions` lists them)",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        self.check_switch_settings()?;
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
        Ok(())
    }

    /// Cost overrides name known costs within range, and the profiles resolve.
    fn validate_costs(&self) -> Result<()> {
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
        Ok(())
    }

    /// The cgroup tree: absolute paths, parents listed before children, each once, knobs
    /// of the cgroup version. Returns the paths, the root's included.
    fn validate_cgroups(&self) -> Result<HashSet<&str>> {
        if self.cgroups.len() > MAX_CGROUPS {
            return Err(Error::scenario(
                "scenario.cgroup",
                format!(
                    "{} cgroups: allowed at most {MAX_CGROUPS} below the root",
                    self.cgroups.len()
                ),
            ));
        }
        let mut paths: HashSet<&str> = HashSet::with_capacity(self.cgroups.len() + 1);
        paths.insert("/");
        for (i, c) in self.cgroups.iter().enumerate() {
            self.validate_cgroup_entry(i, c, &mut paths)?;
        }
        Ok(paths)
    }

    /// Cgroup `i`: its path is new and below a listed parent (added to `paths`), its knobs
    /// exist in the cgroup version and are in range.
    fn validate_cgroup_entry<'a>(
        &self,
        i: usize,
        c: &'a CgroupSpec,
        paths: &mut HashSet<&'a str>,
    ) -> Result<()> {
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
        Ok(())
    }

    /// The workloads: at least one, each in a cgroup of the scenario, starting within the
    /// run, with 1..=MAX_CPUS tasks, and its own checks.
    fn validate_workloads(&self, paths: &HashSet<&str>) -> Result<()> {
        let m = &self.machine;
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
            self.validate_workload(i, w, paths)?;
        }
        self.validate_workload_names()
    }

    /// Every workload, copies expanded, has a name of its own (reports and `compare` tell
    /// workloads apart by it): its `name`, or the one a run gives an unnamed workload, its
    /// type and position (`usemem0`, as sim.rs names it). Generated names never collide
    /// with one another (positions differ, and no type's name is another's followed by
    /// digits), so a collision involves an explicit name, and the error names that field.
    fn validate_workload_names(&self) -> Result<()> {
        let named = |i: usize| !self.workloads[i].common().name.is_empty();
        let mut seen: HashMap<String, usize> = HashMap::with_capacity(self.workloads.len());
        for (i, w) in self.workloads.iter().enumerate() {
            let name = if named(i) {
                w.common().name.clone()
            } else {
                format!("{}{i}", w.type_name())
            };
            if let Some(&j) = seen.get(&name) {
                let (at, other) = if named(i) { (i, j) } else { (j, i) };
                let how = if named(other) {
                    format!("the name of workload[{other}]")
                } else {
                    format!("the name workload[{other}] gets by default (its type and position)")
                };
                return Err(Error::scenario(
                    format!("scenario.workload[{at}].name"),
                    format!(
                        "{} is also {how}: each workload needs a name of its own (reports and compare tell workloads apart by it)",
                        quoted(&name)
                    ),
                ));
            }
            seen.insert(name, i);
        }
        Ok(())
    }

    /// Workload `i`'s placement and task count, then its own checks.
    fn validate_workload(&self, i: usize, w: &WorkloadSpec, paths: &HashSet<&str>) -> Result<()> {
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
            let (field, what) = w.spec().tasks_field();
            return Err(Error::scenario(
                at(field),
                format!("{what}: allowed 1..={MAX_CPUS} (each task needs its own CPU)"),
            ));
        }
        let cx = Check {
            index: i,
            scenario: self,
        };
        w.spec().validate(&cx)
    }

    /// A switch that is a kernel's own behavior (an `Effect::Switch` rule) set both in
    /// `kernel.rules` and in `[variants]` is set to one value. `kernel.rules.NAME` gives the
    /// switch its default (versions.rs, fill_switch_defaults) and an explicit `[variants]`
    /// setting would override it, so a switch that differs from its rule was set in
    /// `[variants]` to the other value.
    fn check_switch_settings(&self) -> Result<()> {
        use crate::versions::{rule, Effect};
        let mut variants = None;
        for (name, &on) in &self.kernel.rules {
            if !rule(name).is_some_and(|r| r.effect == Effect::Switch) {
                continue;
            }
            let v = variants.get_or_insert_with(|| {
                serde_json::to_value(&self.variants).unwrap_or(serde_json::Value::Null)
            });
            if let Some(set) = v.get(name).and_then(|x| x.as_bool()) {
                if set != on {
                    return Err(Error::scenario(
                        format!("scenario.variants.{name}"),
                        format!(
                            "{set} contradicts kernel.rules.{name} = {on}: both set the same switch; set it in one of them (or both to the same value)"
                        ),
                    ));
                }
            }
        }
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
}

/// The longest name of a directory entry (NAME_MAX): cgroupfs refuses a longer one.
const NAME_MAX: usize = 255;

/// The memory controller's and the pressure interface files of a cgroup v2 directory
/// (mm/memcontrol.c's memory_files, swap_files and zswap_files, and the PSI files): a
/// child named like one would collide with the file in its parent's directory, and
/// cgroupfs refuses it (kernfs_create_dir: -EEXIST). The cgroup core's own files all
/// begin with `cgroup.`, refused as a prefix; another controller's files exist only where
/// it is enabled (kernel-run enables memory alone).
const INTERFACE_FILES: [&str; 25] = [
    "memory.current",
    "memory.min",
    "memory.low",
    "memory.high",
    "memory.max",
    "memory.events",
    "memory.events.local",
    "memory.stat",
    "memory.numa_stat",
    "memory.oom.group",
    "memory.reclaim",
    "memory.peak",
    "memory.swap.current",
    "memory.swap.high",
    "memory.swap.max",
    "memory.swap.peak",
    "memory.swap.events",
    "memory.zswap.current",
    "memory.zswap.max",
    "memory.zswap.writeback",
    "memory.pressure",
    "cpu.pressure",
    "io.pressure",
    "irq.pressure",
    "cpu.stat",
];

/// A cgroup path's components are names the kernel can make under the run's own tree:
/// none empty, none `.` or `..` (which would name a cgroup beside or above the tree),
/// none longer than NAME_MAX bytes, none named like an interface file.
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
        if c.len() > NAME_MAX {
            return Err(Error::scenario(
                at.to_string(),
                format!(
                    "the component {} is {} bytes long: a cgroup name is at most {NAME_MAX} bytes (NAME_MAX; cgroupfs refuses a longer one)",
                    shown(&serde_json::Value::String(c.into())),
                    c.len()
                ),
            ));
        }
        if c.starts_with("cgroup.") || INTERFACE_FILES.contains(&c) {
            return Err(Error::scenario(
                at.to_string(),
                format!(
                    "{}: the component {} is the name of a cgroup interface file, which a real cgroupfs has in every cgroup directory and so refuses as a child's name (a name may not begin with \"cgroup.\" or be one of the memory controller's or the pressure files: {})",
                    quoted(p),
                    quoted(c),
                    INTERFACE_FILES.join(", ")
                ),
            ));
        }
    }
    Ok(())
}
