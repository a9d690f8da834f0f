//! Native checks of the scalar keywords the contract's outputs carry on every message: a
//! `date-time` in the form this program writes it, an integer's `minimum` and `maximum`, and the
//! pattern `^[^\s]+$`. Each check is sufficient, not necessary: what it accepts, the JSON Schema
//! validator accepts too; anything else (another form of time, a number that is not an integer,
//! a character some regex engine counts as a space) goes to the validator, which decides.

use serde_json::Value;

use crate::contract::borrowed::Borrowed;

/// The one pattern checked here: a text of one or more characters, none of them a space.
const NO_SPACE: &str = r"^[^\s]+$";

/// The native checks of one scalar schema's keywords.
pub(crate) struct Native {
    date_time: bool,
    no_space: bool,
    minimum: Option<i64>,
    maximum: Option<i64>,
}

impl Native {
    /// The checks of `keywords` (a scalar schema's value keywords, every other one already
    /// handled), when each of them has one here; `None` otherwise.
    pub(crate) fn of<'k>(keywords: impl Iterator<Item = (&'k str, &'k Value)>) -> Option<Native> {
        let mut native = Native {
            date_time: false,
            no_space: false,
            minimum: None,
            maximum: None,
        };
        for (keyword, value) in keywords {
            match (keyword, value) {
                ("format", Value::String(format)) if format == "date-time" => {
                    native.date_time = true
                }
                ("pattern", Value::String(pattern)) if pattern == NO_SPACE => {
                    native.no_space = true
                }
                ("minimum", Value::Number(n)) => native.minimum = Some(n.as_i64()?),
                ("maximum", Value::Number(n)) => native.maximum = Some(n.as_i64()?),
                _ => return None,
            }
        }
        Some(native)
    }

    /// Whether `value` surely meets these keywords (`false`: the validator decides). A keyword
    /// applies to its own kind of value only: a `format` to a string, a `minimum` to a number.
    pub(crate) fn accepts(&self, value: &Borrowed<'_>) -> bool {
        match value {
            Borrowed::String(text) => {
                (!self.date_time || is_date_time(text)) && (!self.no_space || has_no_space(text))
            }
            Borrowed::Number(number) => match number.as_i64() {
                Some(n) => {
                    self.minimum.is_none_or(|min| n >= min)
                        && self.maximum.is_none_or(|max| n <= max)
                }
                None => false,
            },
            Borrowed::Null | Borrowed::Bool(_) => true,
            Borrowed::Array(_) | Borrowed::Object(_) => false,
        }
    }
}

/// Whether `text` is one or more characters, none of them a space to any regex engine: not
/// Unicode's `White_Space` (Rust's and the `regex` crate's `\s`, which holds ECMAScript's spaces
/// and line terminators but U+FEFF), nor U+FEFF, nor U+180E (a space in older Unicode).
fn has_no_space(text: &str) -> bool {
    !text.is_empty()
        && text
            .chars()
            .all(|c| !c.is_whitespace() && c != '\u{FEFF}' && c != '\u{180E}')
}

/// Whether `text` is `YYYY-MM-DDTHH:MM:SS[.f…]Z` (year 0001 to 9999, one to nine digits of a
/// second's fraction, the date a real one, the second not a leap second): the form this program
/// writes, a `date-time` by RFC 3339.
fn is_date_time(text: &str) -> bool {
    let b = text.as_bytes();
    if b.len() < 20 || b[b.len() - 1] != b'Z' {
        return false;
    }
    let number = |range: std::ops::Range<usize>| -> Option<u32> {
        b[range].iter().try_fold(0u32, |n, &c| {
            c.is_ascii_digit().then(|| n * 10 + u32::from(c - b'0'))
        })
    };
    let separators =
        b[4] == b'-' && b[7] == b'-' && b[10] == b'T' && b[13] == b':' && b[16] == b':';
    let fraction = &b[19..b.len() - 1];
    let fraction_ok = fraction.is_empty()
        || (fraction.len() >= 2
            && fraction.len() <= 10
            && fraction[0] == b'.'
            && fraction[1..].iter().all(u8::is_ascii_digit));
    let (Some(year), Some(month), Some(day), Some(hour), Some(minute), Some(second)) = (
        number(0..4),
        number(5..7),
        number(8..10),
        number(11..13),
        number(14..16),
        number(17..19),
    ) else {
        return false;
    };
    separators
        && fraction_ok
        && year >= 1
        && (1..=12).contains(&month)
        && day >= 1
        && day <= days_in_month(year, month)
        && hour <= 23
        && minute <= 59
        && second <= 59
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400)) => {
            29
        }
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use serde_json::json;

    use super::*;

    /// The validator the shape falls back to, for the same keywords.
    fn validator(schema: Value) -> jsonschema::Validator {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .should_validate_formats(true)
            .build(&schema)
            .unwrap()
    }

    fn native(schema: &Value) -> Native {
        Native::of(
            schema
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.as_str(), v)),
        )
        .unwrap()
    }

    #[test]
    fn what_a_date_time_check_accepts_the_validator_accepts() {
        let schema = json!({"format": "date-time"});
        let (check, full) = (native(&schema), validator(schema));
        let accepted = [
            "2026-12-05T16:00:40Z",
            "2026-12-05T16:00:40.123Z",
            "2024-02-29T23:59:59.999999999Z",
            "0001-01-01T00:00:00Z",
        ];
        for text in accepted {
            assert!(
                check.accepts(&Borrowed::String(Cow::Borrowed(text))),
                "{text}"
            );
            assert!(full.is_valid(&json!(text)), "{text}");
        }
        // Refused here: the validator decides (some of these it accepts, in other forms).
        let deferred = [
            "2026-12-05T16:00:40+01:00",
            "2026-12-05t16:00:40z",
            "2023-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-12-05T24:00:00Z",
            "2026-12-31T23:59:60Z",
            "2026-12-05T16:00:40.Z",
            "2026-12-05T16:00:40.1234567890Z",
            "2026-12-05 16:00:40Z",
            "2026-12-05T16:00Z",
            "0000-01-01T00:00:00Z",
            "+026-12-05T16:00:40Z",
            "",
        ];
        for text in deferred {
            assert!(
                !check.accepts(&Borrowed::String(Cow::Borrowed(text))),
                "{text}"
            );
        }
    }

    #[test]
    fn what_a_no_space_check_accepts_the_validator_accepts() {
        let schema = json!({"pattern": NO_SPACE});
        let (check, full) = (native(&schema), validator(schema));
        for text in ["👍", ":tada:", "a", "x\u{200B}y"] {
            assert!(
                check.accepts(&Borrowed::String(Cow::Borrowed(text))),
                "{text}"
            );
            assert!(full.is_valid(&json!(text)), "{text}");
        }
        for text in [
            "",
            "a b",
            "\t",
            "a\u{00A0}",
            "\u{FEFF}",
            "\u{180E}",
            "\u{0085}",
            "\u{3000}",
        ] {
            assert!(
                !check.accepts(&Borrowed::String(Cow::Borrowed(text))),
                "{text:?}"
            );
        }
    }

    #[test]
    fn an_integer_bound_is_checked_at_its_edges() {
        let check = native(&json!({"minimum": 1, "maximum": 64}));
        let number = |n: Value| Borrowed::Number(n.as_number().unwrap().clone());
        assert!(check.accepts(&number(json!(1))));
        assert!(check.accepts(&number(json!(64))));
        assert!(!check.accepts(&number(json!(0))));
        assert!(!check.accepts(&number(json!(65))));
        // Not an i64: the validator decides.
        assert!(!check.accepts(&number(json!(1.0))));
        assert!(!check.accepts(&number(json!(u64::MAX))));
        // Only these keywords, in these forms, have a native check.
        assert!(Native::of([("minimum", &json!(1.5))].into_iter()).is_none());
        assert!(Native::of([("format", &json!("uri"))].into_iter()).is_none());
        assert!(Native::of([("pattern", &json!("^a+$"))].into_iter()).is_none());
        assert!(Native::of([("enum", &json!(["a"]))].into_iter()).is_none());
    }
}
