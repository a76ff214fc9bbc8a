//! Plain-text traces: one page or object id per line (decimal or 0x hex), `#` lines
//! comments.

use super::{err, LineCap, Request, Source};
use crate::error::{quoted, Result};
use crate::scenario::PAGE_SIZE;
use std::io::{BufRead, BufReader, Read};

/// One id per line.
pub(super) struct TextSource {
    file: String,
    rd: BufReader<LineCap<Box<dyn Read + Send>>>,
    line: String,
    record: u64,
}

impl TextSource {
    pub(super) fn new(path: &str, rd: LineCap<Box<dyn Read + Send>>) -> Self {
        TextSource {
            file: path.into(),
            rd: BufReader::with_capacity(1 << 16, rd),
            line: String::new(),
            record: 0,
        }
    }
}

/// An id as text and CSV traces write it: decimal, or hex after `0x`.
pub(super) fn parse_id(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

impl Source for TextSource {
    fn next_request(&mut self) -> Result<Option<Request>> {
        loop {
            self.line.clear();
            self.record += 1;
            let n = self
                .rd
                .read_line(&mut self.line)
                .map_err(|e| err(&self.file, self.record, e.to_string()))?;
            if n == 0 {
                return Ok(None);
            }
            let t = self.line.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let obj = parse_id(t).ok_or_else(|| {
                err(
                    &self.file,
                    self.record,
                    format!(
                        "{} is not a page or object id (an unsigned integer, decimal or 0x hex)",
                        quoted(t)
                    ),
                )
            })?;
            return Ok(Some(Request {
                obj,
                size: PAGE_SIZE,
                write: false,
            }));
        }
    }
}
