//! `Timestamp`, the contract's RFC 3339 UTC instant (`$defs/Timestamp`), in place of the type
//! typify would generate: the same chrono value and the same text, written without chrono's
//! formatting machinery.
//!
//! chrono's `Serialize` goes through `Display`, and serde_json escapes each fragment it is handed,
//! for every timestamp of every page of messages (BENCHMARKS.md has what that cost). This writes the same text into a stack
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
    let fields = [
        year as u32,
        at.month(),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
    ];
    let mut len = 0;
    put_instant(out, &mut len, fields, nanos);
    Some(len)
}

/// Appends the JSON text of the instant `ms` milliseconds after the Unix epoch, quoted, exactly
/// as [`Timestamp`]'s `Serialize` writes it, computed from the count itself (no chrono value, no
/// escaping pass: every byte is ASCII). `false`, with nothing written, for an instant outside the
/// years 0–9999: the caller makes a `Timestamp` of it instead.
pub fn write_millis(ms: i64, out: &mut Vec<u8>) -> bool {
    // Days since 0000-03-01 (a year from March, so the leap day ends it), then the civil date of
    // that day count (the algorithm of Howard Hinnant's `civil_from_days`).
    const MS_PER_DAY: i64 = 86_400_000;
    const EPOCH_FROM_MARCH_0: i64 = 719_468;
    let (days, in_day) = (ms.div_euclid(MS_PER_DAY), ms.rem_euclid(MS_PER_DAY));
    let Some(from_march) = days.checked_add(EPOCH_FROM_MARCH_0) else {
        return false;
    };
    let (era, of_era) = (
        from_march.div_euclid(146_097),
        from_march.rem_euclid(146_097),
    );
    let year_of_era = (of_era - of_era / 1_460 + of_era / 36_524 - of_era / 146_096) / 365;
    let day_of_year = of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 {
        month_from_march + 3
    } else {
        month_from_march - 9
    };
    let year = era * 400 + year_of_era + i64::from(month <= 2);
    if !(0..=9999).contains(&year) {
        return false;
    }
    let seconds = in_day / 1_000;
    let fields = [
        year,
        month,
        day,
        seconds / 3_600,
        seconds / 60 % 60,
        seconds % 60,
    ]
    .map(|f| f as u32);
    let mut text = [0u8; RFC3339_MAX + 2];
    text[0] = b'"';
    let mut len = 1;
    put_instant(
        &mut text,
        &mut len,
        fields,
        (in_day % 1_000) as u32 * 1_000_000,
    );
    text[len] = b'"';
    out.extend_from_slice(&text[..len + 1]);
    true
}

/// Writes `YYYY-MM-DDTHH:MM:SS` from `fields` (year, month, day, hour, minute, second), the
/// fraction of `nanos` in 3, 6 or 9 digits, only as long as its non-zero digits need (none for
/// 0), and `Z`, at `out[*len..]`.
fn put_instant(out: &mut [u8], len: &mut usize, fields: [u32; 6], nanos: u32) {
    let [year, month, day, hour, minute, second] = fields;
    for (value, digits, separator) in [
        (year, 4, b'-'),
        (month, 2, b'-'),
        (day, 2, b'T'),
        (hour, 2, b':'),
        (minute, 2, b':'),
    ] {
        put_digits(out, len, value, digits);
        out[*len] = separator;
        *len += 1;
    }
    put_digits(out, len, second, 2);
    if nanos != 0 {
        let (value, digits) = if nanos.is_multiple_of(1_000_000) {
            (nanos / 1_000_000, 3)
        } else if nanos.is_multiple_of(1_000) {
            (nanos / 1_000, 6)
        } else {
            (nanos, 9)
        };
        out[*len] = b'.';
        *len += 1;
        put_digits(out, len, value, digits);
    }
    out[*len] = b'Z';
    *len += 1;
}

/// Whether the instant `at` is before `than` (both RFC 3339). Compared as instants, not as
/// texts: a fraction is written only as long as it needs, so `…:40Z` is before `…:40.8Z` though
/// its text sorts after it. Either one unreadable: not earlier.
pub fn earlier(at: &str, than: &str) -> bool {
    match (
        DateTime::parse_from_rfc3339(at),
        DateTime::parse_from_rfc3339(than),
    ) {
        (Ok(at), Ok(than)) => at < than,
        _ => false,
    }
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

    /// Instants in the form this program writes them are ordered as instants, whatever the
    /// length of their fractions.
    #[test]
    fn instants_are_ordered_as_instants_not_as_texts() {
        let at = |ms: i64| {
            let mut out = Vec::new();
            assert!(write_millis(ms, &mut out));
            String::from_utf8(out)
                .unwrap()
                .trim_matches('"')
                .to_string()
        };
        let second = 1_796_485_240_000;
        for (a, b) in [
            (0, 800),
            (0, 1),
            (100, 150),
            (10, 11),
            (999, 1_000),
            (800, 1_000),
        ] {
            let (a, b) = (at(second + a), at(second + b));
            assert!(earlier(&a, &b), "{a} before {b}");
            assert!(!earlier(&b, &a), "{b} not before {a}");
            assert!(!earlier(&a, &a));
        }
        // The texts that misled a comparison of texts.
        assert!(at(second) > at(second + 800));
        assert!(!earlier("", &at(second)) && !earlier(&at(second), "not a time"));
    }

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
    fn a_count_of_milliseconds_is_written_as_its_timestamp_is() {
        let year_0 = -62_167_219_200_000; // 0000-01-01T00:00:00Z
        let after_9999 = 253_402_300_800_000; // 10000-01-01T00:00:00Z
        let mut counts = vec![
            0,
            -1,
            1,
            999,
            1_000,
            86_399_999,
            86_400_000,
            -86_400_000,
            -86_400_001,
            951_782_400_000,   // 2000-02-29
            951_868_800_000,   // 2000-03-01
            4_107_542_400_000, // 2100-02-28
            4_107_628_800_000, // 2100-03-01
            1_764_554_584_005,
            year_0,
            year_0 + 1,
            year_0 - 1,
            after_9999 - 1,
            after_9999,
            i64::MIN,
            i64::MAX,
            i64::MIN / 2,
            i64::MAX / 2,
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            // Across and a little past the years 0-9999.
            let span = (after_9999 - year_0) as u64 + 2 * 86_400_000 * 366;
            counts.push(year_0 - 86_400_000 * 366 + (state % span) as i64);
        }
        for ms in counts {
            let mut out = b"[".to_vec();
            let written = write_millis(ms, &mut out);
            let typed = DateTime::from_timestamp_millis(ms)
                .filter(|at| (0..=9999).contains(&at.year()))
                .map(|at| serde_json::to_string(&Timestamp(at)).unwrap());
            match typed {
                Some(text) => {
                    assert!(written, "{ms}");
                    assert_eq!(std::str::from_utf8(&out[1..]).unwrap(), text, "{ms}");
                }
                None => {
                    assert!(!written, "{ms}");
                    assert_eq!(out, b"[", "{ms}: nothing written");
                }
            }
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
