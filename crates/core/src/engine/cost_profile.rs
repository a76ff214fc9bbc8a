//! Cost profiles: where the cost table's nanoseconds come from.
//!
//! The cost table (cost.rs) is a set of documented orders of magnitude. A *profile*
//! replaces some of them with figures of one machine, each with where it came from:
//!
//! - a **hardware profile** (`machine.profile = "NAME"`) describes a machine class a seed
//!   ran on; it is built in (crates/core/profiles/NAME.toml) and every figure in it cites a
//!   published measurement. It is hardware only: it never holds a figure chosen so that
//!   some scenario's result appears.
//! - a **cost profile** (`costs_profile = "FILE"` in a scenario, or `--costs FILE`) is a
//!   file, usually written by `reclaimsim calibrate` on the machine it measured; each entry
//!   says how it was measured.
//!
//! Both have the same format:
//!
//! ```toml
//! name = "this-host"
//! description = "what machine, when"
//! [costs]
//! fault_entry = { ns = 610, source = "how it was measured, or the citation" }
//! ```
//!
//! Precedence, lowest first: the built-in defaults, `machine.profile`, the cost profile,
//! the scenario's own `[costs]` entries. [`resolve`] applies them in that order and keeps
//! each entry's origin, which `reclaimsim costs` and the run's report show.

use super::cost::CostTable;
use crate::error::{Error, Result};
use crate::scenario::{Scenario, MAX_COST};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One entry of a profile.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { ns = 610, source = \"how it was measured\" }"
)]
pub struct ProfileEntry {
    /// The figure [ns], a whole number >= 0 (at most `MAX_COST` in `costs`).
    #[serde(deserialize_with = "nanoseconds")]
    pub ns: u64,
    /// How it was measured (a calibrated profile) or the published source (a hardware one).
    pub source: String,
}

/// A cost profile or a hardware profile.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CostProfile {
    pub name: String,
    #[serde(default)]
    pub description: String,
    pub costs: BTreeMap<String, ProfileEntry>,
    /// Figures that are not entries (a calibrated profile's whole-path timings, kept for
    /// the reader); never applied.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub checks: BTreeMap<String, ProfileEntry>,
}

/// What an entry's `ns` allows, in an error.
fn ns_allowed() -> String {
    format!("allowed a whole number of nanoseconds >= 0 (in `costs`, 0..={MAX_COST})")
}

/// An entry's `ns`: an error shows the value and what is allowed (not serde's `u64`).
fn nanoseconds<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<u64, D::Error> {
    use serde::de::Visitor;
    struct Ns;
    impl Visitor<'_> for Ns {
        type Value = u64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            write!(f, "a whole number of nanoseconds >= 0")
        }
        // TOML integers are i64: every one arrives here.
        fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<u64, E> {
            u64::try_from(v).map_err(|_| E::custom(format!("{v}: {}", ns_allowed())))
        }
        fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<u64, E> {
            Err(E::custom(format!("{v}: {}", ns_allowed())))
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<u64, E> {
            Err(E::custom(format!(
                "{}: {} (a number, not a string)",
                crate::error::quoted(v),
                ns_allowed()
            )))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<u64, E> {
            Err(E::custom(format!("{v}: {}", ns_allowed())))
        }
    }
    d.deserialize_any(Ns)
}

/// The largest cost profile file read [bytes].
const MAX_PROFILE_BYTES: u64 = 1 << 20;

/// The built-in hardware profiles: (name, TOML text).
const BUILTIN: &[(&str, &str)] = &[
    ("laptop", include_str!("../../profiles/laptop.toml")),
    (
        "server-2s-176c",
        include_str!("../../profiles/server-2s-176c.toml"),
    ),
    (
        "server-4n-1t",
        include_str!("../../profiles/server-4n-1t.toml"),
    ),
    (
        "skylake-sp-4s",
        include_str!("../../profiles/skylake-sp-4s.toml"),
    ),
];

impl CostProfile {
    /// Parse a profile's TOML text; `origin` (a file name or `profile NAME`) and `field`
    /// (the scenario field that named it) are used in errors.
    /// A malformed entry is named with its field, e.g. `costs.fault_entry.ns: -5: ...`.
    pub fn parse(text: &str, origin: &str, field: &str) -> Result<CostProfile> {
        let de = toml::Deserializer::new(text);
        let p: CostProfile = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let span = e.inner().span();
            // toml's message may run over lines; a refusal is one.
            let mut msg = crate::scenario::plain_words(e.inner().message()).replace('\n', "; ");
            // A TOML date reaches serde as a table: say what the file holds.
            let written = span.clone().and_then(|r| text.get(r)).map(str::trim);
            if written.is_some_and(|w| w.parse::<toml::value::Datetime>().is_ok()) {
                msg = msg.replace("invalid type: table", "a TOML date or time");
            }
            // FILE:LINE, as a compiler names a place in a file.
            let line = span.map_or(String::new(), |r| {
                let l = text[..r.start.min(text.len())].matches('\n').count() + 1;
                format!(":{l}")
            });
            let at = if path.is_empty() || path == "." {
                String::new()
            } else {
                format!("{path}: ")
            };
            Error::scenario(
                field,
                format!("{origin}{line}: not a cost profile: {at}{msg}"),
            )
        })?;
        let names = CostTable::names();
        for (k, e) in &p.costs {
            if !names.contains(&k.as_str()) {
                return Err(Error::scenario(
                    field,
                    format!(
                        "{origin}: costs.{k}: unknown cost name; allowed: {}",
                        names.join(", ")
                    ),
                ));
            }
            if e.ns > MAX_COST {
                return Err(Error::scenario(
                    field,
                    format!("{origin}: costs.{k} = {} ns: allowed 0..={MAX_COST}", e.ns),
                ));
            }
        }
        Ok(p)
    }

    /// The built-in hardware profile `name`.
    pub fn builtin(name: &str) -> Result<CostProfile> {
        match BUILTIN.iter().find(|(n, _)| *n == name) {
            Some((n, text)) => {
                CostProfile::parse(text, &format!("profile {n}"), "scenario.machine.profile")
            }
            None => Err(Error::scenario(
                "scenario.machine.profile",
                format!(
                    "{:?}: no such hardware profile; allowed: {}",
                    name,
                    if BUILTIN.is_empty() {
                        "(none built in)".to_string()
                    } else {
                        builtin_names().join(", ")
                    }
                ),
            )),
        }
    }

    /// Read a cost profile file (the scenario's `costs_profile`).
    pub fn read(path: &str) -> Result<CostProfile> {
        let field = "scenario.costs_profile";
        let cant = |e: std::io::Error| {
            Error::scenario(field, format!("{path:?}: cannot read: {}", io_words(&e)))
        };
        // A profile is a small regular file: never read a device or a FIFO (the
        // scenario fuzzer hands over any path) or a huge file into memory.
        let meta = std::fs::metadata(path).map_err(cant)?;
        if !meta.is_file() || meta.len() > MAX_PROFILE_BYTES {
            return Err(Error::scenario(
                field,
                format!(
                    "{path:?}: not a cost profile: allowed a regular file of at most {MAX_PROFILE_BYTES} bytes"
                ),
            ));
        }
        let text = std::fs::read_to_string(path).map_err(cant)?;
        CostProfile::parse(&text, path, field)
    }
}

fn io_words(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "no such file".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::InvalidData => "not UTF-8 text".to_string(),
        _ => e.to_string(),
    }
}

/// Names of the built-in hardware profiles.
pub fn builtin_names() -> Vec<&'static str> {
    BUILTIN.iter().map(|(n, _)| *n).collect()
}

/// The built-in hardware profiles (for `reclaimsim profiles`); the first that does not
/// parse is an error, not left out.
pub fn builtins() -> Result<Vec<CostProfile>> {
    BUILTIN
        .iter()
        .map(|(n, _)| CostProfile::builtin(n))
        .collect()
}

/// Where one cost-table value came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Origin {
    /// `default`, `machine.profile`, `costs_profile` or `costs` (the scenario's table).
    pub layer: &'static str,
    /// The profile's name or file; empty for `default` and `costs`.
    pub from: String,
    /// The profile entry's source; empty for `default` and `costs`.
    pub source: String,
}

/// The cost table of a scenario, and each entry's origin.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub table: CostTable,
    pub origins: BTreeMap<&'static str, Origin>,
}

/// The cost table of a scenario: defaults < `machine.profile` < `costs_profile` <
/// `[costs]`. Errors name the scenario field (an unknown profile, an unreadable file, an
/// unknown cost name in a profile).
pub fn resolve(sc: &Scenario) -> Result<Resolved> {
    let mut table = CostTable::default();
    let mut origins: BTreeMap<&'static str, Origin> = CostTable::names()
        .into_iter()
        .map(|n| {
            let o = Origin {
                layer: "default",
                from: String::new(),
                source: String::new(),
            };
            (n, o)
        })
        .collect();
    let mut layers: Vec<(&'static str, CostProfile, String)> = Vec::new();
    if let Some(name) = &sc.machine.profile {
        layers.push(("machine.profile", CostProfile::builtin(name)?, name.clone()));
    }
    if let Some(path) = &sc.costs_profile {
        layers.push(("costs_profile", CostProfile::read(path)?, path.clone()));
    }
    for (layer, p, from) in layers {
        let values: BTreeMap<String, u64> =
            p.costs.iter().map(|(k, e)| (k.clone(), e.ns)).collect();
        table = table.with_overrides(&values);
        for (k, e) in &p.costs {
            if let Some(o) = origins.get_mut(k.as_str()) {
                *o = Origin {
                    layer,
                    from: from.clone(),
                    source: e.source.clone(),
                };
            }
        }
    }
    table = table.with_overrides(&sc.costs);
    for k in sc.costs.keys() {
        if let Some(o) = origins.get_mut(k.as_str()) {
            *o = Origin {
                layer: "costs",
                from: String::new(),
                source: String::new(),
            };
        }
    }
    Ok(Resolved { table, origins })
}
