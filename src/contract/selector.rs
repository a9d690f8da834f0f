//! The grammar of an idempotency selector (a mutation's `requestId`, `idempotencyKey`,
//! `Idempotency-Key` or `X-Request-ID`): `^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$`.

/// The longest selector accepted.
pub const MAX_LEN: usize = 128;

/// Whether `value` is a well-formed selector.
pub fn well_formed(value: &str) -> bool {
    let bytes = value.as_bytes();
    (8..=MAX_LEN).contains(&bytes.len())
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-'))
}
