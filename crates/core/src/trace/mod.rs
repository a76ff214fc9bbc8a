//! Trace readers for the `trace` workload, one file per format beside the reader trait
//! ([`Source`]) as libCacheSim's traceReader keeps them: plain text (`text.rs`), CSV
//! (`csv.rs`), libCacheSim oracleGeneral, plain or zstd (`oracle_general.rs`), and DAMON
//! records, damo JSON (`damon.rs`). This file holds what they share: the request, the
//! trait, format detection, opening, probing and counting a trace; `pagemap.rs` maps a
//! trace's object ids to pages. Every reader streams its file and yields requests one at
//! a time; a malformed or truncated record is an error naming the file, the record and
//! what is wrong, never a short replay.

mod csv;
mod damon;
mod oracle_general;
mod pagemap;
mod text;

pub use self::csv::{CsvColumn, CsvColumns};
pub use oracle_general::{write_zipf_oracle, ORACLE_GENERAL_RECORD};
pub use pagemap::PageMap;

use self::csv::CsvSource;
use crate::error::{Error, Result};
use crate::scenario::PAGE_SIZE;
use damon::DamonSource;
use oracle_general::{check_oracle_length, OracleSource, ZSTD_MAGIC};
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;
use text::TextSource;

/// Trace file formats (`format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TraceFormat {
    /// From the file name (.txt, .csv, .zst, .oracleGeneral/.bin, .json), else the content.
    Auto,
    /// One page or object id per line (decimal or 0x hex); `#` lines are comments.
    Text,
    /// CSV with the columns named in `csv`.
    Csv,
    /// libCacheSim oracleGeneral: 24-byte records (u32 time, u64 obj_id, u32 obj_size,
    /// i64 next_access_vtime), little-endian; the file is a whole number of them.
    OracleGeneral,
    /// oracleGeneral compressed with zstd.
    OracleGeneralZst,
    /// DAMON records as `damo` writes them in JSON: per snapshot, regions with their
    /// access counts, turned into page accesses at the recorded rates.
    Damon,
}

/// One request of a trace: an object (pages `size` bytes long) read or written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    pub obj: u64,
    pub size: u64,
    pub write: bool,
}

impl Request {
    /// Pages the object spans (at least one).
    pub fn pages(&self) -> u32 {
        self.size.div_ceil(PAGE_SIZE).clamp(1, u32::MAX as u64) as u32
    }
}

/// A stream of requests (Send: the host runner reads a trace on a thread of its own).
pub trait Source: Send {
    /// The next request, None at the end of the trace.
    fn next_request(&mut self) -> Result<Option<Request>>;

    /// Append up to `max` requests to `out`; false once the trace has ended. On an error,
    /// the requests read before it are already in `out`.
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<bool> {
        for _ in 0..max {
            match self.next_request()? {
                Some(r) => out.push(r),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// A trace error at record `record` (0: the file as a whole) of `file`.
fn err(file: &str, record: u64, msg: impl Into<String>) -> Error {
    Error::Trace {
        file: file.into(),
        record,
        msg: msg.into(),
    }
}

/// The format of a trace named `name` whose content starts with `head`: `format` unless
/// auto, else from the name, else from the content.
pub fn detect_in(name: &str, head: &[u8], format: TraceFormat) -> TraceFormat {
    if format != TraceFormat::Auto {
        return format;
    }
    let lower = name.to_ascii_lowercase();
    let by_name = [
        (".zst", TraceFormat::OracleGeneralZst),
        (".txt", TraceFormat::Text),
        (".csv", TraceFormat::Csv),
        (".json", TraceFormat::Damon),
        (".oraclegeneral", TraceFormat::OracleGeneral),
        (".bin", TraceFormat::OracleGeneral),
    ];
    for (ext, f) in by_name {
        if lower.ends_with(ext) {
            return f;
        }
    }
    if head.starts_with(&ZSTD_MAGIC) {
        return TraceFormat::OracleGeneralZst;
    }
    let trimmed = head.iter().skip_while(|b| b.is_ascii_whitespace()).copied();
    match trimmed.clone().next() {
        Some(b'[') | Some(b'{') => return TraceFormat::Damon,
        None => return TraceFormat::Text,
        _ => {}
    }
    if head
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return if head.contains(&b',') {
            TraceFormat::Csv
        } else {
            TraceFormat::Text
        };
    }
    TraceFormat::OracleGeneral
}

/// The format of `path`: `format` unless auto, else from the name, else from the content.
pub fn detect(path: &str, format: TraceFormat) -> Result<TraceFormat> {
    if format != TraceFormat::Auto {
        return Ok(format);
    }
    let mut head = [0u8; 512];
    let mut n = 0;
    let mut f = File::open(path).map_err(|e| err(path, 0, e.to_string()))?;
    // Fill the head (a short read is not the end of the file).
    while n < head.len() {
        match f.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(err(path, 0, e.to_string())),
        }
    }
    Ok(detect_in(path, &head[..n], format))
}

/// Longest line of a text or CSV trace [bytes]: a file without line breaks must not be
/// read whole into one line.
pub const MAX_LINE: u64 = 1 << 20;

/// A reader that fails on a line longer than [`MAX_LINE`].
struct LineCap<R> {
    inner: R,
    run: u64,
}

impl<R> LineCap<R> {
    fn new(inner: R) -> Self {
        LineCap { inner, run: 0 }
    }
}

impl<R: Read> Read for LineCap<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            if b == b'\n' {
                self.run = 0;
            } else {
                self.run += 1;
            }
        }
        if self.run > MAX_LINE {
            return Err(std::io::Error::other(format!(
                "a line longer than {MAX_LINE} bytes: not a text or CSV trace"
            )));
        }
        Ok(n)
    }
}

/// A trace's content and, when known before reading it (a regular file, bytes in
/// memory), its length in bytes.
struct Content {
    rd: Box<dyn Read + Send>,
    len: Option<u64>,
}

/// A trace file's resolved format and content.
fn file_reader(path: &str, format: TraceFormat) -> Result<(TraceFormat, Content)> {
    let format = detect(path, format)?;
    let file = File::open(Path::new(path)).map_err(|e| err(path, 0, e.to_string()))?;
    let len = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    let rd = Box::new(file);
    Ok((format, Content { rd, len }))
}

/// A trace held in memory, its format resolved (`name` stands for its file name).
fn bytes_reader(name: &str, data: Vec<u8>, format: TraceFormat) -> (TraceFormat, Content) {
    let format = detect_in(name, &data[..data.len().min(512)], format);
    let len = Some(data.len() as u64);
    let rd = Box::new(std::io::Cursor::new(data));
    (format, Content { rd, len })
}

/// Open a trace. `seed` drives DAMON's expansion of access rates into accesses.
pub fn open(
    path: &str,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<Box<dyn Source>> {
    let (format, content) = file_reader(path, format)?;
    open_reader(path, format, content, csv, seed)
}

/// A trace held in memory (`name` stands for its file name in messages and detection).
pub fn from_bytes(
    name: &str,
    data: Vec<u8>,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<Box<dyn Source>> {
    let (format, content) = bytes_reader(name, data, format);
    open_reader(name, format, content, csv, seed)
}

/// Open a trace of a resolved format from a reader.
fn open_reader(
    path: &str,
    format: TraceFormat,
    content: Content,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<Box<dyn Source>> {
    let rd = content.rd;
    Ok(match format {
        TraceFormat::Auto => unreachable!("resolved by detect"),
        TraceFormat::Text => Box::new(TextSource::new(path, LineCap::new(rd))),
        TraceFormat::Csv => Box::new(CsvSource::new(path, LineCap::new(rd), csv)?),
        TraceFormat::OracleGeneral => {
            let mut rd = BufReader::with_capacity(1 << 16, rd);
            check_oracle_length(path, content.len, &mut rd)?;
            Box::new(OracleSource::new(path, rd))
        }
        TraceFormat::OracleGeneralZst => {
            let dec = zstd::stream::read::Decoder::new(rd)
                .map_err(|e| err(path, 0, format!("not a zstd stream: {e}")))?;
            let rd: Box<dyn Read + Send> = Box::new(dec);
            Box::new(OracleSource::new(
                path,
                BufReader::with_capacity(1 << 16, rd),
            ))
        }
        TraceFormat::Damon => Box::new(DamonSource::new(path, rd, seed)?),
    })
}

/// Check that a trace opens and has a request (validation): an empty trace, a CSV with
/// only a header, or DAMON records without an accessed region are errors.
pub fn probe(path: &str, format: TraceFormat, csv: Option<&CsvColumns>, seed: u64) -> Result<()> {
    let (format, content) = file_reader(path, format)?;
    probe_reader(path, format, content, csv, seed)
}

/// [`probe`] of a trace held in memory.
pub fn probe_bytes(
    name: &str,
    data: Vec<u8>,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<()> {
    let (format, content) = bytes_reader(name, data, format);
    probe_reader(name, format, content, csv, seed)
}

fn probe_reader(
    path: &str,
    format: TraceFormat,
    content: Content,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<()> {
    if format == TraceFormat::Damon {
        // Expanding rates into accesses may take long; a region accessed at a positive
        // rate is what makes requests.
        let d = DamonSource::new(path, content.rd, seed)?;
        if !d.has_accesses() {
            return Err(err(
                path,
                0,
                "no requests: no snapshot has a region with nr_accesses > 0",
            ));
        }
        return Ok(());
    }
    let mut src = open_reader(path, format, content, csv, seed)?;
    match src.next_request()? {
        Some(_) => Ok(()),
        None => Err(err(
            path,
            0,
            match format {
                TraceFormat::Csv if csv.is_none_or(|c| c.header) => {
                    "no requests: a header and no rows"
                }
                _ => "no requests: the trace is empty",
            },
        )),
    }
}

/// Records between two calls of a long loop's `progress` callback.
const PROGRESS_EVERY: u64 = 1 << 20;

/// Requests and distinct objects of a trace (one streaming pass), and the pages those
/// objects span (each object at the size it first had).
/// `seed` is the scenario's (DAMON's expansion draws from it).
pub fn count(
    path: &str,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<(u64, u64, u64)> {
    count_with(path, format, csv, seed, &mut || true)
}

/// [`count`], calling `progress()` every 2^20 requests; false stops with
/// [`Error::Interrupted`].
pub fn count_with(
    path: &str,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
    progress: &mut dyn FnMut() -> bool,
) -> Result<(u64, u64, u64)> {
    let mut src = open(path, format, csv, seed)?;
    let mut map = PageMap::default();
    let mut requests = 0u64;
    let mut batch = Vec::with_capacity(256);
    loop {
        batch.clear();
        // Requests read before an error come first (a bad object before a bad record).
        let read = src.next_batch(&mut batch, 256);
        for r in &batch {
            requests += 1;
            map.map(r).map_err(|m| err(path, requests, m))?;
            if requests.is_multiple_of(PROGRESS_EVERY) && !progress() {
                return Err(Error::Interrupted);
            }
        }
        let more = read?;
        if !more {
            break;
        }
        if batch.is_empty() && !progress() {
            return Err(Error::Interrupted);
        }
    }
    Ok((requests, map.len(), map.pages()))
}
