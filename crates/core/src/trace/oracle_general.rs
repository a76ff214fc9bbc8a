//! libCacheSim's oracleGeneral traces (24-byte little-endian records, plain or
//! zstd-compressed), and a writer of synthetic zipf traces in that format.

use super::{err, Request, Source, PROGRESS_EVERY};
use crate::error::{Error, Result};
use crate::scenario::PAGE_SIZE;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};

/// Bytes of one oracleGeneral record.
pub const ORACLE_GENERAL_RECORD: usize = 24;

/// zstd's frame magic number, little-endian.
pub(super) const ZSTD_MAGIC: [u8; 4] = [0x28, 0xb5, 0x2f, 0xfd];

/// An uncompressed oracleGeneral trace is a whole number of records: a length that is
/// not is refused before any record is read (else garbage read as records, e.g. a
/// compressed file, would replay until the run's end without reaching the partial
/// record at its tail). The error names the partial record as reading would. `rd` is
/// peeked at (nothing consumed) to say so when the content is zstd-compressed.
pub(super) fn check_oracle_length(
    path: &str,
    len: Option<u64>,
    rd: &mut impl BufRead,
) -> Result<()> {
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
/// libCacheSim oracleGeneral records.
pub(super) struct OracleSource {
    file: String,
    rd: BufReader<Box<dyn Read + Send>>,
    record: u64,
}

impl OracleSource {
    pub(super) fn new(path: &str, rd: BufReader<Box<dyn Read + Send>>) -> Self {
        OracleSource {
            file: path.into(),
            rd,
            record: 0,
        }
    }
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

/// The ids 1..=n in the order `rng` shuffles them (rand's Fisher-Yates), and the stream
/// after it. Millions of ids take seconds, billions minutes: the shuffle runs on a thread
/// of its own while this one asks `progress` every 50 ms, so Ctrl-C stops it (the thread,
/// left behind, frees its ids when it ends).
fn shuffled_ids(
    n: u32,
    mut rng: crate::engine::rng::Rng,
    progress: &mut dyn FnMut() -> bool,
) -> Result<(Vec<u32>, crate::engine::rng::Rng)> {
    use rand::seq::SliceRandom;
    let job = std::thread::spawn(move || {
        let mut perm: Vec<u32> = (1..=n).collect();
        perm.shuffle(&mut rng);
        (perm, rng)
    });
    while !job.is_finished() {
        std::thread::sleep(std::time::Duration::from_millis(50));
        if !progress() {
            return Err(Error::Interrupted);
        }
    }
    job.join()
        .map_err(|_| Error::Internal("trace-gen: the shuffle of the ids failed".into()))
}

/// Write a zipf(`theta`) trace of `requests` requests over `objects` 4 KiB objects in
/// oracleGeneral format (zstd-compressed when `path` ends in .zst); object ids are
/// ranks 1..=objects shuffled by a seeded permutation so that popularity is not ordered
/// by id. Returns the bytes written. The permutation takes 4 bytes per object: more than
/// `max_memory` (None: the memory this process may take, budget::available_memory) is
/// refused. `progress()` is called every 2^20 records and every 50 ms of the shuffle;
/// false stops with [`Error::Interrupted`].
pub fn write_zipf_oracle(
    path: &str,
    objects: u64,
    requests: u64,
    theta: f64,
    seed: u64,
    max_memory: Option<u64>,
    progress: &mut dyn FnMut() -> bool,
) -> Result<u64> {
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
    let rng = crate::engine::rng::stream(seed, crate::engine::streams::TRACE_GEN_STREAM);
    let (perm, mut rng) = shuffled_ids(objects as u32, rng, progress)?;
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
