//! CSV traces: the columns of the object id, its size, the operation and the time named
//! in the trace workload's `csv` table (a header name or a 1-based number).

use super::text::parse_id;
use super::{err, LineCap, Request, Source};
use crate::error::{quoted, Result};
use crate::scenario::PAGE_SIZE;
use serde::{Deserialize, Serialize};
use std::io::Read;

/// The CSV `op` values that write the object's pages (any case).
pub const WRITE_OPS: [&str; 7] = ["write", "set", "put", "update", "w", "add", "replace"];

/// The CSV `op` values that read them (any case): plain reads, and the other request
/// types of cache traces (libCacheSim's), which the model replays as one access each.
pub const READ_OPS: [&str; 11] = [
    "read", "r", "get", "gets", "cas", "append", "prepend", "incr", "decr", "delete", "nop",
];

/// Whether a CSV `op` value writes: `Some(true)` for [`WRITE_OPS`], `Some(false)` for
/// [`READ_OPS`], `None` for anything else (a typo must not become a silent read).
pub fn op_is_write(op: &str) -> Option<bool> {
    let is = |set: &[&str]| set.iter().any(|o| o.eq_ignore_ascii_case(op));
    if is(&WRITE_OPS) {
        Some(true)
    } else if is(&READ_OPS) {
        Some(false)
    } else {
        None
    }
}

/// Which CSV columns hold what: a header name, or a 1-based column number.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct CsvColumns {
    /// The object id column (required).
    pub obj_id: CsvColumn,
    /// Object size in bytes; absent = one page per object.
    #[serde(default)]
    pub obj_size: Option<CsvColumn>,
    /// The operation: one of [`WRITE_OPS`] or [`READ_OPS`] (any case); anything else is
    /// refused with the record's number.
    #[serde(default)]
    pub op: Option<CsvColumn>,
    /// The time column (read and checked, not replayed: requests run back to back).
    #[serde(default)]
    pub time: Option<CsvColumn>,
    /// Whether the first row is a header (needed to name columns).
    #[serde(default = "yes")]
    pub header: bool,
    /// Field delimiter, one ASCII character.
    #[serde(default = "comma")]
    pub delimiter: String,
}

fn yes() -> bool {
    true
}
fn comma() -> String {
    ",".into()
}

impl CsvColumns {
    /// The table's own checks: a one-character delimiter, column numbers from 1, names
    /// only with a header. On error, the field (`delimiter`, `obj_id`, ...) and what is
    /// wrong with it.
    pub fn check(&self) -> std::result::Result<(), (&'static str, String)> {
        if self.delimiter.len() != 1 {
            return Err((
                "delimiter",
                format!("{}: one ASCII character", quoted(&self.delimiter)),
            ));
        }
        for (name, col) in [
            ("obj_id", Some(&self.obj_id)),
            ("obj_size", self.obj_size.as_ref()),
            ("op", self.op.as_ref()),
            ("time", self.time.as_ref()),
        ] {
            match col {
                Some(CsvColumn::Number(0)) => {
                    return Err((name, "0: column numbers start at 1".into()));
                }
                Some(CsvColumn::Name(_)) if !self.header => {
                    return Err((
                        name,
                        "a column name needs header = true; give its 1-based number instead".into(),
                    ));
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// A CSV column: its header name or its 1-based number.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(untagged)]
pub enum CsvColumn {
    Number(usize),
    Name(String),
}

/// CSV with mapped columns.
pub(super) struct CsvSource {
    file: String,
    rd: csv::Reader<LineCap<Box<dyn Read + Send>>>,
    rec: csv::StringRecord,
    obj_id: usize,
    obj_size: Option<usize>,
    op: Option<usize>,
    time: Option<usize>,
    record: u64,
}

impl CsvSource {
    pub(super) fn new(
        path: &str,
        file: LineCap<Box<dyn Read + Send>>,
        cols: Option<&CsvColumns>,
    ) -> Result<Self> {
        let default = CsvColumns {
            obj_id: CsvColumn::Name("obj_id".into()),
            obj_size: None,
            op: None,
            time: None,
            header: true,
            delimiter: ",".into(),
        };
        let c = cols.unwrap_or(&default);
        let mut rd = csv::ReaderBuilder::new()
            .has_headers(c.header)
            .delimiter(c.delimiter.as_bytes()[0])
            .flexible(true)
            .from_reader(file);
        let headers: Vec<String> = if c.header {
            rd.headers()
                .map_err(|e| err(path, 1, format!("header: {e}")))?
                .iter()
                .map(|h| h.trim().to_string())
                .collect()
        } else {
            Vec::new()
        };
        let resolve = |col: &CsvColumn, what: &str| -> Result<usize> {
            match col {
                CsvColumn::Number(n) => Ok(n - 1),
                CsvColumn::Name(name) => headers.iter().position(|h| h == name).ok_or_else(|| {
                    err(
                        path,
                        1,
                        format!(
                            "no column {} for {what} in the header; columns: {}{}",
                            quoted(name),
                            headers
                                .iter()
                                .take(20)
                                .map(|h| quoted(h))
                                .collect::<Vec<_>>()
                                .join(", "),
                            if headers.len() > 20 { ", ..." } else { "" }
                        ),
                    )
                }),
            }
        };
        let obj_id = resolve(&c.obj_id, "obj_id")?;
        // Unnamed optional columns are looked up by their default names.
        let optional = |col: &Option<CsvColumn>, what: &str| -> Result<Option<usize>> {
            match col {
                Some(c) => resolve(c, what).map(Some),
                None if cols.is_none() => Ok(headers.iter().position(|h| h == what)),
                None => Ok(None),
            }
        };
        Ok(CsvSource {
            file: path.into(),
            obj_size: optional(&c.obj_size, "obj_size")?,
            op: optional(&c.op, "op")?,
            time: optional(&c.time, "time")?,
            obj_id,
            rd,
            rec: csv::StringRecord::new(),
            record: c.header as u64,
        })
    }

    fn field(&self, i: usize, what: &str) -> Result<&str> {
        self.rec.get(i).map(str::trim).ok_or_else(|| {
            err(
                &self.file,
                self.record,
                format!(
                    "no column {} ({what}): the row has {} fields",
                    i + 1,
                    self.rec.len()
                ),
            )
        })
    }
}

impl Source for CsvSource {
    fn next_request(&mut self) -> Result<Option<Request>> {
        self.record += 1;
        let more = self
            .rd
            .read_record(&mut self.rec)
            .map_err(|e| err(&self.file, self.record, e.to_string()))?;
        if !more {
            return Ok(None);
        }
        let id = self.field(self.obj_id, "obj_id")?;
        let obj = parse_id(id).ok_or_else(|| {
            err(
                &self.file,
                self.record,
                format!("obj_id {} is not an unsigned integer", quoted(id)),
            )
        })?;
        let size = match self.obj_size {
            Some(i) => {
                let s = self.field(i, "obj_size")?;
                s.parse::<u64>().map_err(|_| {
                    err(
                        &self.file,
                        self.record,
                        format!("obj_size {} is not a size in bytes", quoted(s)),
                    )
                })?
            }
            None => PAGE_SIZE,
        };
        if let Some(i) = self.time {
            let t = self.field(i, "time")?;
            if t.parse::<f64>().is_err() {
                return Err(err(
                    &self.file,
                    self.record,
                    format!("time {} is not a number", quoted(t)),
                ));
            }
        }
        let write = match self.op {
            Some(i) => {
                let o = self.field(i, "op")?;
                op_is_write(o).ok_or_else(|| {
                    err(
                        &self.file,
                        self.record,
                        format!(
                            "op {} is not an operation: writes are {}; reads are {} (any case)",
                            quoted(o),
                            WRITE_OPS.join(", "),
                            READ_OPS.join(", ")
                        ),
                    )
                })?
            }
            None => false,
        };
        Ok(Some(Request { obj, size, write }))
    }
}

#[cfg(test)]
mod tests {
    use super::op_is_write;

    #[test]
    fn ops_are_writes_reads_or_refused_in_any_case() {
        assert_eq!(op_is_write("SET"), Some(true));
        assert_eq!(op_is_write("Replace"), Some(true));
        assert_eq!(op_is_write("w"), Some(true));
        assert_eq!(op_is_write("GET"), Some(false));
        assert_eq!(op_is_write("delete"), Some(false));
        assert_eq!(op_is_write("r"), Some(false));
        for typo in ["wirte", "", "sett", " get", "ww"] {
            assert_eq!(op_is_write(typo), None, "{typo:?}");
        }
    }
}
