//! Units of a scenario's values: sizes (bytes, or a string with a binary suffix), memory
//! limits (bytes or "max") and durations (nanoseconds, or a string with a unit), and the
//! page size they are counted in.

use super::parse::shown;
use crate::error::quoted;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// Bytes in a base page (defined by the mm model; re-exported here for the scenario's
/// units and their users).
pub use crate::mm::PAGE_SIZE;

// ---------------------------------------------------------------------------------------
// Units
// ---------------------------------------------------------------------------------------

/// A size in bytes. Deserializes from an integer or from `"<number><K|M|G|T>"` (binary).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Size(pub u64);

impl Size {
    pub fn pages(self) -> u64 {
        self.0 / PAGE_SIZE
    }
}

/// `v * mult` as an integer, or an error when it does not fit in 64 bits.
fn scaled(v: f64, mult: f64, what: &str) -> std::result::Result<u64, String> {
    if v.is_nan() || v < 0.0 || !v.is_finite() {
        return Err(format!("a {what} must be a non-negative number"));
    }
    let x = (v * mult).round();
    // 2^64 as f64 is exact; anything at or above it does not fit.
    if x >= 18_446_744_073_709_551_616.0 {
        return Err(format!("too large for a {what} (at most 2^64 - 1)"));
    }
    Ok(x as u64)
}

fn parse_size(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        None => (t, 1u64),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let m = match unit.as_str() {
                "B" => 1,
                "K" | "KB" | "KIB" => 1 << 10,
                "M" | "MB" | "MIB" => 1 << 20,
                "G" | "GB" | "GIB" => 1 << 30,
                "T" | "TB" | "TIB" => 1 << 40,
                _ => return Err(format!("unknown size unit {}", quoted(&unit))),
            };
            (&t[..i], m)
        }
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a number", quoted(num)))?;
    scaled(v, mult as f64, "size")
}

/// Whether `f` is an integer that neither u64 nor i64 holds (a JSON reader holds one as
/// a float).
fn beyond_64_bits(f: f64) -> bool {
    f.fract() == 0.0 && !(-9_223_372_036_854_775_808.0..18_446_744_073_709_551_616.0).contains(&f)
}

/// The integer or string of a size, duration or limit field; anything else is an error
/// naming the value and `expected`.
enum Raw {
    Int(u64),
    Str(String),
}

fn raw<'de, D: Deserializer<'de>>(d: D, expected: &str) -> std::result::Result<Raw, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    match v {
        serde_json::Value::Number(ref n) => match (n.as_u64(), n.as_f64()) {
            (Some(x), _) => Ok(Raw::Int(x)),
            // An integer beyond 64 bits, held as a float (its digits are restored from
            // the scenario's text, see scenario/mod.rs's with_digits).
            (None, Some(f)) if beyond_64_bits(f) => Err(serde::de::Error::custom(format!(
                "{f} is out of range; {expected}"
            ))),
            _ => Err(serde::de::Error::custom(format!(
                "{}: {expected}",
                shown(&v)
            ))),
        },
        serde_json::Value::String(s) => Ok(Raw::Str(s)),
        v => Err(serde::de::Error::custom(format!(
            "{}: {expected}",
            shown(&v)
        ))),
    }
}

impl<'de> Deserialize<'de> for Size {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected = "expected bytes as a non-negative integer or a string with a binary suffix B, K, M, G or T (e.g. \"512M\")";
        match raw(d, expected)? {
            Raw::Int(v) => Ok(Size(v)),
            Raw::Str(s) => parse_size(&s).map(Size).map_err(|e| {
                serde::de::Error::custom(format!("invalid size {} ({e}): {expected}", quoted(&s)))
            }),
        }
    }
}

impl Serialize for Size {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}

/// A memory.max/high value: bytes, or `"max"` for no limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    Max,
    Bytes(u64),
}

impl Limit {
    pub fn pages(self) -> u64 {
        match self {
            Limit::Max => u64::MAX,
            Limit::Bytes(b) => b / PAGE_SIZE,
        }
    }
}

impl<'de> Deserialize<'de> for Limit {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected =
            "expected \"max\" or bytes (a non-negative integer or a string like \"512M\")";
        match raw(d, expected)? {
            Raw::Int(v) => Ok(Limit::Bytes(v)),
            Raw::Str(s) if s.trim() == "max" => Ok(Limit::Max),
            Raw::Str(s) => parse_size(&s).map(Limit::Bytes).map_err(|e| {
                serde::de::Error::custom(format!("invalid limit {} ({e}): {expected}", quoted(&s)))
            }),
        }
    }
}

impl Serialize for Limit {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Limit::Max => s.serialize_str("max"),
            Limit::Bytes(b) => s.serialize_u64(*b),
        }
    }
}

/// A duration in nanoseconds. Deserializes from an integer (ns) or `"<number><ns|us|ms|s>"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Dur(pub u64);

impl Dur {
    pub fn is_zero(&self) -> bool {
        self.0 == 0
    }
}

fn parse_dur(s: &str) -> std::result::Result<u64, String> {
    let t = s.trim();
    let i = t
        .char_indices()
        .find(|(_, c)| c.is_ascii_alphabetic())
        .map(|(i, _)| i)
        .ok_or_else(|| "missing unit".to_string())?;
    let mult = match &t[i..] {
        "ns" => 1.0,
        "us" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        u => return Err(format!("unknown time unit {}", quoted(u))),
    };
    let v: f64 = t[..i]
        .trim()
        .parse()
        .map_err(|_| format!("{} is not a number", quoted(&t[..i])))?;
    scaled(v, mult, "duration")
}

thread_local! {
    /// Whether a duration must have a unit (Scenario::check_units).
    static UNITS_REQUIRED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// `f()` with bare numbers refused as durations (0 excepted).
pub(super) fn with_units_required<T>(f: impl FnOnce() -> T) -> T {
    UNITS_REQUIRED.with(|u| u.set(true));
    let out = f();
    UNITS_REQUIRED.with(|u| u.set(false));
    out
}

impl<'de> Deserialize<'de> for Dur {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let expected = "expected nanoseconds as a non-negative integer or a string with a unit ns, us, ms, s or min (e.g. \"30s\")";
        match raw(d, expected)? {
            Raw::Int(v) if v != 0 && UNITS_REQUIRED.with(|u| u.get()) => Err(serde::de::Error::custom(format!(
                "{v}: a duration needs a unit (ns, us, ms, s or min), e.g. \"{v}s\" or \"{v}ns\"; a bare number is nanoseconds only in scenario JSON"
            ))),
            Raw::Int(v) => Ok(Dur(v)),
            Raw::Str(s) => parse_dur(&s).map(Dur).map_err(|e| {
                serde::de::Error::custom(format!(
                    "invalid duration {} ({e}): {expected}",
                    quoted(&s)
                ))
            }),
        }
    }
}

impl Serialize for Dur {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_u64(self.0)
    }
}
