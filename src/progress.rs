//! A progress line on stderr for long work, shown only on a terminal.

use std::io::Write;
use std::time::{Duration, Instant};

/// A counter drawn as one updating line on stderr, at most ten times a second.
pub struct Progress {
    label: &'static str,
    total: u64,
    done: u64,
    bytes: u64,
    last: Option<Instant>,
    enabled: bool,
    /// Nothing is drawn before this moment.
    quiet_until: Option<Instant>,
}

impl Progress {
    /// A progress line for `total` items, drawn only when `enabled` and stderr is a terminal.
    pub fn new(label: &'static str, total: u64, enabled: bool) -> Progress {
        Progress {
            label,
            total,
            done: 0,
            bytes: 0,
            last: None,
            enabled: enabled && rustix::termios::isatty(std::io::stderr()),
            quiet_until: None,
        }
    }

    /// Draws nothing until `delay` has passed, so that quick work stays silent.
    pub fn after(mut self, delay: Duration) -> Progress {
        self.quiet_until = Some(Instant::now() + delay);
        self
    }

    /// Counts `n` items of `bytes` bytes done.
    pub fn add(&mut self, n: u64, bytes: u64) {
        self.done += n;
        self.bytes += bytes;
        if !self.enabled {
            return;
        }
        let now = Instant::now();
        if self.quiet_until.is_some_and(|t| now < t) {
            return;
        }
        if self
            .last
            .is_some_and(|t| now - t < Duration::from_millis(100))
            && self.done < self.total
        {
            return;
        }
        self.last = Some(now);
        if self.total == 0 {
            // An unknown total (a stream): only what was done.
            let _ = write!(
                std::io::stderr().lock(),
                "\r{} {} MiB",
                self.label,
                self.bytes >> 20
            );
            return;
        }
        let pct = (self.done * 100).checked_div(self.total).unwrap_or(100);
        let width = 30usize;
        let filled = (pct as usize * width / 100).min(width);
        let _ = write!(
            std::io::stderr().lock(),
            "\r{} [{}{}] {}/{} ({} MiB)",
            self.label,
            "#".repeat(filled),
            " ".repeat(width - filled),
            self.done,
            self.total,
            self.bytes >> 20
        );
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        if self.enabled && self.last.is_some() {
            let _ = write!(std::io::stderr().lock(), "\r\x1b[2K");
        }
    }
}
