//! W3C trace context (`traceparent`, Trace Context Level 1): read from what a runtime sent, and
//! written for the daemon→server hop.
//!
//! What a runtime sends is model-controlled. It is parsed strictly and only ever becomes a span
//! link (never a parent); anything that is not a well-formed `traceparent` is ignored, never an
//! error and never repeated anywhere. `tracestate` and `baggage` are never read.

use opentelemetry::trace::{SpanContext, SpanId, TraceFlags, TraceId, TraceState};

/// The header (and `_meta` key) name.
pub const TRACEPARENT: &str = "traceparent";

/// The longest `traceparent` read: version 00 is 55 characters, and a later version may append
/// fields; anything longer is ignored unread.
const MAX_LEN: usize = 512;

/// A `traceparent` value's span context, or `None` when it is not a well-formed one: version
/// two lowercase hex digits (not `ff`), a 32-digit trace id and a 16-digit parent id that are not
/// all zeros, two digits of flags; version `00` exactly so, a later version possibly followed by
/// `-` and more.
pub fn parse(text: &str) -> Option<SpanContext> {
    let text = text.trim_matches([' ', '\t']);
    if text.len() < 55 || text.len() > MAX_LEN {
        return None;
    }
    let bytes = text.as_bytes();
    let version = hex(&bytes[0..2])?;
    if version == [0xff] || bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
        return None;
    }
    match (version[0], bytes.get(55)) {
        (0, None) => {}
        (0, Some(_)) => return None,
        (_, None | Some(b'-')) => {}
        (_, Some(_)) => return None,
    }
    let trace: [u8; 16] = hex(&bytes[3..35])?.try_into().ok()?;
    let span: [u8; 8] = hex(&bytes[36..52])?.try_into().ok()?;
    let flags = hex(&bytes[53..55])?[0];
    let trace_id = TraceId::from_bytes(trace);
    let span_id = SpanId::from_bytes(span);
    if trace_id == TraceId::INVALID || span_id == SpanId::INVALID {
        return None;
    }
    Some(SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags & 1),
        true,
        TraceState::NONE,
    ))
}

/// The `traceparent` of `context` (version 00), written digit by digit (it is on every hop).
pub fn format(context: &SpanContext) -> String {
    let mut text = String::with_capacity(55);
    text.push_str("00-");
    hex_into(&mut text, &context.trace_id().to_bytes());
    text.push('-');
    hex_into(&mut text, &context.span_id().to_bytes());
    text.push('-');
    hex_into(&mut text, &[context.trace_flags().to_u8()]);
    text
}

/// `bytes` as lowercase hex, appended to `out`.
fn hex_into(out: &mut String, bytes: &[u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for byte in bytes {
        out.push(char::from(HEX[usize::from(byte >> 4)]));
        out.push(char::from(HEX[usize::from(byte & 15)]));
    }
}

/// Lowercase hex digits to bytes (uppercase is not valid in a `traceparent`).
fn hex(digits: &[u8]) -> Option<Vec<u8>> {
    if !digits.len().is_multiple_of(2) {
        return None;
    }
    let nibble = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    digits
        .chunks(2)
        .map(|pair| Some(nibble(pair[0])? << 4 | nibble(pair[1])?))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_well_formed_traceparent_is_read_and_written_back_the_same() {
        let context = parse(GOOD).expect("well formed");
        assert_eq!(
            context.trace_id().to_string(),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(context.span_id().to_string(), "00f067aa0ba902b7");
        assert!(context.is_sampled() && context.is_remote());
        assert_eq!(format(&context), GOOD);
        // A later version may carry more after a dash; flags other than sampled are dropped.
        let later = "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03-what-not";
        assert_eq!(parse(later).map(|c| c.trace_flags().to_u8()), Some(1));
    }

    #[test]
    fn anything_else_is_ignored() {
        let long = format!("{GOOD}{}", "-0".repeat(300));
        for bad in [
            "",
            "00",
            "garbage",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "cc-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
            "0é-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            &long,
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn no_input_panics_and_what_is_read_writes_back_as_read(text in "\\PC{0,80}") {
            if let Some(context) = parse(&text) {
                let written = format(&context);
                proptest::prop_assert_eq!(parse(&written), Some(context));
            }
        }
    }
}
