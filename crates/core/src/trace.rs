//! Trace readers for the `trace` workload: plain text, CSV, libCacheSim oracleGeneral
//! (plain or zstd) and DAMON records (damo JSON). Every reader streams its file and yields
//! requests one at a time; a malformed or truncated record is an error naming the file,
//! the record and what is wrong, never a short replay.

use crate::error::{quoted, Error, Result};
use crate::scenario::{CsvColumn, CsvColumns, TraceFormat, PAGE_SIZE};
use rand::Rng;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

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

/// A stream of requests.
pub trait Source {
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

/// Object ids of a trace -> their pages: each new object gets the next `pages` page
/// indices (dense, in order of first appearance) and keeps them. The simulator and the
/// native runner map ids with this one type, so both touch the same pages. Ids below
/// DENSE_IDS are looked up by index (traces usually number objects densely), the rest in
/// a hash map.
pub struct PageMap {
    dense: Vec<(u32, u32)>,
    sparse: rustc_hash::FxHashMap<u64, (u32, u32)>,
    next_page: u64,
    objects: u64,
    /// Most bytes the map and the pages it hands out may take (see [`PageMap::limit`]).
    limit_bytes: u64,
    /// Host bytes each page handed out costs its user (a page-cache entry or a PTE).
    page_bytes: u64,
}

impl Default for PageMap {
    fn default() -> Self {
        PageMap {
            dense: Vec::new(),
            sparse: Default::default(),
            next_page: 0,
            objects: 0,
            limit_bytes: u64::MAX,
            page_bytes: 0,
        }
    }
}

/// Ids below this are looked up by index (8 bytes per id up to the largest seen).
const DENSE_IDS: u64 = 1 << 26;

/// An empty dense slot (no object has zero pages).
const NO_OBJECT: (u32, u32) = (0, 0);

/// Host bytes of one sparse id (a hash entry of 16 bytes at its load factor, and the
/// table's doubling).
const SPARSE_ID_BYTES: u64 = 40;

/// Pages of an object of `size` bytes (at least one).
fn object_pages(size: u64) -> u64 {
    size.div_ceil(PAGE_SIZE).max(1)
}

impl PageMap {
    /// Refuse objects that would take the map, plus `page_bytes` per page handed out,
    /// above `limit_bytes` (the run's memory budget).
    pub fn limit(&mut self, limit_bytes: u64, page_bytes: u64) {
        self.limit_bytes = limit_bytes;
        self.page_bytes = page_bytes;
    }

    /// Host bytes the map and its pages take with `pages` pages and `dense` dense slots.
    fn bytes(&self, pages: u64, dense: u64) -> u64 {
        pages
            .saturating_mul(self.page_bytes)
            .saturating_add(dense * 8)
            .saturating_add(self.sparse.len() as u64 * SPARSE_ID_BYTES)
    }

    /// The (first page, pages) of a known object.
    #[inline]
    pub fn get(&self, id: u64) -> Option<(u32, u32)> {
        if id < DENSE_IDS {
            self.dense.get(id as usize).copied().filter(|v| v.1 != 0)
        } else {
            self.sparse.get(&id).copied()
        }
    }

    /// Start loading an id's slot (no effect on results).
    #[inline]
    pub fn prefetch(&self, id: u64) {
        if let Some(slot) = self.dense.get(id as usize) {
            crate::mm::prefetch(slot);
        }
    }

    /// The pages of a request's object, assigning them if the object is new (then `true`).
    pub fn map(&mut self, req: &Request) -> std::result::Result<(u32, u32, bool), String> {
        if let Some((b, p)) = self.get(req.obj) {
            return Ok((b, p, false));
        }
        let pages = object_pages(req.size);
        let end = self.next_page.saturating_add(pages);
        if end > u32::MAX as u64 {
            return Err(format!(
                "object {} of {} bytes takes the trace's distinct objects to {end} pages: allowed at most {} (page indices are 32-bit)",
                req.obj,
                req.size,
                u32::MAX
            ));
        }
        let dense = if req.obj < DENSE_IDS && req.obj as usize >= self.dense.len() {
            (req.obj + 1).next_power_of_two().min(DENSE_IDS)
        } else {
            self.dense.len() as u64
        };
        let need = self.bytes(end, dense);
        if need > self.limit_bytes {
            return Err(format!(
                "object {} of {} bytes takes the trace's distinct objects to {end} pages, {} MiB of host memory: above the run's memory budget of {} MiB for this trace (--max-memory)",
                req.obj,
                req.size,
                need >> 20,
                self.limit_bytes >> 20
            ));
        }
        let base = self.next_page as u32;
        let pages = pages as u32;
        self.next_page = end;
        self.objects += 1;
        let v = (base, pages);
        if req.obj < DENSE_IDS {
            let i = req.obj as usize;
            if i >= self.dense.len() {
                self.dense.resize(dense as usize, NO_OBJECT);
            }
            self.dense[i] = v;
        } else {
            self.sparse.insert(req.obj, v);
        }
        Ok((base, pages, true))
    }

    /// Distinct objects seen.
    pub fn len(&self) -> u64 {
        self.objects
    }

    pub fn is_empty(&self) -> bool {
        self.objects == 0
    }

    /// Pages assigned so far.
    pub fn pages(&self) -> u64 {
        self.next_page
    }
}

/// Bytes of one oracleGeneral record.
pub const ORACLE_GENERAL_RECORD: usize = 24;

/// zstd's frame magic number, little-endian.
const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// JSON from the trace in a message, cut after 60 characters.
fn cut(s: String) -> String {
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
    }
}

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
    rd: Box<dyn Read>,
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

/// An uncompressed oracleGeneral trace is a whole number of records: a length that is
/// not is refused before any record is read (else garbage read as records, e.g. a
/// compressed file, would replay until the run's end without reaching the partial
/// record at its tail). The error names the partial record as reading would. `rd` is
/// peeked at (nothing consumed) to say so when the content is zstd-compressed.
fn check_oracle_length(path: &str, len: Option<u64>, rd: &mut impl BufRead) -> Result<()> {
    let rec = ORACLE_GENERAL_RECORD as u64;
    let Some(len) = len.filter(|l| l % rec != 0) else {
        return Ok(());
    };
    let zstd = rd.fill_buf().is_ok_and(|b| b.starts_with(&ZSTD_MAGIC));
    Err(err(
        path,
        len / rec + 1,
        format!(
            "truncated: {} of {ORACLE_GENERAL_RECORD} bytes: the file's {len} bytes are not a whole number of {ORACLE_GENERAL_RECORD}-byte oracleGeneral records{}",
            len % rec,
            if zstd {
                " (it starts with zstd's magic number: a compressed trace is format = \"oracle_general_zst\")"
            } else {
                ""
            }
        ),
    ))
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
        TraceFormat::Text => Box::new(TextSource {
            file: path.into(),
            rd: BufReader::with_capacity(1 << 16, LineCap { inner: rd, run: 0 }),
            line: String::new(),
            record: 0,
        }),
        TraceFormat::Csv => Box::new(CsvSource::new(path, LineCap { inner: rd, run: 0 }, csv)?),
        TraceFormat::OracleGeneral => {
            let mut rd = BufReader::with_capacity(1 << 16, rd);
            check_oracle_length(path, content.len, &mut rd)?;
            Box::new(OracleSource {
                file: path.into(),
                rd,
                record: 0,
            })
        }
        TraceFormat::OracleGeneralZst => {
            let dec = zstd::stream::read::Decoder::new(rd)
                .map_err(|e| err(path, 0, format!("not a zstd stream: {e}")))?;
            Box::new(OracleSource {
                file: path.into(),
                rd: BufReader::with_capacity(1 << 16, Box::new(dec)),
                record: 0,
            })
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
        if d.snapshots.iter().all(|s| s.is_empty()) {
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

/// One id per line.
struct TextSource {
    file: String,
    rd: BufReader<LineCap<Box<dyn Read>>>,
    line: String,
    record: u64,
}

fn parse_id(s: &str) -> Option<u64> {
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

/// CSV with mapped columns.
struct CsvSource {
    file: String,
    rd: csv::Reader<LineCap<Box<dyn Read>>>,
    rec: csv::StringRecord,
    obj_id: usize,
    obj_size: Option<usize>,
    op: Option<usize>,
    time: Option<usize>,
    record: u64,
}

impl CsvSource {
    fn new(path: &str, file: LineCap<Box<dyn Read>>, cols: Option<&CsvColumns>) -> Result<Self> {
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
                let o = self.field(i, "op")?.to_ascii_lowercase();
                matches!(
                    o.as_str(),
                    "write" | "set" | "put" | "update" | "w" | "add" | "replace"
                )
            }
            None => false,
        };
        Ok(Some(Request { obj, size, write }))
    }
}

/// libCacheSim oracleGeneral records.
struct OracleSource {
    file: String,
    rd: BufReader<Box<dyn Read>>,
    record: u64,
}

impl Source for OracleSource {
    fn next_request(&mut self) -> Result<Option<Request>> {
        let mut rec = [0u8; ORACLE_GENERAL_RECORD];
        // Fast path: a whole record in the buffer.
        let buf = self
            .rd
            .fill_buf()
            .map_err(|e| err(&self.file, self.record + 1, e.to_string()))?;
        self.record += 1;
        if buf.len() >= ORACLE_GENERAL_RECORD {
            rec.copy_from_slice(&buf[..ORACLE_GENERAL_RECORD]);
            self.rd.consume(ORACLE_GENERAL_RECORD);
        } else {
            let mut got = 0;
            while got < rec.len() {
                match self.rd.read(&mut rec[got..]) {
                    Ok(0) => break,
                    Ok(n) => got += n,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(err(&self.file, self.record, e.to_string())),
                }
            }
            if got == 0 {
                return Ok(None);
            }
            if got < rec.len() {
                return Err(err(
                    &self.file,
                    self.record,
                    format!("truncated: {got} of {ORACLE_GENERAL_RECORD} bytes"),
                ));
            }
        }
        Ok(Some(oracle_request(&rec)))
    }

    /// Decode whole records straight from the read buffer; a record that straddles the
    /// buffer's end (or a truncated tail) goes through `next_request`.
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<bool> {
        let mut n = 0;
        while n < max {
            let buf = self
                .rd
                .fill_buf()
                .map_err(|e| err(&self.file, self.record + 1, e.to_string()))?;
            let whole = (buf.len() / ORACLE_GENERAL_RECORD).min(max - n);
            if whole == 0 {
                match self.next_request()? {
                    Some(r) => out.push(r),
                    None => return Ok(false),
                }
                n += 1;
                continue;
            }
            let bytes = whole * ORACLE_GENERAL_RECORD;
            out.extend(
                buf[..bytes]
                    .chunks_exact(ORACLE_GENERAL_RECORD)
                    .map(oracle_request),
            );
            self.rd.consume(bytes);
            self.record += whole as u64;
            n += whole;
        }
        Ok(true)
    }
}

/// One oracleGeneral record (u32 time, u64 obj_id, u32 obj_size, i64 next access) as a
/// request; size 0 means one page.
#[inline]
fn oracle_request(rec: &[u8]) -> Request {
    let obj = u64::from_le_bytes(rec[4..12].try_into().expect("8 bytes"));
    let size = u32::from_le_bytes(rec[12..16].try_into().expect("4 bytes")) as u64;
    Request {
        obj,
        size: if size == 0 { PAGE_SIZE } else { size },
        write: false,
    }
}

/// DAMON records (damo's JSON): a list of records, each with `intervals` (`sample_us` <=
/// `aggr_us`) and `snapshots`, each snapshot a list of `regions` (`start`, `end` byte
/// addresses, `nr_accesses`: the number of samples of the aggregation interval in which
/// the region was seen accessed, as a number or as `{"samples": n}`, at most
/// aggr_us / sample_us). A snapshot becomes one pass over its regions' pages: each page
/// of a region is accessed once with probability nr_accesses / (aggr_us / sample_us),
/// drawn from the scenario seed; page ids are address / 4096. The records are loaded
/// whole (they are region histograms, far smaller than the accesses they expand to); the
/// accesses are streamed.
struct DamonSource {
    file: String,
    /// (start page, end page, access probability) per region, snapshot by snapshot.
    snapshots: Vec<Vec<(u64, u64, f64)>>,
    snap: usize,
    region: usize,
    page: u64,
    rng: crate::engine::rng::Rng,
    record: u64,
}

fn num(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::Number(n) => n.as_f64(),
        serde_json::Value::String(s) => s.trim().parse().ok(),
        serde_json::Value::Object(o) => o.get("samples").and_then(num),
        _ => None,
    }
}

/// 2^64 as f64 (exact): DAMON addresses are 64-bit.
const TWO_64: f64 = 18_446_744_073_709_551_616.0;

/// Pages a DAMON trace's expansion visits per `next_batch` call at most, so that a
/// region accessed at a tiny rate returns control (to the interrupt check) regularly.
const DAMON_VISITS_PER_BATCH: u64 = 1 << 16;

impl DamonSource {
    fn new(path: &str, file: impl Read, seed: u64) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_reader(BufReader::new(file))
            .map_err(|e| err(path, 0, format!("not DAMON records (damo JSON): {e}")))?;
        let one;
        let records: &[serde_json::Value] = match &v {
            serde_json::Value::Array(a) => a,
            serde_json::Value::Object(o) if o.contains_key("snapshots") => {
                one = [v.clone()];
                &one
            }
            _ => {
                return Err(err(
                    path,
                    0,
                    "expected a list of damo records with \"snapshots\"",
                ))
            }
        };
        let mut snapshots = Vec::new();
        for (ri, r) in records.iter().enumerate() {
            let rec = ri as u64 + 1;
            let iv = r.get("intervals");
            let interval = |name: &str, default: f64| -> Result<f64> {
                match iv.and_then(|i| i.get(name)) {
                    None => Ok(default),
                    Some(x) => match num(x) {
                        Some(t) if t > 0.0 && t.is_finite() => Ok(t),
                        _ => Err(err(
                            path,
                            rec,
                            format!("intervals.{name} {x}: expected a number of microseconds > 0"),
                        )),
                    },
                }
            };
            let sample = interval("sample_us", 5000.0)?;
            let aggr = interval("aggr_us", 100_000.0)?;
            // DAMON refuses a sampling interval longer than the aggregation interval
            // (damon_set_attrs: -EINVAL).
            if sample > aggr {
                return Err(err(
                    path,
                    rec,
                    format!(
                        "intervals.sample_us {sample} above aggr_us {aggr}: allowed sample_us <= aggr_us (an aggregation interval holds whole sampling intervals)"
                    ),
                ));
            }
            // nr_accesses counts the sampling intervals of one aggregation interval in
            // which DAMON found the region accessed: at most aggr_us / sample_us.
            let max_acc = aggr / sample;
            let snaps = r
                .get("snapshots")
                .and_then(|s| s.as_array())
                .ok_or_else(|| err(path, rec, "record without a \"snapshots\" list"))?;
            for (si, s) in snaps.iter().enumerate() {
                let regions = s
                    .get("regions")
                    .and_then(|x| x.as_array())
                    .ok_or_else(|| err(path, rec, "snapshot without a \"regions\" list"))?;
                let mut out = Vec::with_capacity(regions.len());
                for (gi, g) in regions.iter().enumerate() {
                    let start = g.get("start").and_then(num);
                    let end = g.get("end").and_then(num);
                    let acc = g.get("nr_accesses").and_then(num);
                    let (Some(start), Some(end), Some(acc)) = (start, end, acc) else {
                        return Err(err(
                            path,
                            rec,
                            format!(
                                "region {} lacks numeric start, end or nr_accesses",
                                cut(g.to_string())
                            ),
                        ));
                    };
                    if !(0.0..TWO_64).contains(&start) || !(0.0..TWO_64).contains(&end) {
                        return Err(err(
                            path,
                            rec,
                            format!("region [{start}, {end}): addresses must be in 0..2^64"),
                        ));
                    }
                    if end < start {
                        return Err(err(
                            path,
                            rec,
                            format!("region end {end} before start {start}"),
                        ));
                    }
                    if !(acc >= 0.0 && acc.is_finite()) {
                        return Err(err(
                            path,
                            rec,
                            format!("region nr_accesses {acc}: expected a count >= 0"),
                        ));
                    }
                    if acc > max_acc {
                        let shown = g
                            .get("nr_accesses")
                            .map_or(String::new(), |x| cut(x.to_string()));
                        return Err(err(
                            path,
                            rec,
                            format!(
                                "snapshot {} region {}: nr_accesses {shown}: allowed 0..={max_acc} (aggr_us / sample_us = {aggr} / {sample}: the sampling intervals of one aggregation interval, in which DAMON counts the region's accesses)",
                                si + 1,
                                gi + 1
                            ),
                        ));
                    }
                    let (first, last) =
                        (start as u64 / PAGE_SIZE, (end as u64).div_ceil(PAGE_SIZE));
                    if last - first > u32::MAX as u64 {
                        return Err(err(
                            path,
                            rec,
                            format!(
                                "region [{start}, {end}) spans {} pages: allowed at most {} (16 TiB; page indices are 32-bit)",
                                last - first,
                                u32::MAX
                            ),
                        ));
                    }
                    let p = acc / max_acc;
                    if p > 0.0 {
                        out.push((first, last, p));
                    }
                }
                snapshots.push(out);
            }
        }
        Ok(DamonSource {
            file: path.into(),
            snapshots,
            snap: 0,
            region: 0,
            page: u64::MAX,
            rng: crate::engine::rng::stream(seed, u64::MAX - 2),
            record: 0,
        })
    }

    /// The next accessed page, visiting at most `*visits` pages (counted down); None at
    /// the end of the trace or when the visits run out (then `*visits` is 0).
    fn next_page(&mut self, visits: &mut u64) -> Option<Request> {
        loop {
            let snap = self.snapshots.get(self.snap)?;
            let Some(&(start, end, p)) = snap.get(self.region) else {
                self.snap += 1;
                self.region = 0;
                self.page = u64::MAX;
                continue;
            };
            if self.page == u64::MAX {
                self.page = start;
            }
            if self.page >= end {
                self.region += 1;
                self.page = u64::MAX;
                continue;
            }
            if *visits == 0 {
                return None;
            }
            *visits -= 1;
            let page = self.page;
            self.page += 1;
            if p >= 1.0 || self.rng.random::<f64>() < p {
                return Some(Request {
                    obj: page,
                    size: PAGE_SIZE,
                    write: false,
                });
            }
        }
    }
}

impl Source for DamonSource {
    fn next_request(&mut self) -> Result<Option<Request>> {
        let _ = (&self.file, self.record);
        let mut unlimited = u64::MAX;
        Ok(self.next_page(&mut unlimited))
    }

    /// Up to `max` accesses, visiting at most DAMON_VISITS_PER_BATCH pages: a region
    /// accessed at a tiny rate may yield none, and the caller comes back.
    fn next_batch(&mut self, out: &mut Vec<Request>, max: usize) -> Result<bool> {
        let mut visits = DAMON_VISITS_PER_BATCH;
        for _ in 0..max {
            match self.next_page(&mut visits) {
                Some(r) => out.push(r),
                None if visits == 0 => return Ok(true),
                None => return Ok(false),
            }
        }
        Ok(true)
    }
}

/// Records between two calls of a long loop's `progress` callback.
const PROGRESS_EVERY: u64 = 1 << 20;

/// Write a zipf(`theta`) trace of `requests` requests over `objects` 4 KiB objects in
/// oracleGeneral format (zstd-compressed when `path` ends in .zst); object ids are
/// ranks 1..=objects shuffled by a seeded permutation so that popularity is not ordered
/// by id. Returns the bytes written. The permutation takes 4 bytes per object: more than
/// `max_memory` (None: the machine's available memory) is refused. `progress()` is
/// called every 2^20 records; false stops with [`Error::Interrupted`].
pub fn write_zipf_oracle(
    path: &str,
    objects: u64,
    requests: u64,
    theta: f64,
    seed: u64,
    max_memory: Option<u64>,
    progress: &mut dyn FnMut() -> bool,
) -> Result<u64> {
    use rand::seq::SliceRandom;
    use rand_distr::{Distribution, Zipf};
    use std::io::Write;
    if objects == 0 || objects > u32::MAX as u64 {
        return Err(Error::scenario(
            "trace-gen --objects",
            format!("{objects}: allowed 1..=4294967295"),
        ));
    }
    let perm_bytes = objects * 4;
    if let Some(limit) = max_memory.or_else(crate::budget::available_memory) {
        if perm_bytes > limit {
            return Err(Error::scenario(
                "trace-gen --objects",
                format!(
                    "{objects}: shuffling the ids takes {} MiB (4 bytes per object), more than the {} MiB of memory available: allowed up to {} objects here",
                    perm_bytes >> 20,
                    limit >> 20,
                    limit / 4
                ),
            ));
        }
    }
    let z = Zipf::new(objects as f64, theta).map_err(|e| {
        Error::scenario(
            "trace-gen --zipf",
            format!("{theta}: {e}; allowed a finite number > 0"),
        )
    })?;
    let mut rng = crate::engine::rng::stream(seed, 0);
    let mut perm: Vec<u32> = (1..=objects as u32).collect();
    perm.shuffle(&mut rng);
    let f = File::create(path).map_err(|e| err(path, 0, e.to_string()))?;
    let mut out: Box<dyn Write> = if path.ends_with(".zst") {
        Box::new(
            zstd::stream::write::Encoder::new(f, 3)
                .map_err(|e| err(path, 0, e.to_string()))?
                .auto_finish(),
        )
    } else {
        Box::new(std::io::BufWriter::with_capacity(1 << 20, f))
    };
    let mut rec = [0u8; ORACLE_GENERAL_RECORD];
    for i in 0..requests {
        if i % PROGRESS_EVERY == PROGRESS_EVERY - 1 && !progress() {
            return Err(Error::Interrupted);
        }
        let rank = (z.sample(&mut rng) as u64).clamp(1, objects);
        let obj = perm[(rank - 1) as usize] as u64;
        rec[0..4].copy_from_slice(&(i as u32).to_le_bytes());
        rec[4..12].copy_from_slice(&obj.to_le_bytes());
        rec[12..16].copy_from_slice(&(PAGE_SIZE as u32).to_le_bytes());
        rec[16..24].copy_from_slice(&(-1i64).to_le_bytes());
        out.write_all(&rec)
            .map_err(|e| err(path, i + 1, e.to_string()))?;
    }
    out.flush()
        .map_err(|e| err(path, requests, e.to_string()))?;
    drop(out);
    Ok(requests * ORACLE_GENERAL_RECORD as u64)
}

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
