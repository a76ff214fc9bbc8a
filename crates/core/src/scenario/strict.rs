//! A scenario's JSON value read as serde reads any JSON value, with three differences a
//! person's scenario needs, in one place for every table and field:
//!
//! - a table (a struct or a map) given as an array is refused: serde's derived structs
//!   would take an array field by field, so `kernel = [100]` would set the first field;
//! - a named value (an enum: `kernel.lru`, `observe`, ...) given as anything but a
//!   string is refused listing the names (every enum a scenario holds is a name);
//! - an integer outside its field's type is refused as out of range, naming the type's
//!   range, and a fraction is left to the field's own message.
//!
//! Everything else is what `serde_json::Value`'s deserializer does, so a valid scenario
//! reads the same.

use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Error, Value};

use super::parse::shown;

/// The message of a table given as an array.
pub(crate) const ARRAY_FOR_TABLE: &str = "an array; expected a table";

/// A JSON value deserialized strictly (see the module's doc).
pub(crate) struct Strict<'a>(pub &'a Value);

/// "`n` is out of range" with the range of an integer type.
fn out_of_range(n: impl std::fmt::Display, min: i128, max: i128) -> Error {
    de::Error::custom(format!(
        "{n} is out of range; allowed an integer in {min}..={max}"
    ))
}

impl<'de> Strict<'de> {
    /// An integer of a type that holds `min..=max`.
    fn integer<V: Visitor<'de>>(self, min: i128, max: i128, v: V) -> Result<V::Value, Error> {
        let Value::Number(n) = self.0 else {
            return self.deserialize_any_value(v);
        };
        if let Some(u) = n.as_u64() {
            if (u as i128) > max {
                return Err(out_of_range(u, min, max));
            }
            return v.visit_u64(u);
        }
        if let Some(i) = n.as_i64() {
            if (i as i128) < min || (i as i128) > max {
                return Err(out_of_range(i, min, max));
            }
            return v.visit_i64(i);
        }
        let f = n.as_f64().unwrap_or(f64::NAN);
        // An integer beyond 64 bits reaches here as a float (the digits are restored
        // from the scenario's text, see `original_integer`); a fraction is the field's
        // type error.
        if f.is_finite() && f.fract() == 0.0 && !(min..=max).contains(&(f as i128)) {
            return Err(out_of_range(f, min, max));
        }
        v.visit_f64(f)
    }

    fn deserialize_any_value<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => v.visit_unit(),
            Value::Bool(b) => v.visit_bool(*b),
            Value::Number(n) => {
                if let Some(u) = n.as_u64() {
                    v.visit_u64(u)
                } else if let Some(i) = n.as_i64() {
                    v.visit_i64(i)
                } else {
                    v.visit_f64(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            Value::String(s) => v.visit_borrowed_str(s),
            Value::Array(a) => {
                let mut seq = Seq(a.iter());
                let out = v.visit_seq(&mut seq)?;
                if seq.0.len() == 0 {
                    Ok(out)
                } else {
                    Err(de::Error::invalid_length(
                        a.len(),
                        &"fewer elements in array",
                    ))
                }
            }
            Value::Object(m) => {
                let mut map = Map {
                    it: m.iter(),
                    value: None,
                };
                let out = v.visit_map(&mut map)?;
                if map.it.len() == 0 {
                    Ok(out)
                } else {
                    Err(de::Error::invalid_length(m.len(), &"fewer elements in map"))
                }
            }
        }
    }

    /// A table (struct or map): anything but an array goes to the visitor, which names
    /// what it expected.
    fn table<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Array(_) => Err(de::Error::custom(ARRAY_FOR_TABLE)),
            _ => self.deserialize_any_value(v),
        }
    }
}

impl<'de> de::Deserializer<'de> for Strict<'de> {
    type Error = Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.deserialize_any_value(v)
    }

    fn deserialize_u8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(0, u8::MAX.into(), v)
    }
    fn deserialize_u16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(0, u16::MAX.into(), v)
    }
    fn deserialize_u32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(0, u32::MAX.into(), v)
    }
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(0, u64::MAX.into(), v)
    }
    fn deserialize_i8<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(i8::MIN.into(), i8::MAX.into(), v)
    }
    fn deserialize_i16<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(i16::MIN.into(), i16::MAX.into(), v)
    }
    fn deserialize_i32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(i32::MIN.into(), i32::MAX.into(), v)
    }
    fn deserialize_i64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.integer(i64::MIN.into(), i64::MAX.into(), v)
    }

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.0 {
            Value::Null => v.visit_none(),
            _ => v.visit_some(self),
        }
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        self.table(v)
    }

    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        self.table(v)
    }

    /// A name: a string (the variant's own message lists the names when it is none of
    /// them); anything else is refused listing them.
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        match self.0 {
            Value::String(s) => v.visit_enum(s.as_str().into_deserializer()),
            other => Err(de::Error::custom(format!(
                "{}; allowed: {}",
                shown(other),
                variants.join(", ")
            ))),
        }
    }

    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }

    serde::forward_to_deserialize_any! {
        bool i128 u128 f32 f64 char str string bytes byte_buf unit unit_struct seq tuple
        tuple_struct identifier
    }
}

/// The elements of an array.
struct Seq<'a>(std::slice::Iter<'a, Value>);

impl<'de> SeqAccess<'de> for Seq<'de> {
    type Error = Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, Error> {
        match self.0.next() {
            Some(x) => seed.deserialize(Strict(x)).map(Some),
            None => Ok(None),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.0.len())
    }
}

/// The entries of an object.
struct Map<'a> {
    it: serde_json::map::Iter<'a>,
    value: Option<&'a Value>,
}

impl<'de> MapAccess<'de> for Map<'de> {
    type Error = Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, Error> {
        match self.it.next() {
            Some((k, x)) => {
                self.value = Some(x);
                let key = de::value::BorrowedStrDeserializer::<Error>::new(k);
                seed.deserialize(key).map(Some)
            }
            None => Ok(None),
        }
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        match self.value.take() {
            Some(x) => seed.deserialize(Strict(x)),
            None => Err(de::Error::custom("value is missing")),
        }
    }

    fn size_hint(&self) -> Option<usize> {
        Some(self.it.len())
    }
}

/// The digits of the integer literal in JSON `text` whose value as a float is `f` (an
/// integer too large for 64 bits, which JSON readers hold as a float), when `text` has
/// exactly one such literal; None otherwise. Strings are skipped.
pub(crate) fn original_integer(text: &str, f: f64) -> Option<String> {
    let b = text.as_bytes();
    let mut found: Option<&str> = None;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
            }
            b'-' | b'0'..=b'9' => {
                let start = i;
                i += 1;
                while i < b.len() && matches!(b[i], b'0'..=b'9' | b'.' | b'e' | b'E' | b'+' | b'-')
                {
                    i += 1;
                }
                let tok = &text[start..i];
                let digits = tok.strip_prefix('-').unwrap_or(tok);
                if !digits.is_empty()
                    && digits.bytes().all(|c| c.is_ascii_digit())
                    && tok.parse::<f64>().ok() == Some(f)
                {
                    match found {
                        Some(t) if t != tok => return None,
                        _ => found = Some(tok),
                    }
                }
            }
            _ => i += 1,
        }
    }
    found.map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct T {
        a: u32,
        #[serde(default)]
        b: Option<u8>,
    }

    fn read<X: de::DeserializeOwned>(j: &str) -> Result<X, String> {
        let v: Value = serde_json::from_str(j).unwrap();
        X::deserialize(Strict(&v)).map_err(|e| e.to_string())
    }

    #[test]
    fn values_read_as_serde_json_reads_them_but_tables_are_tables() {
        assert_eq!(read::<T>(r#"{"a": 1, "b": 2}"#), Ok(T { a: 1, b: Some(2) }));
        assert_eq!(read::<T>(r#"{"a": 1, "b": null}"#), Ok(T { a: 1, b: None }));
        assert_eq!(read::<T>("[1, 2]"), Err(ARRAY_FOR_TABLE.to_string()));
        assert!(read::<T>(r#"{"a": 1, "c": 2}"#)
            .unwrap_err()
            .contains("unknown field `c`"));
        assert_eq!(
            read::<std::collections::BTreeMap<String, bool>>("[true]"),
            Err(ARRAY_FOR_TABLE.to_string())
        );
        assert_eq!(read::<Vec<u8>>("[1, 2]"), Ok(vec![1, 2]));
        assert_eq!(
            read::<T>(r#"{"a": 4294967296}"#),
            Err("4294967296 is out of range; allowed an integer in 0..=4294967295".into())
        );
        assert_eq!(
            read::<T>(r#"{"a": 1, "b": -1}"#),
            Err("-1 is out of range; allowed an integer in 0..=255".into())
        );
        assert!(read::<T>(r#"{"a": 1.5}"#)
            .unwrap_err()
            .contains("floating point `1.5`"));
    }

    /// The scenario JSON `text` read as before (serde_json's text deserializer) and
    /// strictly: the same scenario, field for field.
    fn reads_the_same(name: &str, text: &str) {
        use crate::scenario::Scenario;
        let v: toml::Value = toml::from_str(text).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut j = super::super::parse::toml_to_json(v, &mut String::new()).unwrap();
        crate::versions::fill_switch_defaults(&mut j);
        let plain: Scenario =
            serde_json::from_str(&j.to_string()).unwrap_or_else(|e| panic!("{name}: {e}"));
        let strict = Scenario::deserialize(Strict(&j)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(format!("{plain:?}"), format!("{strict:?}"), "{name}");
        assert_eq!(
            serde_json::to_string(&plain).unwrap(),
            serde_json::to_string(&strict).unwrap(),
            "{name}"
        );
    }

    #[test]
    fn valid_scenarios_read_as_serde_json_reads_them() {
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../python/reclaimsim/scenarios"
        );
        let mut n = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                reads_the_same(
                    &p.display().to_string(),
                    &std::fs::read_to_string(&p).unwrap(),
                );
                n += 1;
            }
        }
        assert!(n > 10, "{n} scenarios");
        // Every kind of field: options, maps, names, untagged values, nested tables.
        reads_the_same(
            "inline",
            r#"
name = "all"
seed = 9223372036854775807
duration = "1s"
warmup = "10ms"
observe = "perf-lock-bpf"
tracepoints = true
costs = { zram_read = 1000 }
compare = { a = { rotation_cost = false }, metrics = ["x", 1.5, [true]] }
[machine]
nodes = 2
cpus = 8
memory_per_node = "1G"
swap = { size = "1G", device = "ssd", read_latency = "80us", rotational = true }
[kernel]
swappiness = 200
min_free_kbytes = 1024
lru = "mglru"
lru_gen = { enabled = 7, min_ttl_ms = 1000 }
version = 6.12
rules = { folio_batch_size_31 = false, rotation_cost = true }
[variants]
memcg_stats = "percpu_local"
mglru_bloom = false
[[cgroup]]
path = "/a{i}"
copies = 3
memory = { max = "max", high = "512M", low = 4096, swap.max = "1M" }
[[workload]]
type = "usemem"
name = "u{i}"
copies = 2
cgroup = "/a0"
cpus = "0-1"
start = "1ms"
size = "1M"
threads = 2
random = true
[[workload]]
type = "file_read"
files = ["1M", 8192]
pattern = "zipf"
theta = 1.1
[[workload]]
type = "request_churn"
load = 0.5
[[workload]]
type = "trace"
path = "x.csv"
format = "csv"
csv = { obj_id = 2, obj_size = "size", header = true, delimiter = ";" }
[[reclaim]]
at = "5ms"
bytes = "1M"
swappiness = "max"
[[reclaim]]
at = "5ms"
every = "1ms"
times = 3
bytes = 4096
swappiness = 20
[[lru_gen]]
cmd = "+"
at = "1ms"
force_scan = true
"#,
        );
    }

    #[test]
    fn the_digits_of_a_huge_integer_are_found_in_the_text() {
        let t = r#"{"x": "99999999999999999999", "a": 99999999999999999999, "b": 1e20}"#;
        assert_eq!(
            original_integer(t, 1e20),
            Some("99999999999999999999".to_string())
        );
        assert_eq!(original_integer(r#"{"a": 1e20}"#, 1e20), None);
        let two = r#"{"a": 99999999999999999999, "b": 100000000000000000000}"#;
        assert_eq!(original_integer(two, 1e20), None);
        assert_eq!(
            original_integer(r#"[-99999999999999999999]"#, -1e20),
            Some("-99999999999999999999".to_string())
        );
    }
}
