//! Reading a scenario's text: TOML to JSON (refusing dates), the printable-text check,
//! line and column of a position, and serde's messages in the scenario's words.

use crate::error::{quoted, Error, Result};

/// A scenario value as the user wrote it (for messages): strings quoted, tables and lists
/// abbreviated.
pub(crate) fn shown(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(_) => "a table".into(),
        serde_json::Value::Array(_) => "a list".into(),
        v => {
            let s = v.to_string();
            if s.len() > 60 {
                format!("{}...", &s[..s.floor_char_boundary(57)])
            } else {
                s
            }
        }
    }
}

/// A serde message in the scenario's words: no Rust type names.
pub(crate) fn plain_words(msg: &str) -> String {
    let mut m = msg.to_string();
    for (from, to) in [
        ("floating point `", "number `"),
        ("invalid type: map,", "invalid type: table,"),
        ("invalid type: sequence,", "invalid type: list,"),
        ("expected u8", "expected an integer in 0..=255"),
        ("expected u16", "expected an integer in 0..=65535"),
        ("expected u32", "expected an integer in 0..=4294967295"),
        (
            "expected u64",
            "expected an integer in 0..=18446744073709551615",
        ),
        (
            "expected usize",
            "expected an integer in 0..=18446744073709551615",
        ),
        ("expected i64", "expected an integer"),
        ("expected f64", "expected a number"),
        ("expected a boolean", "expected true or false"),
        ("expected a sequence", "expected a list"),
        ("expected a map", "expected a table"),
        ("expected variant identifier", "expected a name (a string)"),
        (
            "expected internally tagged enum WorkloadSpec",
            "expected a workload table with a `type`",
        ),
        (
            "data did not match any variant of untagged enum CsvColumn",
            "expected a column name (a string) or a 1-based column number",
        ),
    ] {
        m = m.replace(from, to);
    }
    // "expected struct Machine" -> "expected a table"
    while let Some(i) = m.find("expected struct ") {
        let rest = &m[i + "expected struct ".len()..];
        let n = rest
            .find(|c: char| !c.is_ascii_alphanumeric() && c != '_')
            .unwrap_or(rest.len());
        m = format!("{}expected a table{}", &m[..i], &rest[n..]);
    }
    m
}

/// A TOML value as JSON; a date or time (no scenario field takes one) is an error at
/// its path.
pub(super) fn toml_to_json(v: toml::Value, path: &mut String) -> Result<serde_json::Value> {
    use serde_json::Value as J;
    Ok(match v {
        toml::Value::String(s) => J::String(s),
        toml::Value::Integer(i) => J::from(i),
        toml::Value::Float(f) => match serde_json::Number::from_f64(f) {
            Some(n) => J::Number(n),
            None => {
                return Err(Error::scenario(
                    path.clone(),
                    format!("{f}: expected a finite number"),
                ))
            }
        },
        toml::Value::Boolean(b) => J::Bool(b),
        toml::Value::Datetime(d) => {
            return Err(Error::scenario(
                path.clone(),
                format!("{d} is a TOML date/time, which no scenario field takes: write a number, or a quoted string like \"30s\" or \"512M\""),
            ))
        }
        toml::Value::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for (i, x) in a.into_iter().enumerate() {
                let n = path.len();
                path.push_str(&format!("[{i}]"));
                out.push(toml_to_json(x, path)?);
                path.truncate(n);
            }
            J::Array(out)
        }
        toml::Value::Table(t) => {
            let mut out = serde_json::Map::new();
            for (k, x) in t {
                let n = path.len();
                path.push('.');
                path.push_str(&k);
                let x = toml_to_json(x, path)?;
                path.truncate(n);
                out.insert(k, x);
            }
            J::Object(out)
        }
    })
}

/// Every string of a scenario, keys included, is printable text: a control character
/// (C0, DEL or C1: an escape sequence, a line break, NUL; or a line or paragraph
/// separator) in a name or a path would reach a terminal, a cgroup file name or a log
/// raw. The first one found is an error at its path, the string shown escaped.
pub(super) fn check_printable(v: &serde_json::Value, path: &mut String) -> Result<()> {
    let bad = |s: &str| {
        s.chars()
            .any(|c| c.is_control() || c == '\u{2028}' || c == '\u{2029}')
    };
    let refuse = |path: &str, s: &str| {
        Error::scenario(
            path.to_string(),
            format!(
                "{}: control characters (escapes, line breaks, NUL) are not allowed; names, paths and values are printable text",
                quoted(s)
            ),
        )
    };
    match v {
        serde_json::Value::String(s) if bad(s) => Err(refuse(path, s)),
        serde_json::Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let n = path.len();
                path.push_str(&format!("[{i}]"));
                check_printable(x, path)?;
                path.truncate(n);
            }
            Ok(())
        }
        serde_json::Value::Object(m) => {
            for (k, x) in m {
                if bad(k) {
                    return Err(refuse(path, k));
                }
                let n = path.len();
                path.push('.');
                path.push_str(k);
                check_printable(x, path)?;
                path.truncate(n);
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// 1-based line and column of byte `at` in `text`.
pub(super) fn line_col(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..text.floor_char_boundary(at.min(text.len()))];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

/// The fields of struct `T` as its derived Deserialize names them, in declaration order:
/// the list serde hands to `deserialize_struct`, caught by a deserializer that reads
/// nothing. The one list of a struct's fields (for an unknown field's message), not typed
/// twice.
pub(crate) fn struct_fields<T: serde::de::DeserializeOwned>() -> &'static [&'static str] {
    use serde::de::{self, Visitor};
    struct Fields<'a>(&'a mut &'static [&'static str]);
    impl<'de> de::Deserializer<'de> for Fields<'_> {
        type Error = de::value::Error;
        fn deserialize_any<V: Visitor<'de>>(
            self,
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            Err(de::Error::custom("not a struct"))
        }
        fn deserialize_struct<V: Visitor<'de>>(
            self,
            _: &'static str,
            fields: &'static [&'static str],
            _: V,
        ) -> std::result::Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(de::Error::custom("fields caught"))
        }
        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes
            byte_buf option unit unit_struct newtype_struct seq tuple tuple_struct map enum
            identifier ignored_any
        }
    }
    let mut fields: &'static [&'static str] = &[];
    let _ = T::deserialize(Fields(&mut fields));
    fields
}
