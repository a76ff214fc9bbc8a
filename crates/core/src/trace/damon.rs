//! DAMON records (damo's JSON) as a trace: region access rates expanded into page
//! accesses drawn from the scenario seed.

use super::{err, Request, Source};
use crate::error::Result;
use crate::scenario::PAGE_SIZE;
use rand::Rng;
use std::io::{BufReader, Read};

/// JSON from the trace in a message, cut after 60 characters.
fn cut(s: String) -> String {
    if s.chars().count() > 60 {
        format!("{}...", s.chars().take(57).collect::<String>())
    } else {
        s
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
pub(super) struct DamonSource {
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
    pub(super) fn new(path: &str, file: impl Read, seed: u64) -> Result<Self> {
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
            snapshots.extend(record_snapshots(path, ri as u64 + 1, r)?);
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

    /// Whether some snapshot has a region accessed at a positive rate (what makes
    /// requests).
    pub(super) fn has_accesses(&self) -> bool {
        self.snapshots.iter().any(|s| !s.is_empty())
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

/// A record's sampling and aggregation intervals [us], and the most samples of one
/// aggregation interval in which a region can be seen accessed.
struct Intervals {
    sample: f64,
    aggr: f64,
    max_acc: f64,
}

/// Record `rec`'s `intervals` (damo's defaults when absent).
fn intervals(path: &str, rec: u64, r: &serde_json::Value) -> Result<Intervals> {
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
    // nr_accesses counts the sampling intervals of one aggregation interval in which
    // DAMON found the region accessed: at most aggr_us / sample_us.
    Ok(Intervals {
        sample,
        aggr,
        max_acc: aggr / sample,
    })
}

/// The snapshots of record `rec`: per snapshot, its regions accessed at a positive rate
/// as (start page, end page, access probability).
fn record_snapshots(
    path: &str,
    rec: u64,
    r: &serde_json::Value,
) -> Result<Vec<Vec<(u64, u64, f64)>>> {
    let iv = intervals(path, rec, r)?;
    let snaps = r
        .get("snapshots")
        .and_then(|s| s.as_array())
        .ok_or_else(|| err(path, rec, "record without a \"snapshots\" list"))?;
    let mut out = Vec::with_capacity(snaps.len());
    for (si, s) in snaps.iter().enumerate() {
        let regions = s
            .get("regions")
            .and_then(|x| x.as_array())
            .ok_or_else(|| err(path, rec, "snapshot without a \"regions\" list"))?;
        let mut snap = Vec::with_capacity(regions.len());
        for (gi, g) in regions.iter().enumerate() {
            snap.extend(region(path, rec, (si, gi), g, &iv)?);
        }
        out.push(snap);
    }
    Ok(out)
}

/// Region `gi` of snapshot `si` of record `rec` as (start page, end page, access
/// probability); None when it was not seen accessed.
fn region(
    path: &str,
    rec: u64,
    (si, gi): (usize, usize),
    g: &serde_json::Value,
    iv: &Intervals,
) -> Result<Option<(u64, u64, f64)>> {
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
    let (max_acc, aggr, sample) = (iv.max_acc, iv.aggr, iv.sample);
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
    let (first, last) = (start as u64 / PAGE_SIZE, (end as u64).div_ceil(PAGE_SIZE));
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
    Ok((p > 0.0).then_some((first, last, p)))
}
