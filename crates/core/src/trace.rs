//! Trace readers for the `trace` workload: plain text, CSV, libCacheSim oracleGeneral
//! (plain or zstd) and DAMON records (damo JSON). Every reader streams its file and yields
//! requests one at a time; a malformed or truncated record is an error naming the file,
//! the record and what is wrong, never a short replay.

use crate::error::{Error, Result};
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
#[derive(Default)]
pub struct PageMap {
    dense: Vec<(u32, u32)>,
    sparse: rustc_hash::FxHashMap<u64, (u32, u32)>,
    next_page: u64,
    objects: u64,
}

/// Ids below this are looked up by index (8 bytes per id up to the largest seen).
const DENSE_IDS: u64 = 1 << 26;

/// An empty dense slot (no object has zero pages).
const NO_OBJECT: (u32, u32) = (0, 0);

impl PageMap {
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
        let pages = req.pages();
        if self.next_page + pages as u64 > u32::MAX as u64 {
            return Err("more than 2^32 distinct pages".into());
        }
        let base = self.next_page as u32;
        self.next_page += pages as u64;
        self.objects += 1;
        let v = (base, pages);
        if req.obj < DENSE_IDS {
            let i = req.obj as usize;
            if i >= self.dense.len() {
                let n = (i + 1).next_power_of_two().min(DENSE_IDS as usize);
                self.dense.resize(n, NO_OBJECT);
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

fn err(file: &str, record: u64, msg: impl Into<String>) -> Error {
    Error::Trace {
        file: file.into(),
        record,
        msg: msg.into(),
    }
}

/// The format of `path`: `format` unless auto, else from the name, else from the content.
pub fn detect(path: &str, format: TraceFormat) -> Result<TraceFormat> {
    if format != TraceFormat::Auto {
        return Ok(format);
    }
    let lower = path.to_ascii_lowercase();
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
            return Ok(f);
        }
    }
    let mut head = [0u8; 512];
    let n = File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .map_err(|e| err(path, 0, e.to_string()))?;
    let head = &head[..n];
    if head.starts_with(&ZSTD_MAGIC) {
        return Ok(TraceFormat::OracleGeneralZst);
    }
    let trimmed = head.iter().skip_while(|b| b.is_ascii_whitespace()).copied();
    match trimmed.clone().next() {
        Some(b'[') | Some(b'{') => return Ok(TraceFormat::Damon),
        None => return Ok(TraceFormat::Text),
        _ => {}
    }
    if head
        .iter()
        .all(|b| b.is_ascii_graphic() || b.is_ascii_whitespace())
    {
        return Ok(if head.contains(&b',') {
            TraceFormat::Csv
        } else {
            TraceFormat::Text
        });
    }
    Ok(TraceFormat::OracleGeneral)
}

/// Open a trace. `seed` drives DAMON's expansion of access rates into accesses.
pub fn open(
    path: &str,
    format: TraceFormat,
    csv: Option<&CsvColumns>,
    seed: u64,
) -> Result<Box<dyn Source>> {
    let format = detect(path, format)?;
    let file = File::open(Path::new(path)).map_err(|e| err(path, 0, e.to_string()))?;
    Ok(match format {
        TraceFormat::Auto => unreachable!("resolved by detect"),
        TraceFormat::Text => Box::new(TextSource {
            file: path.into(),
            rd: BufReader::with_capacity(1 << 16, file),
            line: String::new(),
            record: 0,
        }),
        TraceFormat::Csv => Box::new(CsvSource::new(path, file, csv)?),
        TraceFormat::OracleGeneral => Box::new(OracleSource {
            file: path.into(),
            rd: BufReader::with_capacity(1 << 16, Box::new(file)),
            record: 0,
        }),
        TraceFormat::OracleGeneralZst => {
            let dec = zstd::stream::read::Decoder::new(file)
                .map_err(|e| err(path, 0, format!("not a zstd stream: {e}")))?;
            Box::new(OracleSource {
                file: path.into(),
                rd: BufReader::with_capacity(1 << 16, Box::new(dec)),
                record: 0,
            })
        }
        TraceFormat::Damon => Box::new(DamonSource::new(path, file, seed)?),
    })
}

/// One id per line.
struct TextSource {
    file: String,
    rd: BufReader<File>,
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
                        "{t:?} is not a page or object id (an unsigned integer, decimal or 0x hex)"
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
    rd: csv::Reader<File>,
    rec: csv::StringRecord,
    obj_id: usize,
    obj_size: Option<usize>,
    op: Option<usize>,
    time: Option<usize>,
    record: u64,
}

impl CsvSource {
    fn new(path: &str, file: File, cols: Option<&CsvColumns>) -> Result<Self> {
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
                            "no column {name:?} for {what} in the header; columns: {}",
                            headers.join(", ")
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
                format!("obj_id {id:?} is not an unsigned integer"),
            )
        })?;
        let size = match self.obj_size {
            Some(i) => {
                let s = self.field(i, "obj_size")?;
                s.parse::<u64>().map_err(|_| {
                    err(
                        &self.file,
                        self.record,
                        format!("obj_size {s:?} is not a size in bytes"),
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
                    format!("time {t:?} is not a number"),
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

/// DAMON records (damo's JSON): a list of records, each with `intervals` (`sample_us`,
/// `aggr_us`) and `snapshots`, each snapshot a list of `regions` (`start`, `end` byte
/// addresses, `nr_accesses`: the number of samples of the aggregation interval in which
/// the region was seen accessed, as a number or as `{"samples": n}`). A snapshot becomes
/// one pass over its regions' pages: each page of a region is accessed once with
/// probability nr_accesses / (aggr_us / sample_us), drawn from the scenario seed; page
/// ids are address / 4096. The records are loaded whole (they are region histograms, far
/// smaller than the accesses they expand to); the accesses are streamed.
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

impl DamonSource {
    fn new(path: &str, file: File, seed: u64) -> Result<Self> {
        let v: serde_json::Value = serde_json::from_reader(BufReader::new(file))
            .map_err(|e| err(path, 0, format!("not DAMON records (damo JSON): {e}")))?;
        let records = match &v {
            serde_json::Value::Array(a) => a.clone(),
            serde_json::Value::Object(o) if o.contains_key("snapshots") => vec![v.clone()],
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
            let sample = iv
                .and_then(|i| i.get("sample_us"))
                .and_then(num)
                .unwrap_or(5000.0);
            let aggr = iv
                .and_then(|i| i.get("aggr_us"))
                .and_then(num)
                .unwrap_or(100_000.0);
            let max_acc = (aggr / sample).max(1.0);
            let snaps = r
                .get("snapshots")
                .and_then(|s| s.as_array())
                .ok_or_else(|| err(path, rec, "record without a \"snapshots\" list"))?;
            for s in snaps {
                let regions = s
                    .get("regions")
                    .and_then(|x| x.as_array())
                    .ok_or_else(|| err(path, rec, "snapshot without a \"regions\" list"))?;
                let mut out = Vec::with_capacity(regions.len());
                for g in regions {
                    let start = g.get("start").and_then(num);
                    let end = g.get("end").and_then(num);
                    let acc = g.get("nr_accesses").and_then(num);
                    let (Some(start), Some(end), Some(acc)) = (start, end, acc) else {
                        return Err(err(
                            path,
                            rec,
                            format!("region {g} lacks numeric start, end or nr_accesses"),
                        ));
                    };
                    if end < start {
                        return Err(err(
                            path,
                            rec,
                            format!("region end {end} before start {start}"),
                        ));
                    }
                    let p = (acc / max_acc).clamp(0.0, 1.0);
                    if p > 0.0 {
                        out.push((
                            start as u64 / PAGE_SIZE,
                            (end as u64).div_ceil(PAGE_SIZE),
                            p,
                        ));
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
}

impl Source for DamonSource {
    fn next_request(&mut self) -> Result<Option<Request>> {
        let _ = (&self.file, self.record);
        loop {
            let Some(snap) = self.snapshots.get(self.snap) else {
                return Ok(None);
            };
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
            let page = self.page;
            self.page += 1;
            if p >= 1.0 || self.rng.random::<f64>() < p {
                return Ok(Some(Request {
                    obj: page,
                    size: PAGE_SIZE,
                    write: false,
                }));
            }
        }
    }
}

/// Write a zipf(`theta`) trace of `requests` requests over `objects` 4 KiB objects in
/// oracleGeneral format (zstd-compressed when `path` ends in .zst); object ids are
/// ranks 1..=objects shuffled by a seeded permutation so that popularity is not ordered
/// by id. Returns the bytes written.
pub fn write_zipf_oracle(
    path: &str,
    objects: u64,
    requests: u64,
    theta: f64,
    seed: u64,
) -> Result<u64> {
    use rand::seq::SliceRandom;
    use rand_distr::{Distribution, Zipf};
    use std::io::Write;
    let bad = |m: String| Error::scenario("trace-gen", m);
    if objects == 0 || objects > u32::MAX as u64 {
        return Err(bad(format!("{objects} objects: allowed 1..=4294967295")));
    }
    let z =
        Zipf::new(objects as f64, theta).map_err(|e| bad(format!("zipf theta {theta}: {e}")))?;
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
    let mut src = open(path, format, csv, seed)?;
    let mut map = PageMap::default();
    let mut requests = 0u64;
    while let Some(r) = src.next_request()? {
        requests += 1;
        map.map(&r).map_err(|m| err(path, requests, m))?;
    }
    Ok((requests, map.len(), map.pages()))
}
