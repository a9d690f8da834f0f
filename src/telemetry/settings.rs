//! Where traces go, from the standard OpenTelemetry variables: read once at start, every
//! mistake a clear refusal that names the variable (never a header's value).
//!
//! Export is on when `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is set,
//! and off when neither is, when `OTEL_TRACES_EXPORTER=none` or when `OTEL_SDK_DISABLED=true`.
//! The only protocol is OTLP over HTTP with protobuf bodies (`http/protobuf`), uncompressed.
//! The collector is reached over `https://`, or `http://` to loopback only, never through a proxy
//! from the environment (`client::http`'s rules). Its headers come from
//! `OTEL_EXPORTER_OTLP_TRACES_HEADERS` / `OTEL_EXPORTER_OTLP_HEADERS` (`key=value,…`, values
//! percent-decoded) and from an owner-only file named by `AGENTTEAM_OTEL_HEADERS_FILE` (one
//! `key=value` a line, taken literally): never from argv, which every user of the machine reads.

use std::path::Path;
use std::time::Duration;

/// The owner-only file of collector headers.
pub const HEADERS_FILE: &str = "AGENTTEAM_OTEL_HEADERS_FILE";

/// The bounds of the export queue, the batch and the waits; outside them is a refusal.
const QUEUE: (usize, usize, usize) = (1, 65_536, 2_048);
const BATCH: (usize, usize, usize) = (1, 8_192, 512);
const DELAY_MS: (u64, u64, u64) = (1, 60_000, 5_000);
const TIMEOUT_MS: (u64, u64, u64) = (1, 60_000, 10_000);
/// The most collector headers, and the longest header file read.
const MAX_HEADERS: usize = 64;
const MAX_HEADERS_FILE: u64 = 64 * 1024;

/// How traces are exported, when they are.
#[derive(Clone)]
pub struct Settings {
    /// The whole URL spans are posted to (`…/v1/traces`).
    pub endpoint: reqwest::Url,
    /// Collector headers (values are secrets: `Debug` shows only the names).
    pub headers: Vec<(String, String)>,
    /// One export's deadline.
    pub timeout: Duration,
    /// `OTEL_SERVICE_NAME`, if set.
    pub service_name: Option<String>,
    /// Spans waiting for export; one more is dropped and counted.
    pub max_queue: usize,
    /// Spans per export.
    pub max_batch: usize,
    /// How long a first span waits for others before its batch is sent.
    pub delay: Duration,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("endpoint", &self.endpoint.as_str())
            .field(
                "headers",
                &self.headers.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .field("timeout", &self.timeout)
            .field("max_queue", &self.max_queue)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The settings of this process's environment: `None` when export is off.
    pub fn from_env() -> Result<Option<Settings>, String> {
        Settings::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings of the variables `var` reads.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Settings>, String> {
        let var = |name: &str| var(name).filter(|value| !value.trim().is_empty());
        if var("OTEL_SDK_DISABLED").is_some_and(|v| v.trim().eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
            None | Some("otlp") => {}
            Some("none") => return Ok(None),
            Some(_) => {
                return Err(
                    "`OTEL_TRACES_EXPORTER` must be `otlp` or `none`: traces are exported over OTLP only"
                        .into(),
                );
            }
        }
        let endpoint = match (
            var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            var("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(url), _) => endpoint("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url, false)?,
            (None, Some(url)) => endpoint("OTEL_EXPORTER_OTLP_ENDPOINT", &url, true)?,
            (None, None) => return Ok(None),
        };
        // The traces signal's own variable wins over the general one.
        let signal = |setting: &str| {
            [
                format!("OTEL_EXPORTER_OTLP_TRACES_{setting}"),
                format!("OTEL_EXPORTER_OTLP_{setting}"),
            ]
            .into_iter()
            .find_map(|name| var(&name).map(|value| (name, value)))
        };
        if let Some((name, protocol)) = signal("PROTOCOL")
            && protocol.trim() != "http/protobuf"
        {
            return Err(format!(
                "`{name}` must be `http/protobuf`: traces are exported over OTLP/HTTP with protobuf bodies only"
            ));
        }
        if let Some((name, compression)) = signal("COMPRESSION")
            && compression.trim() != "none"
        {
            return Err(format!(
                "`{name}` must be `none`: exported spans are not compressed"
            ));
        }
        let mut headers = match signal("HEADERS") {
            Some((name, list)) => env_headers(&name, &list)?,
            None => Vec::new(),
        };
        if let Some(path) = var(HEADERS_FILE) {
            headers.extend(file_headers(Path::new(&path))?);
        }
        if headers.len() > MAX_HEADERS {
            return Err(format!("at most {MAX_HEADERS} collector headers are sent"));
        }
        let timeout = signal("TIMEOUT")
            .map(|(name, v)| bounded(&name, &v, TIMEOUT_MS))
            .transpose()?
            .unwrap_or(TIMEOUT_MS.2);
        let number = |name: &str, bounds: (u64, u64, u64)| {
            var(name)
                .map(|v| bounded(name, &v, bounds))
                .transpose()
                .map(|v| v.unwrap_or(bounds.2))
        };
        let widen = |(a, b, c): (usize, usize, usize)| (a as u64, b as u64, c as u64);
        let max_queue = number("OTEL_BSP_MAX_QUEUE_SIZE", widen(QUEUE))? as usize;
        let max_batch = number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", widen(BATCH))? as usize;
        let delay = number("OTEL_BSP_SCHEDULE_DELAY", DELAY_MS)?;
        let service_name = var("OTEL_SERVICE_NAME").map(|name| name.trim().to_string());
        Ok(Some(Settings {
            endpoint,
            headers,
            timeout: Duration::from_millis(timeout),
            service_name,
            max_queue,
            max_batch: max_batch.min(max_queue),
            delay: Duration::from_millis(delay),
        }))
    }
}

/// The traces URL of `text` from variable `name`: a base URL gets `v1/traces` appended (the
/// OTLP convention for `OTEL_EXPORTER_OTLP_ENDPOINT`). The refusal never repeats the URL, which
/// may carry a key in its query.
fn endpoint(name: &str, text: &str, base: bool) -> Result<reqwest::Url, String> {
    let mut url = reqwest::Url::parse(text.trim()).map_err(|_| format!("`{name}` is not a URL"))?;
    if !url.username().is_empty() || url.password().is_some() {
        return Err(format!(
            "`{name}` must not carry user info; send the collector's credential as a header (`OTEL_EXPORTER_OTLP_HEADERS` or `{HEADERS_FILE}`)"
        ));
    }
    match url.scheme() {
        "https" => {}
        "http" if crate::client::http::is_loopback(&url) => {}
        "http" => {
            return Err(format!(
                "`{name}` is plain http to a host that is not loopback; spans and the collector's headers would cross the network in clear text: use https://"
            ));
        }
        _ => {
            return Err(format!(
                "`{name}` must be an `https://` URL (or `http://` to loopback)"
            ));
        }
    }
    if base {
        let path = url.path().trim_end_matches('/').to_string();
        url.set_path(&format!("{path}/v1/traces"));
    }
    Ok(url)
}

/// `key=value,…` with percent-encoded values (the OTLP exporter convention).
fn env_headers(name: &str, list: &str) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for pair in list.split(',').filter(|pair| !pair.trim().is_empty()) {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("`{name}` must be a list of `key=value` pairs"));
        };
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8()
            .map_err(|_| format!("`{name}`: the value of `{}` is not UTF-8", key.trim()))?;
        headers.push(header(name, key.trim(), value.trim())?);
    }
    Ok(headers)
}

/// One `key=value` a line of the owner-only file `path`; empty lines and `#` comments skipped.
fn file_headers(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = crate::private_file::read_private_limited(path, MAX_HEADERS_FILE + 1)
        .map_err(|e| format!("`{HEADERS_FILE}`: cannot use `{}`: {e}", path.display()))?;
    if text.len() as u64 > MAX_HEADERS_FILE {
        return Err(format!(
            "`{HEADERS_FILE}`: `{}` is over {MAX_HEADERS_FILE} bytes",
            path.display()
        ));
    }
    let mut headers = Vec::new();
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!(
                "`{HEADERS_FILE}`: `{}` must hold one `key=value` a line",
                path.display()
            ));
        };
        headers.push(header(HEADERS_FILE, key.trim(), value.trim())?);
    }
    Ok(headers)
}

/// A header the HTTP client can send, or the refusal naming `source` and the key (never the
/// value).
fn header(source: &str, key: &str, value: &str) -> Result<(String, String), String> {
    let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
        .map_err(|_| format!("`{source}`: `{key}` is not a header name"))?;
    reqwest::header::HeaderValue::from_str(value)
        .map_err(|_| format!("`{source}`: the value of `{key}` is not a valid header value"))?;
    Ok((name.as_str().to_string(), value.to_string()))
}

/// A whole number in `(min, max, _)`, or the refusal naming `name`.
fn bounded(name: &str, text: &str, (min, max, _): (u64, u64, u64)) -> Result<u64, String> {
    text.trim()
        .parse::<u64>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| format!("`{name}` must be a whole number from {min} to {max}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(vars: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        Settings::from_vars(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn export_is_off_unless_an_endpoint_is_set_and_nothing_turns_it_off() {
        assert!(read(&[]).unwrap().is_none());
        let on = [("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")];
        let settings = read(&on).unwrap().unwrap();
        assert_eq!(
            settings.endpoint.as_str(),
            "http://127.0.0.1:4318/v1/traces"
        );
        assert_eq!(settings.max_queue, 2_048);
        assert_eq!(settings.timeout, Duration::from_secs(10));
        for off in [
            ("OTEL_SDK_DISABLED", "true"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ] {
            assert!(read(&[on[0], off]).unwrap().is_none(), "{off:?}");
        }
        // The signal's own URL is used as it is, and wins over the base.
        let both = read(&[
            on[0],
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "https://collector.example/otlp/spans",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            both.endpoint.as_str(),
            "https://collector.example/otlp/spans"
        );
    }

    #[test]
    fn a_collector_that_would_see_clear_text_or_another_protocol_is_refused() {
        for (vars, says) in [
            (
                vec![(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "http://collector.example:4318?key=s3cret",
                )],
                "plain http",
            ),
            (
                vec![(
                    "OTEL_EXPORTER_OTLP_ENDPOINT",
                    "https://user:s3cret@collector.example",
                )],
                "user info",
            ),
            (vec![("OTEL_EXPORTER_OTLP_ENDPOINT", "s3cret")], "not a URL"),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
                    ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
                ],
                "http/protobuf",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
                    ("OTEL_EXPORTER_OTLP_COMPRESSION", "gzip"),
                ],
                "`none`",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
                    ("OTEL_BSP_MAX_QUEUE_SIZE", "0"),
                ],
                "from 1 to 65536",
            ),
            (
                vec![
                    ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://localhost:4318"),
                    (
                        "OTEL_EXPORTER_OTLP_HEADERS",
                        "authorization=Bearer s3cret\u{7}x",
                    ),
                ],
                "not a valid header value",
            ),
            (vec![("OTEL_TRACES_EXPORTER", "zipkin")], "otlp"),
        ] {
            let error = read(&vars).unwrap_err();
            assert!(error.contains(says), "{error}");
            assert!(!error.contains("s3cret"), "{error}");
        }
    }

    #[test]
    fn headers_are_read_from_the_list_and_percent_decoded() {
        let settings = read(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://[::1]:4318/"),
            (
                "OTEL_EXPORTER_OTLP_HEADERS",
                "authorization=Bearer%20s3cret, x-tenant = a=b",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(settings.endpoint.as_str(), "http://[::1]:4318/v1/traces");
        assert_eq!(
            settings.headers,
            vec![
                ("authorization".to_string(), "Bearer s3cret".to_string()),
                ("x-tenant".to_string(), "a=b".to_string()),
            ]
        );
        assert!(!format!("{settings:?}").contains("s3cret"));
    }
}
