//! The `[[workload]]` table: the placement every workload has (name, cgroup, CPUs, start,
//! copies) and its type, whose own fields the type's module reads (`crate::workload`'s
//! registry). Nothing here names a workload type.

use super::parse::{plain_words, shown, struct_fields};
use super::schema::{is_one, one, root_path, MAX_COPIES};
use super::units::Dur;
use crate::error::{quoted, Error, Result};
use crate::workload::{Workload, WorkloadKind};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A workload: a set of tasks placed in one cgroup, on CPUs, and its type.
#[derive(Debug, Clone)]
pub struct WorkloadSpec {
    pub placement: Placement,
    pub kind: WorkloadKind,
}

/// Marks the path inside a workload in an error message (see `from_json`): serde loses
/// the path below a table read by hand, so the workload reports it itself.
pub(super) const INNER_PATH: char = '\u{1}';

/// A table read as `T`, the path of a failing field tracked and marked with INNER_PATH.
fn read<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    map: serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<T, E> {
    let v = serde_json::Value::Object(map);
    serde_path_to_error::deserialize(super::Strict(&v)).map_err(inner_error)
}

/// A serde error inside a workload table, its path marked with INNER_PATH.
fn inner_error<E: serde::de::Error>(e: serde_path_to_error::Error<serde_json::Error>) -> E {
    let path = e.path().to_string();
    let msg = plain_words(&e.into_inner().to_string());
    if path == "." || path.is_empty() {
        E::custom(msg)
    } else {
        E::custom(format!("{INNER_PATH}{path}{INNER_PATH}{msg}"))
    }
}

/// The types as a message lists them: "`a`, `b` or `c`".
fn types_listed() -> String {
    let t: Vec<String> = WorkloadKind::TYPES
        .iter()
        .map(|t| format!("`{t}`"))
        .collect();
    match t.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
        _ => t.join(""),
    }
}

/// A workload table's `type`.
fn type_of<E: serde::de::Error>(
    map: &mut serde_json::Map<String, serde_json::Value>,
) -> std::result::Result<String, E> {
    let kinds = types_listed();
    match map.remove("type") {
        None => Err(E::custom(format!("missing field `type` ({kinds})"))),
        Some(serde_json::Value::String(k)) => Ok(k),
        Some(other) => Err(E::custom(format!(
            "type {}: expected {kinds}",
            shown(&other)
        ))),
    }
}

/// A workload table: `type` picks the type, whose fields are then read with their paths
/// tracked (an error names e.g. `workload[0].size`, not `workload[0]`). The shared fields
/// ([`Placement`]) are read first, on their own, and an unknown field is refused listing
/// the shared fields and the type's (its struct's serde field names).
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
        let kind = type_of::<D::Error>(&mut map)?;
        let Some(own) = WorkloadKind::fields(&kind) else {
            return Err(D::Error::custom(format!(
                "unknown type {}: expected {}",
                quoted(&kind),
                types_listed()
            )));
        };
        let shared_fields = struct_fields::<Placement>();
        let known = |k: &str| own.contains(&k) || shared_fields.contains(&k);
        if let Some(k) = map.keys().find(|k| !known(k)) {
            let allowed: Vec<String> = shared_fields
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
        let shared: serde_json::Map<String, serde_json::Value> = shared_fields
            .iter()
            .filter_map(|f| map.remove(*f).map(|v| (f.to_string(), v)))
            .collect();
        let placement: Placement = read(shared)?;
        let kind = WorkloadKind::read(&kind, serde_json::Value::Object(map))
            .expect("a registered type")
            .map_err(inner_error)?;
        Ok(WorkloadSpec { placement, kind })
    }
}

/// One table: `type`, the placement's fields, then the type's own.
impl Serialize for WorkloadSpec {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Table<'a> {
            #[serde(rename = "type")]
            kind: &'static str,
            #[serde(flatten)]
            placement: &'a Placement,
            #[serde(flatten)]
            fields: &'a WorkloadKind,
        }
        Table {
            kind: self.kind.type_name(),
            placement: &self.placement,
            fields: &self.kind,
        }
        .serialize(s)
    }
}

impl WorkloadSpec {
    /// Where and when it runs.
    pub fn common(&self) -> &Placement {
        &self.placement
    }

    /// The workload behind its type.
    pub fn spec(&self) -> &dyn Workload {
        self.kind.spec()
    }

    /// The `type` as a scenario spells it.
    pub fn type_name(&self) -> &'static str {
        self.kind.type_name()
    }

    /// Tasks of the workload (computed without overflow).
    pub fn nr_tasks(&self) -> u64 {
        self.spec().nr_tasks()
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

/// `copies` is 1..=MAX_COPIES, and more than one copy needs `{i}` in the field that names
/// each copy, `numbered` (its name and value: a cgroup's `path`, a workload's non-empty
/// `name`), which must differ from copy to copy.
pub(super) fn check_copies(at: &str, copies: u32, numbered: Option<(&str, &str)>) -> Result<()> {
    if !(1..=MAX_COPIES).contains(&copies) {
        return Err(Error::scenario(
            format!("{at}.copies"),
            format!("{copies}: allowed 1..={MAX_COPIES}"),
        ));
    }
    if let Some((field, value)) = numbered {
        if copies > 1 && !value.contains("{i}") {
            return Err(Error::scenario(
                format!("{at}.{field}"),
                format!(
                    "{value:?} with copies = {copies}: put {{i}} in the {field} to number the copies"
                ),
            ));
        }
    }
    Ok(())
}
