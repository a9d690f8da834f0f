//! Strict JSON decoding: exactly one JSON value, no duplicate object keys, no U+0000 in a string
//! or key, nothing after it, and nesting bounded by serde_json's recursion limit (128).
//!
//! U+0000 is valid JSON but no field means it, and PostgreSQL cannot store it in text: refusing it
//! here makes it the same client error on every backend and on both bridges.
//!
//! serde_json's own `Value` keeps the last of two duplicate keys silently, so a schema check on
//! the `Value` and a later typed decode could disagree about what the request said. Every request
//! body goes through [`parse_strict`] instead.
//!
//! Also [`json_len`]: what a value weighs serialized, for the bounds that count bytes.

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

/// Why a body is not one strict JSON value. The message names the position, never the content.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct StrictJsonError(String);

/// The bytes of `value` serialized compactly, as every answer is: counted, not written.
pub fn json_len(value: &impl serde::Serialize) -> serde_json::Result<usize> {
    /// Counts what is written, keeping nothing.
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    serde_json::to_writer(&mut count, value)?;
    Ok(count.0)
}

/// Parses `bytes` as exactly one JSON value under the strict rules above.
pub fn parse_strict(bytes: &[u8]) -> Result<Value, StrictJsonError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value =
        StrictValue::deserialize(&mut deserializer).map_err(|e| StrictJsonError(e.to_string()))?;
    deserializer
        .end()
        .map_err(|e| StrictJsonError(e.to_string()))?;
    Ok(value.0)
}

struct StrictValue(Value);

impl<'de> Deserialize<'de> for StrictValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(StrictVisitor).map(StrictValue)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    /// JSON Schema counts `47.0` as the integer 47, so it is stored as one: the schema check and
    /// the typed decode then agree about what the number is.
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
        if v.fract() == 0.0 && v >= i64::MIN as f64 && v < i64::MAX as f64 {
            return Ok(Value::Number((v as i64).into()));
        }
        if v.fract() == 0.0 && v >= 0.0 && v < u64::MAX as f64 {
            return Ok(Value::Number((v as u64).into()));
        }
        Number::from_f64(v)
            .map(Value::Number)
            .ok_or_else(|| E::custom("number out of range"))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
        refuse_nul(v)?;
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
        refuse_nul(&v)?;
        Ok(Value::String(v))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(StrictValue(item)) = seq.next_element()? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut access: A) -> Result<Value, A::Error> {
        let mut map = Map::new();
        while let Some(key) = access.next_key::<String>()? {
            refuse_nul(&key)?;
            let StrictValue(value) = access.next_value()?;
            if map.contains_key(&key) {
                return Err(de::Error::custom(format_args!(
                    "duplicate key `{}`",
                    truncate(&key)
                )));
            }
            map.insert(key, value);
        }
        Ok(Value::Object(map))
    }
}

fn refuse_nul<E: de::Error>(text: &str) -> Result<(), E> {
    if text.contains('\0') {
        return Err(E::custom(
            "a string contains U+0000, which no field accepts",
        ));
    }
    Ok(())
}

/// Keys are echoed in errors; a huge key must not make a huge message.
fn truncate(key: &str) -> String {
    key.chars().take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::parse_strict;

    #[test]
    fn accepts_one_value() {
        assert_eq!(
            parse_strict(br#" {"a": [1, 2.5, null, true, "x"]} "#).unwrap(),
            serde_json::json!({"a": [1, 2.5, null, true, "x"]})
        );
    }

    #[test]
    fn integral_floats_become_integers() {
        assert_eq!(
            parse_strict(b"[47.0, -3.0, 1e2, 2.5]").unwrap(),
            serde_json::json!([47, -3, 100, 2.5])
        );
    }

    #[test]
    fn rejects_duplicates_trailing_bytes_and_depth() {
        assert!(
            parse_strict(br#"{"a": 1, "a": 2}"#)
                .unwrap_err()
                .to_string()
                .contains("duplicate key `a`")
        );
        assert!(parse_strict(br#"{"o": {"b": 1, "b": 1}}"#).is_err());
        assert!(
            parse_strict(br#"{} {}"#)
                .unwrap_err()
                .to_string()
                .contains("trailing")
        );
        assert!(
            parse_strict(&b"[".repeat(200))
                .unwrap_err()
                .to_string()
                .contains("recursion limit")
        );
        assert!(parse_strict(b"").is_err());
    }

    #[test]
    fn rejects_nul_in_strings_and_keys() {
        for body in [
            &br#"{"content": "a\u0000b"}"#[..],
            br#"{"a\u0000": 1}"#,
            br#"["\u0000"]"#,
        ] {
            assert!(
                parse_strict(body)
                    .unwrap_err()
                    .to_string()
                    .contains("U+0000"),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        // A raw NUL byte inside a string is a control character serde_json refuses anyway.
        assert!(parse_strict(b"[\"a\0\"]").is_err());
        assert_eq!(
            parse_strict(br#""\u0001""#).unwrap(),
            serde_json::json!("\u{1}")
        );
    }
}
