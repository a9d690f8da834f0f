//! An output schema checked while its text is read: the fast path of a server's answer.
//!
//! A server-owned tool's result arrives as JSON text. Reading it into a [`Borrowed`] tree and
//! handing the tree to jsonschema builds one vector per object and array and walks the document
//! twice. A [`Shape`] is the same output schema compiled into the structure serde walks: each
//! object, array and scalar is checked as serde_json reads it, nothing is kept, and the text is
//! passed on as it was written.
//!
//! A shape answers one question, "is this text exactly one JSON document, with distinct keys in
//! every object, that the schema accepts?", with no false yes. The structure (`type: object` with
//! `properties`, `required` and `additionalProperties`; `type: array` with `items`, `minItems`
//! and `maxItems`; `$ref` into `$defs`; a `oneOf` of objects told apart by a `const` member, when
//! that member comes first) is checked here. A scalar's own keywords (`pattern`,
//! `format`, `minimum`, `enum`, …) are checked by jsonschema on that one scalar, compiled from the
//! same subschema with the same options, so they mean what they mean on the slow path. A schema
//! using any other keyword compiles to no shape, and its tool keeps the tree-and-jsonschema path;
//! so does any text a shape does not accept, which the slow path then reports in detail. The
//! `output` fuzz target holds every shape to the slow path's verdict on arbitrary text.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};

use super::borrowed::{Borrowed, BorrowedJson, ValueSeed, length_within};
use super::native_checks::Native;

/// An output schema compiled for checking text as it is read; see the module documentation.
pub struct Shape {
    nodes: Vec<Node>,
    root: usize,
}

/// One subschema. Children are indices into [`Shape::nodes`] (a `$ref` may point back up).
enum Node {
    /// Any JSON value (`true`, or a schema of annotations only).
    Any,
    /// `type: object`.
    Object {
        /// Declared properties, by name.
        properties: Box<[(Box<str>, usize)]>,
        /// Bit `i` is set when `properties[i]` is required.
        required: u64,
        /// The schema of any other member, or `None` when `additionalProperties` is `false`.
        additional: Option<usize>,
    },
    /// `type: array`.
    Array {
        items: usize,
        min: usize,
        max: usize,
    },
    /// A scalar type (or several), a string's length bounds and simple pattern, and jsonschema
    /// for the rest, unless the rest's native check accepts the value first.
    Scalar {
        types: Types,
        length: Option<(u64, u64)>,
        pattern: Option<Simple>,
        native: Option<Native>,
        rest: Option<Box<jsonschema::Validator<BorrowedJson>>>,
    },
    /// `oneOf` objects told apart by one required member whose schema is a distinct string
    /// `const` in each (`{"kind": "thread", …}` or `{"kind": "channel", …}`): the member read
    /// first picks the one branch that can accept the object.
    Union {
        tag: Box<str>,
        /// Each tag value and its branch, an [`Node::Object`].
        branches: Box<[(Box<str>, usize)]>,
    },
    /// A `$ref` to another node (only while compiling: checking follows none).
    Ref(usize),
}

/// A set of scalar JSON types, one bit each.
#[derive(Clone, Copy)]
struct Types(u8);

impl Types {
    const NULL: u8 = 1;
    const BOOLEAN: u8 = 2;
    const INTEGER: u8 = 4;
    const NUMBER: u8 = 8;
    const STRING: u8 = 16;

    fn named(name: &str) -> Option<u8> {
        Some(match name {
            "null" => Types::NULL,
            "boolean" => Types::BOOLEAN,
            "integer" => Types::INTEGER,
            "number" => Types::NUMBER,
            "string" => Types::STRING,
            _ => return None,
        })
    }

    fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }

    /// Whether a number is of these types: JSON Schema's `integer` holds any number whose
    /// fractional part is zero.
    fn admits_number(self, number: &Number) -> bool {
        self.has(Types::NUMBER)
            || (self.has(Types::INTEGER)
                && (number.is_i64()
                    || number.is_u64()
                    || number.as_f64().is_some_and(|f| f.fract() == 0.0)))
    }
}

/// A `pattern` of the form `^literal[class]{min,max}$` (or `+`, `*`, `{n}`), the literal and the
/// class of ASCII letters, digits, `_`, `-` and `:`: the form of every identifier pattern in the
/// contract, matched without a regex. A text matches when it starts with the literal and the rest
/// is `min..=max` characters of the class (each one byte: a class of ASCII matches no other).
struct Simple {
    literal: Box<str>,
    /// Bit `b` is set when the byte `b` is in the class.
    class: u128,
    min: usize,
    max: usize,
}

impl Simple {
    /// The pattern when it has the simple form, else `None` (jsonschema's regex checks it).
    fn parse(pattern: &str) -> Option<Simple> {
        let plain = |c: u8| c.is_ascii_alphanumeric() || matches!(c, b'_' | b':');
        let body = pattern.strip_prefix('^')?.strip_suffix('$')?.as_bytes();
        let open = body.iter().position(|&c| c == b'[')?;
        let (literal, rest) = body.split_at(open);
        if !literal.iter().all(|&c| plain(c) || c == b'-') {
            return None;
        }
        let close = rest.iter().position(|&c| c == b']')?;
        let (items, quantifier) = (&rest[1..close], &rest[close + 1..]);
        let mut class = 0u128;
        let mut at = 0;
        while at < items.len() {
            let c = items[at];
            if c == b'-' && (at == 0 || at == items.len() - 1) {
                class |= 1 << b'-';
                at += 1;
            } else if at + 2 < items.len() && items[at + 1] == b'-' {
                let end = items[at + 2];
                if !(c.is_ascii_alphanumeric() && end.is_ascii_alphanumeric() && c <= end) {
                    return None;
                }
                (c..=end).for_each(|b| class |= 1 << b);
                at += 3;
            } else if plain(c) {
                class |= 1 << c;
                at += 1;
            } else {
                return None;
            }
        }
        if class == 0 {
            return None;
        }
        let (min, max) = match quantifier {
            b"+" => (1, usize::MAX),
            b"*" => (0, usize::MAX),
            _ => {
                let inner =
                    std::str::from_utf8(quantifier.strip_prefix(b"{")?.strip_suffix(b"}")?).ok()?;
                let number = |text: &str| {
                    (!text.is_empty() && text.bytes().all(|c| c.is_ascii_digit()))
                        .then(|| text.parse::<usize>().ok())
                        .flatten()
                };
                match inner.split_once(',') {
                    Some((min, max)) => (number(min)?, number(max)?),
                    None => (number(inner)?, number(inner)?),
                }
            }
        };
        let literal = std::str::from_utf8(literal).ok()?.into();
        (min <= max).then_some(Simple {
            literal,
            class,
            min,
            max,
        })
    }

    fn matches(&self, text: &str) -> bool {
        text.strip_prefix(&*self.literal).is_some_and(|rest| {
            (self.min..=self.max).contains(&rest.len())
                && rest.bytes().all(|b| b < 128 && self.class & (1 << b) != 0)
        })
    }
}

/// Keywords that change nothing about which documents a schema accepts.
const ANNOTATIONS: &[&str] = &[
    "description",
    "title",
    "example",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$comment",
];

/// A scalar's keywords that jsonschema checks on the scalar itself.
const SCALAR_KEYWORDS: &[&str] = &[
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "enum",
    "const",
];

impl Shape {
    /// Compiles `schema` (self-contained, draft 2020-12, its `$defs` at the root), or `None`
    /// when it uses a keyword a shape does not check.
    pub fn compile(schema: &Value) -> Option<Shape> {
        let mut compiler = Compiler {
            root: schema,
            nodes: Vec::new(),
            refs: HashMap::new(),
        };
        let root = compiler.node(schema, true)?;
        compiler.resolve(root)
    }

    /// Whether `text` is exactly one JSON document, every object's keys distinct, that the
    /// schema accepts. `false` says only that the slow path must judge it.
    pub fn accepts(&self, text: &str) -> bool {
        let mut deserializer = serde_json::Deserializer::from_str(text);
        Check {
            shape: self,
            node: self.root,
        }
        .deserialize(&mut deserializer)
        .is_ok()
            && deserializer.end().is_ok()
    }
}

struct Compiler<'s> {
    root: &'s Value,
    nodes: Vec<Node>,
    /// `$ref` target → its node.
    refs: HashMap<&'s str, usize>,
}

impl<'s> Compiler<'s> {
    fn push(&mut self, node: Node) -> usize {
        self.nodes.push(node);
        self.nodes.len() - 1
    }

    fn node(&mut self, schema: &'s Value, root: bool) -> Option<usize> {
        let object = match schema {
            Value::Bool(true) => return Some(self.push(Node::Any)),
            Value::Object(object) => object,
            _ => return None,
        };
        let keyword = |name: &str| object.get(name);
        let known = |extra: &[&str]| {
            object.keys().all(|key| {
                ANNOTATIONS.contains(&key.as_str())
                    || extra.contains(&key.as_str())
                    || (root && (key == "$schema" || key == "$defs"))
            })
        };
        if let Some(branches) = keyword("oneOf") {
            if !known(&["oneOf"]) {
                return None;
            }
            return self.union(branches.as_array()?);
        }
        if let Some(reference) = keyword("$ref") {
            // A `$ref` beside other assertions applies both: not a shape.
            if !known(&["$ref"]) {
                return None;
            }
            return self.reference(reference.as_str()?);
        }
        match keyword("type") {
            None if known(&[]) => Some(self.push(Node::Any)),
            Some(Value::String(kind)) if kind == "object" => self.object(object, root),
            Some(Value::String(kind)) if kind == "array" => self.array(object),
            Some(_) => self.scalar(schema),
            // `const` or `enum` alone: a scalar of any type (an object or array it names goes to
            // the slow path).
            None if known(&["const", "enum"]) => self.scalar(schema),
            None => None,
        }
    }

    fn reference(&mut self, reference: &'s str) -> Option<usize> {
        if let Some(&at) = self.refs.get(reference) {
            return Some(at);
        }
        let name = reference.strip_prefix("#/$defs/")?;
        if name.contains(['/', '~', '%']) {
            return None;
        }
        let target = self.root.get("$defs")?.get(name)?;
        // The slot is taken before the target compiles, so a cycle back to it finds the slot.
        let at = self.push(Node::Ref(usize::MAX));
        self.refs.insert(reference, at);
        let compiled = self.node(target, false)?;
        self.nodes[at] = Node::Ref(compiled);
        Some(at)
    }

    /// Where `at` leads once every `Ref` on the way is followed, or `None` for a cycle of refs.
    fn through(&self, mut at: usize) -> Option<usize> {
        for _ in 0..=self.nodes.len() {
            match self.nodes[at] {
                Node::Ref(next) => at = next,
                _ => return Some(at),
            }
        }
        None
    }

    /// Points every child past the `Ref`s on its way.
    fn resolve(mut self, root: usize) -> Option<Shape> {
        let root = self.through(root)?;
        for index in 0..self.nodes.len() {
            let mut children: Vec<usize> = match &self.nodes[index] {
                Node::Object {
                    properties,
                    additional,
                    ..
                } => properties
                    .iter()
                    .map(|(_, at)| *at)
                    .chain(*additional)
                    .collect(),
                Node::Array { items, .. } => vec![*items],
                Node::Union { branches, .. } => branches.iter().map(|(_, at)| *at).collect(),
                Node::Any | Node::Scalar { .. } | Node::Ref(_) => continue,
            };
            for child in &mut children {
                *child = self.through(*child)?;
            }
            match &mut self.nodes[index] {
                Node::Object {
                    properties,
                    additional,
                    ..
                } => {
                    let mut resolved = children.into_iter();
                    for (_, at) in properties.iter_mut() {
                        *at = resolved.next().expect("one per property");
                    }
                    if let Some(at) = additional {
                        *at = resolved.next().expect("and one for the others");
                    }
                }
                Node::Array { items, .. } => *items = children[0],
                Node::Union { branches, .. } => {
                    for ((_, at), resolved) in branches.iter_mut().zip(children) {
                        *at = resolved;
                    }
                }
                Node::Any | Node::Scalar { .. } | Node::Ref(_) => {}
            }
        }
        // A branch is checked as an object once its tag is read: anything else is not a shape.
        let objects = self.nodes.iter().all(|node| match node {
            Node::Union { branches, .. } => branches
                .iter()
                .all(|(_, at)| matches!(self.nodes[*at], Node::Object { .. })),
            _ => true,
        });
        if !objects {
            return None;
        }
        Some(Shape {
            nodes: self.nodes,
            root,
        })
    }

    /// The schema `$ref`s lead to from `schema`, within the root's `$defs`.
    fn target(&self, mut schema: &'s Value) -> Option<&'s Value> {
        for _ in 0..=self
            .root
            .get("$defs")
            .and_then(Value::as_object)
            .map_or(0, |d| d.len())
        {
            let Some(reference) = schema.get("$ref") else {
                return Some(schema);
            };
            let name = reference.as_str()?.strip_prefix("#/$defs/")?;
            schema = self.root.get("$defs")?.get(name)?;
        }
        None
    }

    /// A `oneOf` whose branches are objects that each require one member `tag` whose schema is
    /// a `const` string, distinct per branch; or `None`.
    fn union(&mut self, branches: &'s [Value]) -> Option<usize> {
        let objects = branches
            .iter()
            .map(|branch| self.target(branch)?.as_object())
            .collect::<Option<Vec<_>>>()?;
        // The branch's value of member `name`, when it is a required, annotated-only `const`.
        let tag_of = |object: &'s serde_json::Map<String, Value>, name: &str| -> Option<&'s str> {
            let required = object.get("required")?.as_array()?;
            if !required.iter().any(|r| r.as_str() == Some(name)) {
                return None;
            }
            let member = object.get("properties")?.get(name)?.as_object()?;
            let only_const = member
                .keys()
                .all(|key| key == "const" || ANNOTATIONS.contains(&key.as_str()));
            only_const.then_some(())?;
            member.get("const")?.as_str()
        };
        let first = objects.first()?;
        let tag = first.get("properties")?.as_object()?.keys().find(|name| {
            let values: Option<Vec<&str>> = objects.iter().map(|o| tag_of(o, name)).collect();
            values.is_some_and(|values| {
                values
                    .iter()
                    .enumerate()
                    .all(|(i, value)| !values[..i].contains(value))
            })
        })?;
        let at = self.push(Node::Any);
        let mut compiled = Vec::with_capacity(branches.len());
        for (branch, object) in branches.iter().zip(&objects) {
            let value = tag_of(object, tag).expect("every branch has the tag");
            compiled.push((Box::<str>::from(value), self.node(branch, false)?));
        }
        self.nodes[at] = Node::Union {
            tag: tag.as_str().into(),
            branches: compiled.into_boxed_slice(),
        };
        Some(at)
    }

    fn object(&mut self, object: &'s serde_json::Map<String, Value>, root: bool) -> Option<usize> {
        let known = object.keys().all(|key| {
            ANNOTATIONS.contains(&key.as_str())
                || matches!(
                    key.as_str(),
                    "type" | "properties" | "required" | "additionalProperties"
                )
                || (root && matches!(key.as_str(), "$schema" | "$defs"))
        });
        if !known {
            return None;
        }
        let at = self.push(Node::Any);
        let declared = match object.get("properties") {
            Some(Value::Object(declared)) => declared.iter().collect::<Vec<_>>(),
            None => Vec::new(),
            Some(_) => return None,
        };
        if declared.len() > 64 {
            return None;
        }
        let mut properties = Vec::with_capacity(declared.len());
        for (name, schema) in declared {
            properties.push((Box::<str>::from(name.as_str()), self.node(schema, false)?));
        }
        let mut required = 0u64;
        for name in object
            .get("required")
            .map_or(Some(&[][..]), |names| names.as_array().map(Vec::as_slice))?
        {
            let name = name.as_str()?;
            // A required name without a declared schema: not a shape.
            let index = properties.iter().position(|(p, _)| &**p == name)?;
            required |= 1 << index;
        }
        let additional = match object.get("additionalProperties") {
            Some(Value::Bool(false)) => None,
            None | Some(Value::Bool(true)) => Some(self.push(Node::Any)),
            Some(schema) => Some(self.node(schema, false)?),
        };
        self.nodes[at] = Node::Object {
            properties: properties.into_boxed_slice(),
            required,
            additional,
        };
        Some(at)
    }

    fn array(&mut self, object: &'s serde_json::Map<String, Value>) -> Option<usize> {
        let known = object.keys().all(|key| {
            ANNOTATIONS.contains(&key.as_str())
                || matches!(key.as_str(), "type" | "items" | "minItems" | "maxItems")
        });
        if !known {
            return None;
        }
        let count = |name: &str, absent: usize| match object.get(name) {
            None => Some(absent),
            Some(value) => value
                .as_u64()
                .map(|n| usize::try_from(n).unwrap_or(usize::MAX)),
        };
        let (min, max) = (count("minItems", 0)?, count("maxItems", usize::MAX)?);
        let at = self.push(Node::Any);
        let items = match object.get("items") {
            None => self.push(Node::Any),
            Some(schema) => self.node(schema, false)?,
        };
        self.nodes[at] = Node::Array { items, min, max };
        Some(at)
    }

    fn scalar(&mut self, schema: &'s Value) -> Option<usize> {
        let object = schema.as_object()?;
        let types = match object.get("type").unwrap_or(&Value::Null) {
            Value::Null => Types::NULL | Types::BOOLEAN | Types::NUMBER | Types::STRING,
            Value::String(name) => Types::named(name)?,
            Value::Array(names) if !names.is_empty() => names
                .iter()
                .try_fold(0, |set, name| Some(set | Types::named(name.as_str()?)?))?,
            _ => return None,
        };
        let known = object.keys().all(|key| {
            let key = key.as_str();
            SCALAR_KEYWORDS.contains(&key)
                || ANNOTATIONS.contains(&key)
                || matches!(key, "type" | "minLength" | "maxLength")
        });
        if !known {
            return None;
        }
        let bound = |name: &str, absent: u64| match object.get(name) {
            None => Some(absent),
            Some(value) => value.as_u64(),
        };
        let (min, max) = (bound("minLength", 0)?, bound("maxLength", u64::MAX)?);
        let length = (min > 0 || max < u64::MAX).then_some((min, max));
        // A pattern of the simple form is checked here; jsonschema checks whatever else is left.
        let pattern = match object.get("pattern") {
            Some(Value::String(pattern)) => Simple::parse(pattern),
            _ => None,
        };
        let mut remaining = object.clone();
        if pattern.is_some() {
            remaining.remove("pattern");
        }
        let checked = || {
            remaining
                .iter()
                .filter(|(key, _)| SCALAR_KEYWORDS.contains(&key.as_str()))
                .map(|(key, value)| (key.as_str(), value))
        };
        let native = Native::of(checked());
        let rest = if checked().next().is_some() {
            let validator = jsonschema::options_for::<BorrowedJson>()
                .with_draft(jsonschema::Draft::Draft202012)
                .should_validate_formats(true)
                .build(&Value::Object(remaining))
                .ok()?;
            Some(Box::new(validator))
        } else {
            None
        };
        Some(self.push(Node::Scalar {
            types: Types(types),
            length,
            pattern,
            native,
            rest,
        }))
    }
}

/// Why a text was not accepted (never shown: the slow path reports).
fn refuse<E: de::Error>() -> E {
    E::custom("the shape does not accept this text")
}

/// Checks one value against one node as it is read.
struct Check<'a> {
    shape: &'a Shape,
    node: usize,
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        match &self.shape.nodes[self.node] {
            // Read whole: `Borrowed` refuses a repeated key at any depth, as the slow path does.
            Node::Any => ValueSeed.deserialize(deserializer).map(drop),
            _ => deserializer.deserialize_any(self),
        }
    }
}

impl Check<'_> {
    /// A scalar read as `value`, against this node.
    fn scalar<E: de::Error>(&self, value: Borrowed<'_>) -> Result<(), E> {
        let Node::Scalar {
            types,
            length,
            pattern,
            native,
            rest,
        } = &self.shape.nodes[self.node]
        else {
            return Err(refuse());
        };
        let typed = match &value {
            Borrowed::Null => types.has(Types::NULL),
            Borrowed::Bool(_) => types.has(Types::BOOLEAN),
            Borrowed::Number(number) => types.admits_number(number),
            Borrowed::String(text) => {
                types.has(Types::STRING)
                    && length.is_none_or(|(min, max)| length_within(text, min, max))
                    && pattern.as_ref().is_none_or(|pattern| pattern.matches(text))
            }
            Borrowed::Array(_) | Borrowed::Object(_) => false,
        };
        let rest_met = || {
            native.as_ref().is_some_and(|native| native.accepts(&value))
                || rest.as_ref().is_none_or(|rest| rest.is_valid(&value))
        };
        if typed && rest_met() {
            Ok(())
        } else {
            Err(refuse())
        }
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a value its schema accepts")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.scalar(Borrowed::Null)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.scalar(Borrowed::Bool(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.scalar(Borrowed::Number(v.into()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.scalar(Borrowed::Number(v.into()))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        let number = Number::from_f64(v).ok_or_else(refuse)?;
        self.scalar(Borrowed::Number(number))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.scalar(Borrowed::String(Cow::Borrowed(v)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let Node::Array { items, min, max } = self.shape.nodes[self.node] else {
            return Err(refuse());
        };
        let mut count = 0usize;
        while seq
            .next_element_seed(Check {
                shape: self.shape,
                node: items,
            })?
            .is_some()
        {
            count += 1;
            if count > max {
                return Err(refuse());
            }
        }
        if count < min {
            return Err(refuse());
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        match &self.shape.nodes[self.node] {
            Node::Object { .. } => self.members(map, 0, 0),
            Node::Union { tag, branches } => {
                // The tag first, or the slow path judges: no member is read twice.
                match map.next_key_seed(KeySeed {
                    properties: &[],
                    next: 0,
                })? {
                    Some(Key::Other(name)) if name == **tag => {}
                    _ => return Err(refuse()),
                }
                let Borrowed::String(value) = map.next_value_seed(ValueSeed)? else {
                    return Err(refuse());
                };
                let (_, branch) = branches
                    .iter()
                    .find(|(tag_value, _)| **tag_value == *value)
                    .ok_or_else(refuse)?;
                let Node::Object { properties, .. } = &self.shape.nodes[*branch] else {
                    return Err(refuse());
                };
                let index = properties
                    .iter()
                    .position(|(name, _)| name == tag)
                    .ok_or_else(refuse)?;
                Check {
                    shape: self.shape,
                    node: *branch,
                }
                .members(map, 1 << index, index + 1)
            }
            _ => Err(refuse()),
        }
    }
}

impl Check<'_> {
    /// The rest of an object's members against this node, an [`Node::Object`]: `seen` has a bit
    /// for each declared member already read, `next` the index of the one expected next.
    fn members<'de, A: MapAccess<'de>>(
        self,
        mut map: A,
        mut seen: u64,
        mut next: usize,
    ) -> Result<(), A::Error> {
        let Node::Object {
            properties,
            required,
            additional,
        } = &self.shape.nodes[self.node]
        else {
            return Err(refuse());
        };
        // Names of undeclared members, to refuse a repeated one.
        let mut others: Vec<Cow<'de, str>> = Vec::new();
        // Members usually come in the order the schema declares them (both sorted by name): the
        // search for a name starts after the last one found.
        while let Some(name) = map.next_key_seed(KeySeed { properties, next })? {
            let node = match name {
                Key::Declared(index) => {
                    if seen & (1 << index) != 0 {
                        return Err(refuse());
                    }
                    seen |= 1 << index;
                    next = index + 1;
                    properties[index].1
                }
                Key::Other(name) => {
                    let Some(node) = *additional else {
                        return Err(refuse());
                    };
                    if others.contains(&name) {
                        return Err(refuse());
                    }
                    others.push(name);
                    node
                }
            };
            map.next_value_seed(Check {
                shape: self.shape,
                node,
            })?;
        }
        if seen & required != *required {
            return Err(refuse());
        }
        Ok(())
    }
}

/// An object key: a declared property's index, or another name.
enum Key<'de> {
    Declared(usize),
    Other(Cow<'de, str>),
}

struct KeySeed<'a> {
    properties: &'a [(Box<str>, usize)],
    /// The index of the name expected next: tried first.
    next: usize,
}

impl<'de> DeserializeSeed<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key<'de>, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl KeySeed<'_> {
    fn declared(&self, name: &str) -> Option<Key<'static>> {
        let is = |index: &usize| &*self.properties[*index].0 == name;
        // The expected name first, then the others in order (no division per key).
        Some(self.next)
            .filter(|next| *next < self.properties.len())
            .filter(is)
            .or_else(|| (0..self.properties.len()).find(is))
            .map(Key::Declared)
    }
}

impl<'de> Visitor<'de> for KeySeed<'_> {
    type Value = Key<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
        Ok(self.declared(v).unwrap_or(Key::Other(Cow::Borrowed(v))))
    }

    fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
        Ok(self
            .declared(v)
            .unwrap_or_else(|| Key::Other(Cow::Owned(v.to_string()))))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::contract::ToolId;
    use crate::contract::catalog::TOOLS;
    use crate::contract::validate::{Output, Validators};

    /// The slow path's verdict: one document with distinct keys, without violations.
    fn slow(validators: &Validators, tool: ToolId, text: &str) -> bool {
        Borrowed::parse(text).is_ok_and(|document| {
            validators
                .output_violations_in_place(Output::Tool(tool), &document)
                .is_empty()
        })
    }

    fn message(n: usize) -> Value {
        json!({
            "id": format!("msg_{n:08}"),
            "target": "channel:chn_00000001",
            "authorId": "agt_00000001",
            "content": format!("message {n}: \"quoted\", caf\u{e9}, \u{1f600}"),
            "createdAt": "2026-12-01T10:00:00.123Z",
            "reactions": [{ "emoji": ":+1:", "count": 2, "mine": true }],
            "attachments": [{
                "id": "att_00000001",
                "name": "notes.txt",
                "mediaType": "text/plain",
                "size": 12
            }]
        })
    }

    /// A valid result of each tool.
    fn sample(name: &str) -> Value {
        let reactions = json!([{ "emoji": "\u{1f600}", "count": 1, "mine": false }]);
        match name {
            "attachment_read" => json!({
                "attachment": message(1)["attachments"][0].clone(),
                "offset": 0, "nextOffset": 4, "encoding": "utf-8", "data": "note"
            }),
            "kb_fetch" => json!({
                "documentId": "doc-1", "title": "Guide", "section": 0, "nextSection": 1,
                "content": "text"
            }),
            "kb_search" => json!({ "documents": [{
                "documentId": "doc-1", "title": "Guide", "snippet": "…", "score": 0.5
            }] }),
            "memory_search" => json!({ "matches": [{
                "path": "notes/a.md", "heading": "A", "lineStart": 1, "lineEnd": 3, "score": 1
            }] }),
            "message_history_read" => json!({
                "target": "channel:chn_00000001",
                "messages": [message(1), message(2)],
                "nextCursor": "abc_-09"
            }),
            "message_send" => json!({ "message": message(1) }),
            "reaction_add" | "reaction_remove" => {
                json!({ "messageId": "msg_00000001", "reactions": reactions })
            }
            other => panic!("no sample for `{other}`: add one"),
        }
    }

    /// Every pointer into `value`, the root first.
    fn pointers(value: &Value, at: String, into: &mut Vec<String>) {
        into.push(at.clone());
        match value {
            Value::Object(members) => {
                for (name, member) in members {
                    pointers(member, format!("{at}/{name}"), into);
                }
            }
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    pointers(item, format!("{at}/{i}"), into);
                }
            }
            _ => {}
        }
    }

    /// `document` written with `text` in place of the value at `pointer`.
    fn spliced(document: &Value, pointer: &str, text: &str) -> String {
        const HOLE: &str = "\u{1}hole";
        let mut holed = document.clone();
        *holed.pointer_mut(pointer).unwrap() = json!(HOLE);
        serde_json::to_string(&holed)
            .unwrap()
            .replace(&serde_json::to_string(HOLE).unwrap(), text)
    }

    /// Texts near `document`: each value removed, replaced, grown and shrunk, each object with an
    /// extra or a repeated member, keys escaped, and text around the document.
    fn variants(document: &Value) -> Vec<String> {
        let mut texts = vec![serde_json::to_string(document).unwrap()];
        let replacements = [
            json!(null),
            json!(true),
            json!(0),
            json!(-1),
            json!(1),
            json!(1.0),
            json!(1.5),
            json!(-0.0),
            json!(1e300),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(""),
            json!("x"),
            json!("x".repeat(4000)),
            json!("x".repeat(4001)),
            json!("\u{e9}".repeat(2001)),
            json!("\u{1f600}".repeat(33)),
            json!("has space"),
            json!("msg_0000000"),
            json!("2026-13-01T00:00:00Z"),
            json!("2026-12-01T10:00:00Z"),
            json!([]),
            json!({}),
        ];
        let mut at = Vec::new();
        pointers(document, String::new(), &mut at);
        for pointer in &at {
            let value = document.pointer(pointer).unwrap();
            for replacement in &replacements {
                if !pointer.is_empty() {
                    let mut changed = document.clone();
                    *changed.pointer_mut(pointer).unwrap() = replacement.clone();
                    texts.push(serde_json::to_string(&changed).unwrap());
                }
            }
            if let Some((parent, name)) = pointer.rsplit_once('/') {
                let mut removed = document.clone();
                match removed.pointer_mut(parent).unwrap() {
                    Value::Object(members) => drop(members.remove(name)),
                    Value::Array(items) => drop(items.remove(name.parse::<usize>().unwrap())),
                    _ => unreachable!(),
                }
                texts.push(serde_json::to_string(&removed).unwrap());
            }
            match value {
                Value::Object(members) => {
                    let mut extra = document.clone();
                    extra.pointer_mut(pointer).unwrap()["zz"] = json!(1);
                    texts.push(serde_json::to_string(&extra).unwrap());
                    if let Some((name, member)) = members.iter().next() {
                        let written = serde_json::to_string(value).unwrap();
                        let repeated = format!(
                            "{{{}:{},{}",
                            serde_json::to_string(name).unwrap(),
                            serde_json::to_string(member).unwrap(),
                            &written[1..]
                        );
                        texts.push(spliced(document, pointer, &repeated));
                        // The same name, escaped.
                        let escaped: String = name
                            .chars()
                            .map(|c| format!("\\u{:04x}", c as u32))
                            .collect();
                        texts.push(spliced(
                            document,
                            pointer,
                            &repeated.replacen(
                                &format!("\"{name}\""),
                                &format!("\"{escaped}\""),
                                1,
                            ),
                        ));
                    }
                }
                Value::Array(items) if !items.is_empty() => {
                    for n in [0, 1, 10, 11, 20, 21, 50, 51, 64, 65, 100, 101] {
                        let mut grown = document.clone();
                        *grown.pointer_mut(pointer).unwrap() = json!(vec![items[0].clone(); n]);
                        texts.push(serde_json::to_string(&grown).unwrap());
                    }
                }
                _ => {}
            }
        }
        let whole = texts[0].clone();
        texts.extend([
            format!(" {whole}\n"),
            format!("{whole} {whole}"),
            format!("{whole},"),
            whole[..whole.len() - 1].to_string(),
            whole.replace("\":", "\" :"),
            whole.replace("\"id\":", "\"\\u0069d\":"),
            whole.replace("message 1", "line\\none"),
            // The grammar at its edges: escapes, control bytes, numbers, literals.
            whole.replace("message 1", "message\\u00e9 1"),
            whole.replace("message 1", "message\\ud800 1"),
            whole.replace("message 1", "message\\ud83d\\ude00 1"),
            whole.replace("message 1", "message\\x 1"),
            whole.replace("message 1", "message\u{1} 1"),
            whole.replace("message 1", "message\u{7f} 1"),
            whole.replace("message 1", "message 1\\"),
            whole.replace(":12", ":012"),
            whole.replace(":12", ":1."),
            whole.replace(":12", ":-"),
            whole.replace(":12", ":1e2"),
            whole.replace(":12", ":1E+2"),
            whole.replace(":12", ":12.0"),
            whole.replace(":12", ":-0"),
            whole.replace(":12", ":1e400"),
            whole.replace(":12", ":18446744073709551616"),
            whole.replace(":2", ":\t2\r\n"),
            whole.replace("true", "tru"),
            whole.replace("true", "truex"),
            whole.replace("true", "nul"),
            "[]".to_string(),
            "null".to_string(),
            String::new(),
        ]);
        texts
    }

    /// Every tool's shape gives the slow path's verdict on every text near a valid result, and
    /// both accept that result (so the texts test both answers).
    #[test]
    fn a_shape_judges_as_the_tree_and_jsonschema_do() {
        let validators = Validators::new().unwrap();
        let mut judged = (0, 0);
        for tool in TOOLS {
            let schema: Value = serde_json::from_str(tool.output_schema).unwrap();
            let shape = Shape::compile(&schema)
                .unwrap_or_else(|| panic!("`{}`'s output schema has no shape", tool.name));
            let document = sample(tool.name);
            let texts = variants(&document);
            assert!(shape.accepts(&texts[0]), "`{}`: {}", tool.name, texts[0]);
            for text in &texts {
                let expected = slow(&validators, tool.id, text);
                assert_eq!(shape.accepts(text), expected, "`{}`: {text}", tool.name);
                if expected {
                    judged.0 += 1;
                } else {
                    judged.1 += 1;
                }
            }
        }
        assert!(judged.0 > 100 && judged.1 > 1000, "{judged:?}");
    }

    /// A page holds at most 100 messages: the shape's bound is the schema's, at its edge.
    #[test]
    fn a_history_page_is_bounded_at_its_edge() {
        let validators = Validators::new().unwrap();
        let id = ToolId::MessageHistoryRead;
        let page = |n: usize| {
            let messages: Vec<Value> = (0..n).map(message).collect();
            json!({ "target": "channel:chn_00000001", "messages": messages }).to_string()
        };
        assert_eq!(
            validators.output_conforms(Output::Tool(id), &page(100)),
            Some(true)
        );
        assert_eq!(
            validators.output_conforms(Output::Tool(id), &page(101)),
            Some(false)
        );
        assert!(slow(&validators, id, &page(100)) && !slow(&validators, id, &page(101)));
    }

    /// Keywords outside the checked set leave a schema without a shape, not checked loosely.
    #[test]
    fn an_unchecked_keyword_leaves_no_shape() {
        for schema in [
            json!({ "type": "object", "minProperties": 1 }),
            json!({ "type": "array", "uniqueItems": true }),
            json!({ "oneOf": [{ "type": "string" }] }),
            json!({ "type": "object", "properties": { "a": { "$ref": "#/$defs/A", "minLength": 1 } } }),
            json!({ "type": "object", "properties": { "a": { "$ref": "#/$defs/Missing" } }, "$defs": {} }),
            json!({ "type": "object", "required": ["undeclared"] }),
            json!({ "pattern": "^a$" }),
            json!({ "type": "string", "contentEncoding": "base64" }),
            json!(false),
        ] {
            assert!(Shape::compile(&schema).is_none(), "{schema}");
        }
    }

    /// A `oneOf` of objects told apart by a `const` member is checked by that member when it
    /// comes first, with no false yes against jsonschema; any other order is the slow path's.
    #[test]
    fn a_tagged_union_is_checked_by_its_tag() {
        let schema = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$ref": "#/$defs/Location",
            "$defs": {
                "Location": { "oneOf": [
                    { "type": "object", "required": ["kind", "threadId"],
                      "properties": { "kind": { "const": "thread" }, "threadId": { "type": "string", "maxLength": 4 } },
                      "additionalProperties": false },
                    { "$ref": "#/$defs/Channel" }
                ] },
                "Channel": { "type": "object", "required": ["kind", "channelId"],
                    "properties": { "kind": { "const": "channel" }, "channelId": { "type": "string" } },
                    "additionalProperties": false }
            }
        });
        let shape = Shape::compile(&schema).expect("a tagged union has a shape");
        let slow = jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(&schema)
            .unwrap();
        for (text, fast) in [
            (r#"{"kind":"thread","threadId":"t1"}"#, true),
            (r#"{"kind":"channel","channelId":"c1"}"#, true),
            (r#"{"kind":"thread","threadId":"too long"}"#, false),
            (r#"{"kind":"thread","channelId":"c1"}"#, false),
            (r#"{"kind":"thread"}"#, false),
            (r#"{"kind":"thread","threadId":"t1","extra":1}"#, false),
            (
                r#"{"kind":"thread","threadId":"t1","kind":"thread"}"#,
                false,
            ),
            (r#"{"kind":"other","threadId":"t1"}"#, false),
            (r#"{"kind":1,"threadId":"t1"}"#, false),
            (r#"{"kind":"th\u0072ead","threadId":"t1"}"#, true),
            (r#"{"threadId":"t1","kind":"thread"}"#, false),
            (r#"["kind","thread"]"#, false),
            (r#""thread""#, false),
        ] {
            assert_eq!(shape.accepts(text), fast, "{text}");
            let valid = slow.is_valid(&serde_json::from_str(text).unwrap());
            assert!(!fast || valid, "a false yes: {text}");
        }
        // Branches without one distinct required `const` member are not a tagged union.
        for branches in [
            json!([{ "type": "object", "required": ["kind"], "properties": { "kind": { "const": "a" } } },
                   { "type": "object", "required": ["kind"], "properties": { "kind": { "const": "a" } } }]),
            json!([{ "type": "object", "required": ["kind"], "properties": { "kind": { "const": "a" } } },
                   { "type": "object", "properties": { "kind": { "const": "b" } } }]),
            json!([{ "type": "object", "required": ["kind"], "properties": { "kind": { "const": "a", "minLength": 1 } } },
                   { "type": "object", "required": ["kind"], "properties": { "kind": { "const": "b" } } }]),
        ] {
            assert!(
                Shape::compile(&json!({ "oneOf": branches })).is_none(),
                "{branches}"
            );
        }
    }

    /// Every built-in action's and tool's output schema has a shape, so an answer the reference
    /// server wrote is checked as it is read.
    #[test]
    fn every_output_has_a_shape() {
        let validators = Validators::new().unwrap();
        let missing: Vec<String> = Output::all()
            .filter(|output| validators.output_conforms(*output, "null").is_none())
            .map(|output| output.name())
            .collect();
        assert_eq!(missing, Vec::<String>::new());
    }

    /// A `$ref` may lead back to its own definition: a tree of any depth is checked.
    #[test]
    fn a_recursive_definition_is_followed() {
        let schema = json!({
            "$ref": "#/$defs/Node",
            "$defs": { "Node": {
                "type": "object",
                "properties": {
                    "name": { "type": "string", "maxLength": 3 },
                    "children": { "type": "array", "items": { "$ref": "#/$defs/Node" } }
                },
                "required": ["name"],
                "additionalProperties": false
            } }
        });
        let shape = Shape::compile(&schema).unwrap();
        assert!(
            shape.accepts(r#"{"name":"a","children":[{"name":"b","children":[{"name":"c"}]}]}"#)
        );
        assert!(
            !shape
                .accepts(r#"{"name":"a","children":[{"name":"b","children":[{"name":"long"}]}]}"#)
        );
        assert!(!shape.accepts(r#"{"name":"a","children":[{"children":[]}]}"#));
        assert!(
            Shape::compile(
                &json!({ "$ref": "#/$defs/A", "$defs": { "A": { "$ref": "#/$defs/A" } } })
            )
            .is_none()
        );
    }

    /// A repeated name is refused wherever it is: among undeclared members, and inside a value
    /// of any shape (a reader downstream may take the other value).
    #[test]
    fn a_repeated_name_is_refused_anywhere() {
        let open = Shape::compile(&json!({
            "type": "object",
            "properties": { "a": { "type": "integer" } },
            "additionalProperties": { "type": "integer" }
        }))
        .unwrap();
        assert!(open.accepts(r#"{"a":1,"b":2,"c":3}"#));
        assert!(!open.accepts(r#"{"a":1,"b":2,"b":3}"#));
        assert!(!open.accepts(r#"{"b":2,"a":1,"\u0062":3}"#));
        assert!(!open.accepts(r#"{"a":1,"b":"2"}"#));
        let any = Shape::compile(&json!({ "type": "object" })).unwrap();
        assert!(any.accepts(r#"{"x":{"y":[{"z":1,"w":2}]}}"#));
        assert!(!any.accepts(r#"{"x":{"y":[{"z":1,"z":2}]}}"#));
        assert!(!any.accepts(r#"{"x":1,"x":1}"#));
    }

    /// Every simple pattern in the contract's schemas matches what jsonschema's regex matches,
    /// at and past each edge of its form.
    #[test]
    fn a_simple_pattern_matches_as_the_regex_does() {
        fn patterns(value: &Value, into: &mut Vec<String>) {
            match value {
                Value::Object(members) => {
                    if let Some(Value::String(pattern)) = members.get("pattern") {
                        into.push(pattern.clone());
                    }
                    members.values().for_each(|member| patterns(member, into));
                }
                Value::Array(items) => items.iter().for_each(|item| patterns(item, into)),
                _ => {}
            }
        }
        let mut found = Vec::new();
        let schemas = TOOLS
            .iter()
            .flat_map(|tool| [tool.input_schema, tool.output_schema])
            .chain(
                crate::contract::catalog::ACTIONS
                    .iter()
                    .flat_map(|action| [action.input_schema, action.output_schema]),
            );
        for schema in schemas {
            patterns(&serde_json::from_str(schema).unwrap(), &mut found);
        }
        found.sort();
        found.dedup();
        let simple: Vec<(String, Simple)> = found
            .into_iter()
            .filter_map(|pattern| Simple::parse(&pattern).map(|simple| (pattern, simple)))
            .collect();
        assert!(
            simple.iter().any(|(p, _)| p == "^msg_[0-9A-Za-z]{8,64}$"),
            "{}",
            simple.len()
        );
        let mut probes = 0;
        for (pattern, simple) in &simple {
            let regex = jsonschema::validator_for(&json!({ "type": "string", "pattern": pattern }))
                .unwrap();
            let member = (0u8..128).find(|&b| simple.class & (1 << b) != 0).unwrap() as char;
            let literal = &simple.literal;
            let mut texts = vec![String::new(), literal.to_string(), literal.to_uppercase()];
            for n in [
                simple.min.saturating_sub(1),
                simple.min,
                simple.min + 1,
                simple.max.min(300),
            ]
            .into_iter()
            .chain(simple.max.checked_add(1).filter(|&n| n < 300))
            {
                let run = member.to_string().repeat(n);
                texts.extend([
                    format!("{literal}{run}"),
                    run.clone(),
                    format!("x{literal}{run}"),
                    format!("{literal}{run}\n"),
                    format!("{literal}{run} "),
                    format!("{literal}{run}\u{e9}"),
                    format!("{literal}\u{e9}{run}"),
                    format!("{literal}{run}!"),
                    format!("{literal}{run}-"),
                    format!("{literal}{run}_"),
                    format!("{literal}{run}:"),
                ]);
            }
            for text in texts {
                assert_eq!(
                    simple.matches(&text),
                    regex.is_valid(&json!(text)),
                    "{pattern} on {text:?}"
                );
                probes += 1;
            }
        }
        assert!(probes > 100, "{probes}");
        for pattern in [
            "^[^\\s]+$",
            "^a[b]{2,1}$",
            "^(a|b)[c]+$",
            "^[a-\\d]+$",
            "^a[b]$",
            "[a]+",
        ] {
            assert!(Simple::parse(pattern).is_none(), "{pattern}");
        }
    }
}
