//! The wait before a failed cycle is tried again.

use std::time::Duration;

/// Backoff after a failed cycle: 1 s doubling to 5 min (never more than the interval), full
/// jitter.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);
/// A uniformly random number in [0, 1): std's randomly keyed hasher is random enough for jitter.
pub use crate::watch::random_fraction;

/// Capped exponential backoff with full jitter: the n-th delay is uniform in
/// [0, min(cap, base * 2^n)], with a small floor so that a retry never spins.
#[derive(Debug, Clone)]
pub struct Backoff {
    base: Duration,
    cap: Duration,
    attempt: u32,
}

impl Backoff {
    pub fn new(base: Duration, cap: Duration) -> Backoff {
        Backoff {
            base,
            cap,
            attempt: 0,
        }
    }

    pub fn reset(&mut self) {
        self.attempt = 0;
    }

    pub fn set_cap(&mut self, cap: Duration) {
        self.cap = cap;
    }

    /// The ceiling of the next delay.
    pub fn ceiling(&self) -> Duration {
        let factor = 2u32.saturating_pow(self.attempt.min(30));
        self.base.saturating_mul(factor).min(self.cap)
    }

    /// The next delay, for a random fraction in [0, 1).
    pub fn next_with(&mut self, fraction: f64) -> Duration {
        let d = self.ceiling().mul_f64(fraction.clamp(0.0, 1.0));
        self.attempt = self.attempt.saturating_add(1);
        d.max(self.base / 10)
    }

    pub fn next_delay(&mut self) -> Duration {
        self.next_with(random_fraction())
    }
}
