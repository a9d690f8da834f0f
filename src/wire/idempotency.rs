//! The idempotency selector of a mutation: `Idempotency-Key` and `X-Request-ID` headers and the
//! body's `requestId` / `idempotencyKey`, which must all agree when more than one is present.
//!
//! Refused before anything is applied: two `Idempotency-Key` (or `X-Request-ID`) headers, values
//! that disagree, and a value outside `^[A-Za-z0-9][A-Za-z0-9._:-]{7,127}$`. `Idempotency-Key` may
//! be an RFC 8941 sf-string (`"key"`) or a bare token; both normalize to the bare key.

use axum::http::HeaderMap;
use serde_json::Value;

use crate::contract::ActionError;
use crate::contract::error::{ErrorCode, ErrorDetail};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const REQUEST_ID: &str = "x-request-id";

/// The one selector of this request, if it has any.
pub fn resolve_selector(headers: &HeaderMap, body: &Value) -> Result<Option<String>, ActionError> {
    let mut found: Vec<(String, String)> = Vec::new();
    for name in [IDEMPOTENCY_KEY, REQUEST_ID] {
        let mut values = headers.get_all(name).iter();
        if let Some(value) = values.next() {
            if values.next().is_some() {
                return Err(refuse(
                    &format!("header:{name}"),
                    format!("send at most one `{name}` header"),
                ));
            }
            let text = value.to_str().map_err(|_| {
                refuse(
                    &format!("header:{name}"),
                    format!("`{name}` must be printable ASCII"),
                )
            })?;
            let text = if name == IDEMPOTENCY_KEY {
                unquote(text)
            } else {
                text
            };
            found.push((format!("header:{name}"), text.to_string()));
        }
    }
    for field in ["requestId", "idempotencyKey"] {
        match body.get(field) {
            Some(Value::String(text)) => found.push((format!("/{field}"), text.clone())),
            Some(_) => {
                return Err(refuse(
                    &format!("/{field}"),
                    format!("`{field}` must be a string"),
                ));
            }
            None => {}
        }
    }
    for (source, value) in &found {
        if !crate::contract::selector::well_formed(value) {
            return Err(refuse(
                source,
                format!("`{source}` must match ^[A-Za-z0-9][A-Za-z0-9._:-]{{7,127}}$"),
            ));
        }
    }
    if let Some((first_source, first)) = found.first()
        && let Some((source, _)) = found.iter().find(|(_, value)| value != first)
    {
        return Err(refuse(
            source,
            format!(
                "`{source}` disagrees with `{first_source}`: every idempotency selector of one request must be equal"
            ),
        ));
    }
    Ok(found.into_iter().next().map(|(_, value)| value))
}

/// `"abc"` → `abc`; anything else unchanged (and then checked as a bare token).
fn unquote(value: &str) -> &str {
    value
        .strip_prefix('"')
        .and_then(|v| v.strip_suffix('"'))
        .unwrap_or(value)
}

fn refuse(path: &str, message: String) -> ActionError {
    ActionError::new(ErrorCode::ValidationFailed, message.clone()).with_details(vec![ErrorDetail {
        path: path.to_string(),
        message,
    }])
}

#[cfg(test)]
mod tests {
    use axum::http::HeaderValue;
    use serde_json::json;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn agreeing_selectors_resolve_to_one_key() {
        let h = headers(&[
            (IDEMPOTENCY_KEY, "\"req-00000001\""),
            (REQUEST_ID, "req-00000001"),
        ]);
        assert_eq!(
            resolve_selector(&h, &json!({"requestId": "req-00000001"}))
                .unwrap()
                .as_deref(),
            Some("req-00000001")
        );
        assert_eq!(
            resolve_selector(&HeaderMap::new(), &json!({})).unwrap(),
            None
        );
    }

    #[test]
    fn disagreement_duplicates_and_malformed_selectors_are_refused() {
        let body = json!({"requestId": "req-00000001"});
        for (h, b) in [
            (headers(&[(IDEMPOTENCY_KEY, "req-00000002")]), body.clone()),
            (
                headers(&[
                    (IDEMPOTENCY_KEY, "req-00000001"),
                    (REQUEST_ID, "req-00000002"),
                ]),
                json!({}),
            ),
            (
                headers(&[
                    (IDEMPOTENCY_KEY, "req-00000001"),
                    (IDEMPOTENCY_KEY, "req-00000001"),
                ]),
                json!({}),
            ),
            (headers(&[(REQUEST_ID, "short")]), json!({})),
            (headers(&[(REQUEST_ID, &"a".repeat(129))]), json!({})),
            (
                HeaderMap::new(),
                json!({"requestId": "req-00000001", "idempotencyKey": "req-00000009"}),
            ),
            (HeaderMap::new(), json!({"requestId": "has space 123"})),
        ] {
            assert_eq!(
                resolve_selector(&h, &b).unwrap_err().code,
                ErrorCode::ValidationFailed,
                "{h:?} {b}"
            );
        }
        assert!(
            resolve_selector(&HeaderMap::new(), &json!({"requestId": "a".repeat(128)})).is_ok()
        );
    }
}
