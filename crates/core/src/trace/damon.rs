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
/// drawn from the scenario seed; page ids are address / 4096. The file is parsed as a
/// stream, one region at a time, keeping 24 bytes per region accessed at a positive rate
/// (a region is 35 bytes of JSON at least, so less than the file's size; the budget
/// counts the file's size); the accesses are expanded as the replay asks for them.
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
        let snapshots = parse(path, file)?;
        Ok(DamonSource {
            file: path.into(),
            snapshots,
            snap: 0,
            region: 0,
            page: u64::MAX,
            rng: crate::engine::rng::stream(seed, crate::engine::streams::DAMON_STREAM),
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

/// Record `rec`'s `intervals` object (damo's defaults when absent).
fn intervals(path: &str, rec: u64, iv: Option<&serde_json::Value>) -> Result<Intervals> {
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

/// The snapshots of every record of a damo JSON file (a list of records, or one record):
/// per snapshot, its regions accessed at a positive rate as (start page, end page,
/// access probability). Parsed as a stream (see [`walk`]); a problem found in a record is
/// its own one-line error, anything else the JSON parser's.
fn parse(path: &str, file: impl Read) -> Result<Vec<Vec<(u64, u64, f64)>>> {
    let mut w = walk::Walk::new(path);
    w.wrong_type = Some(err(
        path,
        0,
        "expected a list of damo records with \"snapshots\"",
    ));
    let mut de = serde_json::Deserializer::from_reader(BufReader::new(file));
    let parsed =
        serde::de::DeserializeSeed::deserialize(walk::Top(&mut w), &mut de).and_then(|()| de.end());
    match (parsed, w.error.take(), w.wrong_type.take()) {
        (_, Some(e), _) => Err(e),
        // A value of the wrong JSON type where a list or an object belongs.
        (Err(e), None, Some(t)) if e.classify() == serde_json::error::Category::Data => Err(t),
        (Err(e), None, _) => Err(err(path, 0, format!("not DAMON records (damo JSON): {e}"))),
        (Ok(()), None, _) => Ok(w.snapshots),
    }
}

/// Region `g` as (start page, end page, nr_accesses), with the checks that need no
/// intervals; None when it was not seen accessed. Its access probability is nr_accesses
/// / max_acc once the record's intervals are known ([`check_rate`]).
fn region_pages(path: &str, rec: u64, g: &serde_json::Value) -> Result<Option<(u64, u64, f64)>> {
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
    Ok((acc > 0.0).then_some((first, last, acc)))
}

/// Region `gi` of snapshot `si`'s nr_accesses `acc` (shown as `shown`, the trace's own
/// text) against the record's intervals; its access probability.
fn check_rate(
    path: &str,
    rec: u64,
    (si, gi): (usize, usize),
    acc: f64,
    shown: &dyn Fn() -> String,
    iv: &Intervals,
) -> Result<f64> {
    let (max_acc, aggr, sample) = (iv.max_acc, iv.aggr, iv.sample);
    if acc > max_acc {
        return Err(err(
            path,
            rec,
            format!(
                "snapshot {} region {}: nr_accesses {}: allowed 0..={max_acc} (aggr_us / sample_us = {aggr} / {sample}: the sampling intervals of one aggregation interval, in which DAMON counts the region's accesses)",
                si + 1,
                gi + 1,
                shown()
            ),
        ));
    }
    Ok(acc / max_acc)
}

/// The streaming parse: serde visitors over the file's structure that keep only the
/// regions, each region read as a small JSON value and dropped once checked. A record's
/// `intervals` usually come before its `snapshots` (damo writes them so) and each
/// region's rate is checked as it is read; where they come after, the record's regions
/// keep their nr_accesses until the record ends.
mod walk {
    use super::{check_rate, err, intervals, region_pages, Intervals};
    use crate::error::Error;
    use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
    use std::fmt;

    type Kept = Vec<(u64, u64, f64)>;

    pub(super) struct Walk<'p> {
        path: &'p str,
        pub(super) snapshots: Vec<Kept>,
        /// The first problem found in a record (the parser is stopped with a stand-in).
        pub(super) error: Option<Error>,
        /// What a value of the wrong JSON type where the walk now is means (the parser's
        /// own "invalid type" is replaced by it).
        pub(super) wrong_type: Option<Error>,
    }

    impl<'p> Walk<'p> {
        pub(super) fn new(path: &'p str) -> Self {
            Walk {
                path,
                snapshots: Vec::new(),
                error: None,
                wrong_type: None,
            }
        }

        /// Keep `e` and stop the parser.
        fn fail<E: serde::de::Error>(&mut self, e: Error) -> E {
            self.error = Some(e);
            E::custom("stopped")
        }

        fn not_records(&self) -> Error {
            err(
                self.path,
                0,
                "expected a list of damo records with \"snapshots\"",
            )
        }

        fn no_snapshots(&self, rec: u64) -> Error {
            match rec {
                0 => self.not_records(),
                _ => err(self.path, rec, "record without a \"snapshots\" list"),
            }
        }

        fn no_regions(&self, rec: u64) -> Error {
            err(self.path, rec.max(1), "snapshot without a \"regions\" list")
        }
    }

    /// Implements DeserializeSeed by asking for any value (the visitor says which).
    macro_rules! seed {
        ($t:ty, $v:ty) => {
            impl<'de> DeserializeSeed<'de> for $t {
                type Value = $v;
                fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<$v, D::Error> {
                    d.deserialize_any(self)
                }
            }
        };
    }

    /// The file: a list of records, or one record (an object with `snapshots`).
    pub(super) struct Top<'w, 'p>(pub(super) &'w mut Walk<'p>);
    seed!(Top<'_, '_>, ());

    impl<'de> Visitor<'de> for Top<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of damo records")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            for rec in 1.. {
                self.0.wrong_type = Some(self.0.no_snapshots(rec));
                if seq
                    .next_element_seed(Record {
                        w: &mut *self.0,
                        rec,
                    })?
                    .is_none()
                {
                    break;
                }
            }
            Ok(())
        }
        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
            // rec 0: the file's only value, without `snapshots` no damo file at all.
            Record { w: self.0, rec: 0 }.visit_map(map)
        }
    }

    /// Record `rec`: its `intervals` and `snapshots`, other keys skipped.
    struct Record<'w, 'p> {
        w: &'w mut Walk<'p>,
        rec: u64,
    }
    seed!(Record<'_, '_>, ());

    impl<'de> Visitor<'de> for Record<'_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a damo record")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let (w, rec) = (self.w, self.rec);
            let shown = rec.max(1);
            let mut iv: Option<Intervals> = None;
            let mut late: Vec<Late> = Vec::new();
            let mut seen = false;
            while let Some(key) = map.next_key::<String>()? {
                match key.as_str() {
                    "intervals" => {
                        let v: serde_json::Value = map.next_value()?;
                        iv = Some(intervals(w.path, shown, Some(&v)).map_err(|e| w.fail(e))?);
                    }
                    "snapshots" => {
                        seen = true;
                        w.wrong_type = Some(w.no_snapshots(shown));
                        let iv = iv.as_ref();
                        map.next_value_seed(Snapshots {
                            w: &mut *w,
                            rec,
                            iv,
                            late: &mut late,
                        })?;
                    }
                    _ => {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
            }
            if !seen {
                return Err(w.fail(w.no_snapshots(rec)));
            }
            if !late.is_empty() {
                let iv = match iv {
                    Some(iv) => iv,
                    None => intervals(w.path, shown, None).map_err(|e| w.fail(e))?,
                };
                for l in late {
                    let acc = w.snapshots[l.snap][l.region].2;
                    let p = check_rate(w.path, shown, (l.si, l.gi), acc, &|| acc.to_string(), &iv)
                        .map_err(|e| w.fail(e))?;
                    w.snapshots[l.snap][l.region].2 = p;
                }
            }
            Ok(())
        }
    }

    /// A region read before its record's intervals: where it is kept (the walk's snapshot,
    /// region of the snapshot) and where it was in the file (si, gi).
    struct Late {
        snap: usize,
        region: usize,
        si: usize,
        gi: usize,
    }

    /// A record's `snapshots` list.
    struct Snapshots<'a, 'w, 'p> {
        w: &'w mut Walk<'p>,
        rec: u64,
        iv: Option<&'a Intervals>,
        late: &'a mut Vec<Late>,
    }
    seed!(Snapshots<'_, '_, '_>, ());

    impl<'de> Visitor<'de> for Snapshots<'_, '_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of snapshots")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            for si in 0.. {
                self.w.wrong_type = Some(self.w.no_regions(self.rec));
                self.w.snapshots.push(Vec::new());
                let seed = Snapshot {
                    w: &mut *self.w,
                    rec: self.rec,
                    si,
                    iv: self.iv,
                    late: &mut *self.late,
                };
                if seq.next_element_seed(seed)?.is_none() {
                    self.w.snapshots.pop();
                    break;
                }
            }
            Ok(())
        }
    }

    /// Snapshot `si` of a record: its `regions`, other keys skipped. Its regions go to
    /// the last of the walk's snapshots.
    struct Snapshot<'a, 'w, 'p> {
        w: &'w mut Walk<'p>,
        rec: u64,
        si: usize,
        iv: Option<&'a Intervals>,
        late: &'a mut Vec<Late>,
    }
    seed!(Snapshot<'_, '_, '_>, ());

    impl<'de> Visitor<'de> for Snapshot<'_, '_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a snapshot")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut seen = false;
            let Snapshot {
                w,
                rec,
                si,
                iv,
                late,
            } = self;
            while let Some(key) = map.next_key::<String>()? {
                if key == "regions" {
                    seen = true;
                    map.next_value_seed(Regions {
                        w: &mut *w,
                        rec,
                        si,
                        iv,
                        late: &mut *late,
                    })?;
                } else {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if !seen {
                return Err(w.fail(w.no_regions(rec)));
            }
            Ok(())
        }
    }

    /// A snapshot's `regions` list.
    struct Regions<'a, 'w, 'p> {
        w: &'w mut Walk<'p>,
        rec: u64,
        si: usize,
        iv: Option<&'a Intervals>,
        late: &'a mut Vec<Late>,
    }
    seed!(Regions<'_, '_, '_>, ());

    impl<'de> Visitor<'de> for Regions<'_, '_, '_> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a list of regions")
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let Regions {
                w,
                rec,
                si,
                iv,
                late,
            } = self;
            let shown = rec.max(1);
            let mut gi = 0;
            while let Some(g) = seq.next_element::<serde_json::Value>()? {
                let Some((a, b, acc)) = region_pages(w.path, shown, &g).map_err(|e| w.fail(e))?
                else {
                    gi += 1;
                    continue;
                };
                let p = match iv {
                    Some(iv) => {
                        let text = || {
                            g.get("nr_accesses")
                                .map_or(String::new(), |x| super::cut(x.to_string()))
                        };
                        check_rate(w.path, shown, (si, gi), acc, &text, iv)
                            .map_err(|e| w.fail(e))?
                    }
                    None => {
                        let snap = w.snapshots.len() - 1;
                        let region = w.snapshots.last().map_or(0, Vec::len);
                        late.push(Late {
                            snap,
                            region,
                            si,
                            gi,
                        });
                        acc
                    }
                };
                if let Some(s) = w.snapshots.last_mut() {
                    s.push((a, b, p));
                }
                gi += 1;
            }
            Ok(())
        }
    }
}
