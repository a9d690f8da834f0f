//! Wall-clock time, injected: every TTL, expiry and retention decision reads a `Clock`, so tests
//! move time instead of sleeping.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Wall-clock milliseconds since the epoch, which tests can move forward or pin.
#[derive(Debug)]
pub struct Clock {
    offset_ms: AtomicI64,
    /// `i64::MIN` when the clock follows the system time.
    pinned_ms: AtomicI64,
}

impl Default for Clock {
    fn default() -> Self {
        Clock {
            offset_ms: AtomicI64::new(0),
            pinned_ms: AtomicI64::new(i64::MIN),
        }
    }
}

impl Clock {
    pub fn now_ms(&self) -> i64 {
        let pinned = self.pinned_ms.load(Ordering::Relaxed);
        if pinned != i64::MIN {
            return pinned;
        }
        let system = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        system + self.offset_ms.load(Ordering::Relaxed)
    }

    /// Moves this clock forward (tests of retention and expiry).
    pub fn advance(&self, by: Duration) {
        self.offset_ms
            .fetch_add(by.as_millis() as i64, Ordering::Relaxed);
    }

    /// Pins the clock at `ms` (tests that need ties on time), or releases it with `None`.
    pub fn pin(&self, ms: Option<i64>) {
        self.pinned_ms
            .store(ms.unwrap_or(i64::MIN), Ordering::Relaxed);
    }
}
