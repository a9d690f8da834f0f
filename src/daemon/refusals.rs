//! The daemon's own audit log: the runtime requests it refused before they could reach the server
//! (a refused credential, an admission limit), which the server's audit trail never sees. One
//! JSON line per refusal in `<state dir>/audit/refusals.jsonl`, with the server record's fields;
//! the workspace and agent are what the route claimed (`"verified": false`), kept only when they
//! have the shape of an id. Bounded: [`MAX_FILE`] bytes, then one rotation to `.1` (so at most
//! twice that on disk), and at most [`PER_SECOND`] lines a second; the rest are counted, not
//! written. Never a token or a header value: the line has no field for one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use serde_json::json;
use sha2::{Digest, Sha256};

use crate::platform::fs::PrivateOpen;

/// The log file's size, at most, before it rotates.
pub const MAX_FILE: u64 = 1024 * 1024;
/// Lines written per second, at most.
pub const PER_SECOND: u32 = 50;

/// One refusal, as the route saw it.
pub struct Refusal<'a> {
    /// `exec` or `mcp`.
    pub family: &'static str,
    /// The action (`domain action`), the tool or the method, as the request named it.
    pub action: &'a str,
    pub server_id: &'a str,
    pub agent_id: &'a str,
    /// `forbidden` or `admission_limited`.
    pub outcome: &'static str,
    pub idempotency_key: Option<&'a [u8]>,
    pub started: Instant,
}

pub struct RefusalLog {
    path: PathBuf,
    inner: Mutex<Inner>,
    written: AtomicU64,
    suppressed: AtomicU64,
}

struct Inner {
    file: Option<File>,
    size: u64,
    window: Instant,
    in_window: u32,
}

impl RefusalLog {
    /// The log under `state_dir/audit/` (created owner-only).
    pub fn open(state_dir: &Path) -> std::io::Result<RefusalLog> {
        let dir = state_dir.join("audit");
        crate::platform::fs::create_private_dirs(&dir)?;
        let path = dir.join("refusals.jsonl");
        let size = std::fs::metadata(&path).map_or(0, |m| m.len());
        Ok(RefusalLog {
            path,
            inner: Mutex::new(Inner {
                file: None,
                size,
                window: Instant::now(),
                in_window: 0,
            }),
            written: AtomicU64::new(0),
            suppressed: AtomicU64::new(0),
        })
    }

    /// Lines written since start.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Refusals over the rate (or lost to a failed write) since start.
    pub fn suppressed(&self) -> u64 {
        self.suppressed.load(Ordering::Relaxed)
    }

    /// Records a runtime request of route family `family` (`exec`, `mcp`) turned away before
    /// its body: `action` as the request named it, the binding its route claimed.
    pub fn denied(
        &self,
        denied: &super::access::Denied,
        family: &'static str,
        action: &str,
        (server_id, agent_id): (&str, &str),
        headers: &axum::http::HeaderMap,
        started: Instant,
    ) {
        self.record(&Refusal {
            family,
            action,
            server_id,
            agent_id,
            outcome: denied.outcome(),
            idempotency_key: headers.get("idempotency-key").map(|v| v.as_bytes()),
            started,
        });
    }

    /// Appends `refusal`, unless this second's lines are spent.
    pub fn record(&self, refusal: &Refusal<'_>) {
        let mut inner = self.inner.lock().expect("not poisoned");
        if inner.window.elapsed().as_secs() >= 1 {
            inner.window = Instant::now();
            inner.in_window = 0;
        }
        if inner.in_window >= PER_SECOND {
            self.suppressed.fetch_add(1, Ordering::Relaxed);
            return;
        }
        inner.in_window += 1;
        let mut line = line(refusal).to_string();
        line.push('\n');
        match self.append(&mut inner, line.as_bytes()) {
            Ok(()) => {
                self.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(error) => {
                inner.file = None;
                self.suppressed.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(%error, "cannot write the refusal log");
            }
        }
    }

    fn append(&self, inner: &mut Inner, line: &[u8]) -> std::io::Result<()> {
        if inner.size + line.len() as u64 > MAX_FILE {
            inner.file = None;
            std::fs::rename(&self.path, self.path.with_extension("jsonl.1"))?;
            inner.size = 0;
        }
        if inner.file.is_none() {
            inner.file = Some(
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .owner_only()
                    .no_follow()
                    .open(&self.path)?,
            );
        }
        inner.file.as_mut().expect("opened").write_all(line)?;
        inner.size += line.len() as u64;
        Ok(())
    }
}

impl super::access::Denied {
    /// The outcome code a refusal is recorded with.
    pub fn outcome(&self) -> &'static str {
        match self {
            super::access::Denied::Credential => "forbidden",
            super::access::Denied::Admission => "admission_limited",
        }
    }
}

/// The JSON line of `refusal`: the server record's fields.
fn line(refusal: &Refusal<'_>) -> serde_json::Value {
    let id = |s: &str| is_id(s).then(|| s.to_string());
    let action: String = refusal
        .action
        .chars()
        .take(64)
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, ' ' | '-' | '_' | '/'))
        .collect();
    json!({
        "at": now_rfc3339(),
        "workspaceId": id(refusal.server_id),
        "deviceId": null,
        "agentId": id(refusal.agent_id),
        "verified": false,
        "family": refusal.family,
        "action": action,
        "outcome": refusal.outcome,
        "keyHash": refusal.idempotency_key.map(|key| hex::encode(Sha256::digest(key))),
        "durationUs": refusal.started.elapsed().as_micros() as u64,
    })
}

fn now_rfc3339() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    chrono::DateTime::from_timestamp_millis(ms)
        .unwrap_or_default()
        .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// An opaque id: `<prefix>_<alphanumerics>`, at most 68 characters.
fn is_id(s: &str) -> bool {
    s.len() <= 68
        && s.split_once('_').is_some_and(|(prefix, rest)| {
            (2..=4).contains(&prefix.len())
                && prefix.bytes().all(|b| b.is_ascii_lowercase())
                && !rest.is_empty()
                && rest.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal<'a>(agent: &'a str) -> Refusal<'a> {
        Refusal {
            family: "exec",
            action: "task create",
            server_id: "wsp_0123456789",
            agent_id: agent,
            outcome: "forbidden",
            idempotency_key: Some(b"req-0001"),
            started: Instant::now(),
        }
    }

    /// The rate bound at its edge: the 51st line of one second is counted, not written.
    #[test]
    fn lines_past_the_rate_are_counted_not_written() {
        let dir = tempfile::tempdir().unwrap();
        let log = RefusalLog::open(dir.path()).unwrap();
        for _ in 0..PER_SECOND + 1 {
            log.record(&refusal("agt_0123456789"));
        }
        assert_eq!(
            (log.written(), log.suppressed()),
            (u64::from(PER_SECOND), 1)
        );
        let text = std::fs::read_to_string(dir.path().join("audit/refusals.jsonl")).unwrap();
        assert_eq!(text.lines().count(), PER_SECOND as usize);
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["agentId"], "agt_0123456789");
        assert_eq!(first["verified"], false);
        assert_eq!(first["keyHash"], hex::encode(Sha256::digest(b"req-0001")));
        let metadata = std::fs::metadata(dir.path().join("audit/refusals.jsonl")).unwrap();
        assert_eq!(crate::platform::fs::mode(&metadata), 0o600);
    }

    /// The size bound at its edge: a line that would pass it rotates the file first.
    #[test]
    fn the_file_rotates_at_its_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit/refusals.jsonl");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, vec![b'x'; (MAX_FILE - 10) as usize]).unwrap();
        let log = RefusalLog::open(dir.path()).unwrap();
        log.record(&refusal("agt_0123456789"));
        let rotated = std::fs::metadata(path.with_extension("jsonl.1"))
            .unwrap()
            .len();
        assert_eq!(rotated, MAX_FILE - 10);
        let fresh = std::fs::read_to_string(&path).unwrap();
        assert_eq!(fresh.lines().count(), 1);
    }

    /// A claimed id that is not id-shaped is left out, not copied.
    #[test]
    fn what_is_not_an_id_is_not_kept() {
        let line = line(&refusal("Bearer sk-secret-value"));
        assert_eq!(line["agentId"], serde_json::Value::Null);
        assert!(!line.to_string().contains("secret"));
    }
}
