//! A JSON document read in place: the form an owner's answer is checked in without building a
//! `serde_json::Value`.
//!
//! A server-owned tool's result arrives as text and leaves as text (the MCP result quotes it and
//! embeds it). Checking it against the tool's output schema needs a tree, not an owned one:
//! [`Borrowed`] keeps every string without an escape as a slice of the text and every container
//! as one vector, and jsonschema validates it through its custom-representation traits
//! ([`jsonschema::json`]) with the same compiled keywords it applies to a `Value`.
//!
//! A document with a repeated object key is refused: a validator reads one of the two values and
//! a reader downstream may take the other, so such text is never passed on.

use std::borrow::Cow;
use std::fmt;

use jsonschema::JsonType;
use jsonschema::json::{Array, Json, Node, NodeIdentity, Object};
use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Number, Value};

/// One JSON value whose strings borrow from the text they were read from where they can.
#[derive(Debug, Clone, PartialEq)]
pub enum Borrowed<'s> {
    Null,
    Bool(bool),
    Number(Number),
    String(Cow<'s, str>),
    Array(Vec<Borrowed<'s>>),
    /// Members in the text's order; no two share a name.
    Object(Vec<(Cow<'s, str>, Borrowed<'s>)>),
}

/// Why a text is not a document [`Borrowed`] holds (the cause stays internal: it may quote the
/// text).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BorrowedError(String);

/// Objects up to this size are checked for a repeated name pairwise; larger ones by sorting.
const PAIRWISE_UP_TO: usize = 16;

impl<'s> Borrowed<'s> {
    /// Reads `text` as exactly one JSON value (serde_json's grammar and nesting limit), refusing
    /// a repeated object key.
    pub fn parse(text: &'s str) -> Result<Borrowed<'s>, BorrowedError> {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        let value = ValueSeed
            .deserialize(&mut deserializer)
            .map_err(|e| BorrowedError(e.to_string()))?;
        deserializer
            .end()
            .map_err(|e| BorrowedError(e.to_string()))?;
        Ok(value)
    }

    /// The same value as an owned `Value` (error reports and other cold paths).
    pub fn to_value(&self) -> Value {
        match self {
            Borrowed::Null => Value::Null,
            Borrowed::Bool(b) => Value::Bool(*b),
            Borrowed::Number(n) => Value::Number(n.clone()),
            Borrowed::String(s) => Value::String(s.to_string()),
            Borrowed::Array(items) => Value::Array(items.iter().map(Borrowed::to_value).collect()),
            Borrowed::Object(members) => Value::Object(
                members
                    .iter()
                    .map(|(name, value)| (name.to_string(), value.to_value()))
                    .collect(),
            ),
        }
    }
}

impl Serialize for Borrowed<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Borrowed::Null => serializer.serialize_unit(),
            Borrowed::Bool(b) => serializer.serialize_bool(*b),
            Borrowed::Number(n) => n.serialize(serializer),
            Borrowed::String(s) => serializer.serialize_str(s),
            Borrowed::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Borrowed::Object(members) => {
                let mut map = serializer.serialize_map(Some(members.len()))?;
                for (name, value) in members {
                    map.serialize_entry(name.as_ref(), value)?;
                }
                map.end()
            }
        }
    }
}

/// Reads one value, borrowing unescaped strings.
pub(crate) struct ValueSeed;

impl<'de> DeserializeSeed<'de> for ValueSeed {
    type Value = Borrowed<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl<'de> Visitor<'de> for ValueVisitor {
    type Value = Borrowed<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Borrowed::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Borrowed::Bool(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Borrowed::Number(v.into()))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Borrowed::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        Number::from_f64(v)
            .map(Borrowed::Number)
            .ok_or_else(|| E::custom("a number JSON cannot hold"))
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Borrowed(v)))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Owned(v.to_string())))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Borrowed::String(Cow::Owned(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(ValueSeed)? {
            items.push(item);
        }
        Ok(Borrowed::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        // Room for a typical object's members at once rather than growing 0, 4, 8.
        let mut members: Vec<(Cow<'de, str>, Borrowed<'de>)> = Vec::with_capacity(8);
        while let Some(name) = map.next_key_seed(NameSeed)? {
            let value = map.next_value_seed(ValueSeed)?;
            members.push((name, value));
        }
        if has_repeated_name(&members) {
            return Err(de::Error::custom("an object repeats a key"));
        }
        Ok(Borrowed::Object(members))
    }
}

fn has_repeated_name(members: &[(Cow<'_, str>, Borrowed<'_>)]) -> bool {
    if members.len() <= PAIRWISE_UP_TO {
        return members
            .iter()
            .enumerate()
            .any(|(i, (name, _))| members[..i].iter().any(|(seen, _)| seen == name));
    }
    let mut names: Vec<&str> = members.iter().map(|(name, _)| name.as_ref()).collect();
    names.sort_unstable();
    names.windows(2).any(|pair| pair[0] == pair[1])
}

/// Reads an object key, borrowing it when it has no escape.
struct NameSeed;

impl<'de> DeserializeSeed<'de> for NameSeed {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(NameVisitor)
    }
}

struct NameVisitor;

impl<'de> Visitor<'de> for NameVisitor {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v))
    }
}

/// Whether `text` holds `min..=max` code points (JSON Schema's string length), counted only
/// when its byte length leaves the answer open.
pub(crate) fn length_within(text: &str, min: u64, max: u64) -> bool {
    // A code point takes one to four bytes: the count lies in `ceil(bytes / 4)..=bytes`.
    let bytes = text.len() as u64;
    if bytes < min || bytes.div_ceil(4) > max {
        return false;
    }
    if min <= bytes.div_ceil(4) && bytes <= max {
        return true;
    }
    (min..=max).contains(&(text.chars().count() as u64))
}

/// The [`Json`] representation whose nodes are `&Borrowed`: validators built with
/// `jsonschema::options_for::<BorrowedJson>()` check a [`Borrowed`] document.
pub struct BorrowedJson;

impl Json for BorrowedJson {
    type Node<'a> = &'a Borrowed<'a>;
    type PreparedKey = String;
    type StringBuffer = ();

    // A lookup is a scan of the object's members, so one pass over them beats the lookups it
    // replaces on any object of a sane size (jsonschema multiplies this by a keyword's name
    // count: it must stay far from overflow).
    const KEYS_PER_LOOKUP: usize = 64;
    const ACYCLIC: bool = true;

    fn prepare_key(key: &str) -> String {
        key.to_owned()
    }

    fn with_string_node<T>((): &mut (), string: &str, f: impl FnOnce(Self::Node<'_>) -> T) -> T {
        f(&Borrowed::String(Cow::Borrowed(string)))
    }
}

impl<'a> Node<'a, BorrowedJson> for &'a Borrowed<'a> {
    type Object = &'a [(Cow<'a, str>, Borrowed<'a>)];
    type Array = &'a [Borrowed<'a>];
    type Number = &'a Number;

    fn as_object(&self) -> Option<Self::Object> {
        match self {
            Borrowed::Object(members) => Some(members),
            _ => None,
        }
    }

    fn as_array(&self) -> Option<Self::Array> {
        match self {
            Borrowed::Array(items) => Some(items),
            _ => None,
        }
    }

    fn as_string(&self) -> Option<Cow<'a, str>> {
        match self {
            Borrowed::String(s) => Some(Cow::Borrowed(s.as_ref())),
            _ => None,
        }
    }

    fn as_number(&self) -> Option<&'a Number> {
        match self {
            Borrowed::Number(n) => Some(n),
            _ => None,
        }
    }

    fn as_boolean(&self) -> Option<bool> {
        match self {
            Borrowed::Bool(b) => Some(*b),
            _ => None,
        }
    }

    fn is_null(&self) -> bool {
        matches!(self, Borrowed::Null)
    }

    fn json_type(&self) -> JsonType {
        match self {
            Borrowed::Null => JsonType::Null,
            Borrowed::Bool(_) => JsonType::Boolean,
            Borrowed::Number(_) => JsonType::Number,
            Borrowed::String(_) => JsonType::String,
            Borrowed::Array(_) => JsonType::Array,
            Borrowed::Object(_) => JsonType::Object,
        }
    }

    fn string_length_within(&self, min: u64, max: u64) -> Option<bool> {
        let Borrowed::String(s) = self else {
            return None;
        };
        Some(length_within(s, min, max))
    }

    fn to_value(&self) -> Cow<'a, Value> {
        Cow::Owned(Borrowed::to_value(self))
    }

    fn identity(&self) -> Option<NodeIdentity> {
        Some(NodeIdentity::new(
            std::ptr::from_ref::<Borrowed<'a>>(*self) as usize
        ))
    }
}

impl<'a> Object<'a, BorrowedJson> for &'a [(Cow<'a, str>, Borrowed<'a>)] {
    type Node = &'a Borrowed<'a>;
    type MemberName = &'a str;
    type MembersIter = Members<'a>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn get(&self, key: &String) -> Option<&'a Borrowed<'a>> {
        self.iter()
            .find(|(name, _)| name.as_ref() == key.as_str())
            .map(|(_, value)| value)
    }

    fn members(&self) -> Members<'a> {
        Members(self.iter())
    }
}

/// An object's members as name and node.
pub struct Members<'a>(std::slice::Iter<'a, (Cow<'a, str>, Borrowed<'a>)>);

impl<'a> Iterator for Members<'a> {
    type Item = (&'a str, &'a Borrowed<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|(name, value)| (name.as_ref(), value))
    }
}

impl<'a> Array<'a, BorrowedJson> for &'a [Borrowed<'a>] {
    type Node = &'a Borrowed<'a>;
    type ElementsIter = std::slice::Iter<'a, Borrowed<'a>>;

    fn len(&self) -> usize {
        <[_]>::len(self)
    }

    fn elements(&self) -> Self::ElementsIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_document_reads_as_serde_json_reads_it() {
        let texts = [
            r#"{"a":[1,-2,3.5,1e2,18446744073709551615,-9223372036854775808],"b":{"c":null,"d":true,"e":false}}"#,
            r#" { "escaped" : "quote \" slash \/ \u00e9 \ud83d\ude00 \n" , "plain" : "é😀" } "#,
            r#"[]"#,
            r#""just a string""#,
            r#"{"":{"":[[]]}}"#,
        ];
        for text in texts {
            let borrowed = Borrowed::parse(text).unwrap();
            let value: Value = serde_json::from_str(text).unwrap();
            assert_eq!(borrowed.to_value(), value, "{text}");
            assert_eq!(
                serde_json::to_value(&borrowed).unwrap(),
                value,
                "serializes back: {text}"
            );
        }
        // Only a string with an escape is copied out of the text.
        let Borrowed::Object(members) =
            Borrowed::parse(r#"{"a":"plain","b":"e\"scaped"}"#).unwrap()
        else {
            panic!("an object")
        };
        assert!(matches!(
            &members[0].1,
            Borrowed::String(Cow::Borrowed("plain"))
        ));
        assert!(matches!(&members[1].1, Borrowed::String(Cow::Owned(s)) if s == "e\"scaped"));
    }

    #[test]
    fn what_serde_json_refuses_and_a_repeated_key_are_refused() {
        for text in [
            "",
            "{",
            r#"{"a":1,}"#,
            "[1] [2]",
            "1e400",
            "\"\u{1}\"",
            r#"{"a":1,"a":2}"#,
            r#"{"x":{"b":1,"c":2,"b":3}}"#,
        ] {
            assert!(Borrowed::parse(text).is_err(), "{text:?}");
        }
        // Past the pairwise check, by sorting: 40 distinct names pass, one repeat fails.
        let names: Vec<String> = (0..40).map(|i| format!("\"k{i}\":{i}")).collect();
        let distinct = format!("{{{}}}", names.join(","));
        assert!(Borrowed::parse(&distinct).is_ok());
        let repeated = format!("{{{},\"k7\":0}}", names.join(","));
        assert!(Borrowed::parse(&repeated).is_err());
        // One past the pairwise bound, with the repeat at both ends.
        let mut edge: Vec<String> = (0..PAIRWISE_UP_TO).map(|i| format!("\"k{i}\":0")).collect();
        edge.push("\"k0\":1".into());
        assert!(Borrowed::parse(&format!("{{{}}}", edge.join(","))).is_err());
        edge.pop();
        edge.push(format!("\"k{}\":0", PAIRWISE_UP_TO - 1));
        assert!(Borrowed::parse(&format!("{{{}}}", edge.join(","))).is_err());
        // Nesting is bounded as serde_json bounds it.
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        assert!(Borrowed::parse(&deep).is_err());
    }

    /// Every keyword family the catalog's output schemas use gives the same verdict on a borrowed
    /// document as on a `Value`.
    #[test]
    fn a_borrowed_document_validates_as_its_value_does() {
        let schema = json!({
            "$defs": {
                "Id": { "type": "string", "pattern": "^msg_[0-9A-Za-z]{8,64}$", "maxLength": 68 },
                "Emoji": { "type": "string", "pattern": "^[^\\s]+$", "minLength": 1, "maxLength": 4 }
            },
            "type": "object",
            "additionalProperties": false,
            "required": ["id", "items"],
            "properties": {
                "id": { "$ref": "#/$defs/Id" },
                "at": { "type": "string", "format": "date-time" },
                "kind": { "enum": ["a", "b"] },
                "count": { "type": "integer", "minimum": 1 },
                "ratio": { "type": "number", "maximum": 1 },
                "flag": { "type": "boolean" },
                "none": { "type": "null" },
                "emoji": { "$ref": "#/$defs/Emoji" },
                "items": {
                    "type": "array", "maxItems": 2,
                    "items": { "type": "object", "properties": { "n": { "const": 1 } } }
                },
                "either": { "oneOf": [{ "type": "string" }, { "type": "integer" }] }
            }
        });
        let on_value = jsonschema::draft202012::options()
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let on_borrowed = jsonschema::options_for::<BorrowedJson>()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&schema)
            .unwrap();
        let cases = [
            (
                r#"{"id":"msg_0123456789","items":[{"n":1},{}],"at":"2026-12-01T02:03:04.005Z","kind":"b","count":3,"ratio":0.5,"flag":true,"none":null,"emoji":"😀👍","either":7}"#,
                true,
            ),
            (r#"{"id":"msg_0123456789","items":[]}"#, true),
            // Numbers compare mathematically; 2.0 is an integer.
            (r#"{"id":"msg_0123456789","items":[{"n":1.0}]}"#, true),
            (r#"{"id":"msg_0123456789","items":[],"count":2.0}"#, true),
            (r#"{"id":"msg_01","items":[]}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"extra":1}"#, false),
            (r#"{"items":[]}"#, false),
            (r#"{"id":"msg_0123456789","items":[{},{},{}]}"#, false),
            (r#"{"id":"msg_0123456789","items":[{"n":2}]}"#, false),
            (
                r#"{"id":"msg_0123456789","items":[],"at":"yesterday"}"#,
                false,
            ),
            (r#"{"id":"msg_0123456789","items":[],"kind":"c"}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"count":0}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"count":2.5}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"ratio":1.5}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"flag":"true"}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"none":0}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"emoji":"a b"}"#, false),
            (
                r#"{"id":"msg_0123456789","items":[],"emoji":"a\u00a0"}"#,
                false,
            ),
            (
                r#"{"id":"msg_0123456789","items":[],"emoji":"😀😀😀😀😀"}"#,
                false,
            ),
            (r#"{"id":"msg_0123456789","items":[],"emoji":""}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"either":1.5}"#, false),
            (r#"{"id":"msg_0123456789","items":[],"either":null}"#, false),
            (r#"[]"#, false),
            (r#"null"#, false),
        ];
        for (text, valid) in cases {
            let value: Value = serde_json::from_str(text).unwrap();
            let borrowed = Borrowed::parse(text).unwrap();
            assert_eq!(on_value.is_valid(&value), valid, "{text}");
            assert_eq!(on_borrowed.is_valid(&borrowed), valid, "{text}");
            let on_value_errors: Vec<String> = on_value
                .iter_errors(&value)
                .map(|e| format!("{} {}", e.instance_path(), e.masked()))
                .collect();
            let on_borrowed_errors: Vec<String> = on_borrowed
                .iter_errors(&borrowed)
                .map(|e| format!("{} {}", e.instance_path(), e.masked()))
                .collect();
            assert_eq!(on_borrowed_errors, on_value_errors, "{text}");
        }
    }
}
