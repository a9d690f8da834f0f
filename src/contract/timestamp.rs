//! `Timestamp`, the contract's RFC 3339 UTC instant (`$defs/Timestamp`), in place of the type
//! typify would generate: the same chrono value and the same text, written without chrono's
//! formatting machinery.
//!
//! chrono's `Serialize` goes through `Display`, and serde_json escapes each fragment it is handed:
//! on a page of messages that was 3% of a history read. This writes the same text into a stack
//! buffer and hands serde_json one string; an instant outside what that covers (a year outside
//! 0–9999, a leap second) is left to chrono.

use std::ops::Deref;

use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Deserialize, Serialize, Serializer};

/// RFC 3339 UTC timestamp.
#[derive(Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[serde(transparent)]
pub struct Timestamp(pub DateTime<Utc>);

impl Serialize for Timestamp {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut text = [0u8; RFC3339_MAX];
        match write_rfc3339(&self.0, &mut text) {
            Some(len) => serializer
                .serialize_str(std::str::from_utf8(&text[..len]).expect("only ASCII is written")),
            None => self.0.serialize(serializer),
        }
    }
}

impl Deref for Timestamp {
    type Target = DateTime<Utc>;

    fn deref(&self) -> &DateTime<Utc> {
        &self.0
    }
}

impl From<Timestamp> for DateTime<Utc> {
    fn from(value: Timestamp) -> Self {
        value.0
    }
}

impl From<DateTime<Utc>> for Timestamp {
    fn from(value: DateTime<Utc>) -> Self {
        Timestamp(value)
    }
}

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::str::FromStr for Timestamp {
    type Err = chrono::ParseError;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Ok(Timestamp(value.parse()?))
    }
}

impl TryFrom<&str> for Timestamp {
    type Error = chrono::ParseError;

    fn try_from(value: &str) -> Result<Self, Self::Error> {
        value.parse()
    }
}

impl TryFrom<String> for Timestamp {
    type Error = chrono::ParseError;

    fn try_from(value: String) -> Result<Self, Self::Error> {
        value.parse()
    }
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ`, the longest text [`write_rfc3339`] writes.
const RFC3339_MAX: usize = 30;

/// Writes `at` as chrono's `Serialize` does (`to_rfc3339_opts(SecondsFormat::AutoSi, true)`: a
/// fraction of 3, 6 or 9 digits, only as long as its non-zero digits need, and `Z`) and returns
/// its length; `None` for an instant chrono writes in another shape (a year outside 0–9999, a
/// leap second).
fn write_rfc3339(at: &DateTime<Utc>, out: &mut [u8; RFC3339_MAX]) -> Option<usize> {
    // UTC's local time is its naive time: taken once (each field of a `DateTime` adds the
    // offset to it again).
    let at = at.naive_utc();
    let year = at.year();
    let nanos = at.nanosecond();
    if !(0..=9999).contains(&year) || nanos >= 1_000_000_000 {
        return None;
    }
    let mut len = 0;
    let fields = [
        (year as u32, 4, b'-'),
        (at.month(), 2, b'-'),
        (at.day(), 2, b'T'),
        (at.hour(), 2, b':'),
        (at.minute(), 2, b':'),
    ];
    for (value, digits, separator) in fields {
        put_digits(out, &mut len, value, digits);
        out[len] = separator;
        len += 1;
    }
    put_digits(out, &mut len, at.second(), 2);
    if nanos != 0 {
        let (value, digits) = if nanos.is_multiple_of(1_000_000) {
            (nanos / 1_000_000, 3)
        } else if nanos.is_multiple_of(1_000) {
            (nanos / 1_000, 6)
        } else {
            (nanos, 9)
        };
        out[len] = b'.';
        len += 1;
        put_digits(out, &mut len, value, digits);
    }
    out[len] = b'Z';
    Some(len + 1)
}

/// Writes the last `digits` decimal digits of `value` at `out[*len..]`.
fn put_digits(out: &mut [u8], len: &mut usize, mut value: u32, digits: usize) {
    for at in (*len..*len + digits).rev() {
        out[at] = b'0' + (value % 10) as u8;
        value /= 10;
    }
    *len += digits;
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{NaiveDate, TimeZone};

    fn chrono_text(at: DateTime<Utc>) -> String {
        serde_json::to_string(&at).unwrap()
    }

    #[test]
    fn every_shape_is_written_as_chrono_writes_it() {
        let mut instants = vec![
            Utc.timestamp_opt(0, 0).unwrap(),
            DateTime::from_timestamp_millis(1_764_554_584_005).unwrap(),
            DateTime::from_timestamp_millis(1_764_554_584_000).unwrap(),
            DateTime::from_timestamp_millis(-1).unwrap(),
            Utc.timestamp_opt(1_764_554_584, 120_000).unwrap(),
            Utc.timestamp_opt(1_764_554_584, 1).unwrap(),
            Utc.timestamp_opt(1_764_554_584, 999_999_999).unwrap(),
            Utc.timestamp_opt(1_764_554_584, 100_000_000).unwrap(),
            NaiveDate::from_ymd_opt(0, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc(),
            NaiveDate::from_ymd_opt(9999, 12, 31)
                .unwrap()
                .and_hms_nano_opt(23, 59, 59, 999_000_000)
                .unwrap()
                .and_utc(),
            // chrono's own shapes: the sign past four digits, and a leap second.
            NaiveDate::from_ymd_opt(10_000, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc(),
            NaiveDate::from_ymd_opt(-1, 1, 1)
                .unwrap()
                .and_hms_opt(0, 0, 0)
                .unwrap()
                .and_utc(),
            NaiveDate::from_ymd_opt(2016, 12, 31)
                .unwrap()
                .and_hms_milli_opt(23, 59, 59, 1_500)
                .unwrap()
                .and_utc(),
        ];
        // A spread of instants across the years with each fraction length.
        let mut state = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..2_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let seconds = (state % 253_402_300_800) as i64; // up to 9999-12-31
            let nanos = match state % 4 {
                0 => 0,
                1 => (state >> 20) as u32 % 1_000 * 1_000_000,
                2 => (state >> 20) as u32 % 1_000_000 * 1_000,
                _ => (state >> 20) as u32 % 1_000_000_000,
            };
            instants.push(Utc.timestamp_opt(seconds, nanos).unwrap());
        }
        for at in instants {
            assert_eq!(
                serde_json::to_string(&Timestamp(at)).unwrap(),
                chrono_text(at),
                "{at:?}"
            );
        }
    }

    #[test]
    fn it_reads_back_what_it_writes() {
        let at = Timestamp(Utc.timestamp_opt(1_764_554_584, 5_000_000).unwrap());
        let text = serde_json::to_string(&at).unwrap();
        assert_eq!(text, "\"2025-12-01T02:03:04.005Z\"");
        assert_eq!(serde_json::from_str::<Timestamp>(&text).unwrap(), at);
    }
}
