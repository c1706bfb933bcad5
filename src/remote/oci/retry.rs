//! How long the client waits on a registry, how slow a transfer may be,
//! and when and after what wait a request is sent again: the timing rules,
//! apart from the requests they govern.

use std::time::{Duration, Instant, SystemTime};

use ureq::http::HeaderMap;

/// The most times one request is sent, the first time included.
pub(super) const MAX_ATTEMPTS: u32 = 6;
/// The first wait before a retry when the registry names none.
pub(super) const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// The longest wait between two attempts when the registry names none.
pub(super) const BACKOFF_CAP: Duration = Duration::from_secs(5);

/// How long the client waits on a registry, and how slow a transfer may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// For a connection (name lookup, TCP, TLS).
    pub connect: Duration,
    /// Once connected: the most time one read or write may wait without
    /// progress, the most time an answer's headers may take to arrive in
    /// full, and the period over which the transfer rate is measured.
    pub idle: Duration,
    /// The transfer-rate floor, in bytes a second averaged over each period
    /// of `idle`; 0 for none.
    pub min_speed: u64,
}

impl Timeouts {
    /// The default connect timeout.
    pub const DEFAULT_CONNECT: Duration = Duration::from_secs(10);
    /// The default idle timeout.
    pub const DEFAULT_IDLE: Duration = Duration::from_secs(30);
    /// The default transfer-rate floor, bytes a second.
    pub const DEFAULT_MIN_SPEED: u64 = 1024;

    /// Timeouts for `--timeout SECS --min-speed BYTES`: an idle timeout of
    /// `secs`, a connect timeout of the default or `secs`, whichever is
    /// shorter, and a floor of `min_speed` bytes a second over `secs`.
    pub fn new(secs: u64, min_speed: u64) -> Timeouts {
        let idle = Duration::from_secs(secs.max(1));
        Timeouts {
            connect: idle.min(Self::DEFAULT_CONNECT),
            idle,
            min_speed,
        }
    }

    /// The most time an upload of `len` bytes may take to be sent and
    /// answered: one period, plus the time the floor allows for `len`
    /// bytes (the registry may still be receiving what the kernel buffered
    /// when the client is done sending); `None` without a floor.
    pub(super) fn upload_budget(&self, len: usize) -> Option<Duration> {
        (self.min_speed > 0).then(|| {
            self.idle
                .saturating_add(Duration::from_secs(len as u64 / self.min_speed))
        })
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect: Self::DEFAULT_CONNECT,
            idle: Self::DEFAULT_IDLE,
            min_speed: Self::DEFAULT_MIN_SPEED,
        }
    }
}

/// The transfer-rate floor of one body as it is read: once a period has
/// passed, fewer bytes than the floor times the period in it is too slow.
pub(super) struct Floor {
    min_speed: u64,
    period: Duration,
    since: Instant,
    bytes: u64,
}

impl Floor {
    pub(super) fn new(t: &Timeouts) -> Floor {
        Floor {
            min_speed: t.min_speed,
            period: t.idle,
            since: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `n` bytes just read; false when the period that just ended
    /// carried too few. The end of the body (`n == 0`) is never too slow.
    pub(super) fn note(&mut self, n: usize) -> bool {
        if self.min_speed == 0 || n == 0 {
            return true;
        }
        self.bytes += n as u64;
        let now = Instant::now();
        let elapsed = now.duration_since(self.since);
        if elapsed < self.period {
            return true;
        }
        let wanted = u128::from(self.min_speed) * elapsed.as_millis() / 1000;
        if u128::from(self.bytes) < wanted {
            return false;
        }
        self.since = now;
        self.bytes = 0;
        true
    }
}

/// Whether a client error is an upload that was not sent and answered
/// within its budget.
pub(super) fn is_slow_upload(e: &ureq::Error) -> bool {
    matches!(
        e,
        ureq::Error::Timeout(ureq::Timeout::SendBody | ureq::Timeout::RecvResponse)
    )
}

/// Whether a client error is a timeout.
pub(super) fn is_timeout(e: &ureq::Error) -> bool {
    match e {
        ureq::Error::Timeout(_) => true,
        ureq::Error::Io(io) => io_is_timeout(io),
        _ => false,
    }
}

/// Whether a read error is a timeout, as the client reports them.
pub(super) fn io_is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    ) || e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<ureq::Error>())
        .is_some_and(is_timeout)
}

/// Whether a client error is a connection the registry dropped, worth a retry.
pub(super) fn is_reset(e: &ureq::Error) -> bool {
    let io = match e {
        ureq::Error::Io(io) => io,
        _ => return false,
    };
    matches!(
        io.kind(),
        std::io::ErrorKind::ConnectionReset
            | std::io::ErrorKind::ConnectionAborted
            | std::io::ErrorKind::BrokenPipe
            | std::io::ErrorKind::UnexpectedEof
    )
}

/// Whether a status asks for the request again later: `429` and the `5xx`
/// that say so (`501` and `505` are final).
pub(super) fn retryable(status: u16) -> bool {
    status == 429 || matches!(status, 500 | 502 | 503 | 504)
}

/// The wait a `Retry-After` header asks for: seconds, or an HTTP date.
pub(super) fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get("retry-after")?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = parse_http_date(value)?;
    Some(
        at.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

/// Parses an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`, the one form
/// HTTP senders must use.
pub(super) fn parse_http_date(s: &str) -> Option<SystemTime> {
    let rest = s.split_once(", ")?.1;
    let parts: Vec<&str> = rest.split(' ').collect();
    let [day, month, year, time, "GMT"] = parts[..] else {
        return None;
    };
    let day: u64 = day.parse().ok()?;
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| *m == month)? as u64
        + 1;
    let year: u64 = year.parse().ok()?;
    let hms: Vec<u64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [h, m, sec] = hms[..] else {
        return None;
    };
    if !(1970..=9999).contains(&year) || !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    // Days since 1970-01-01 of a civil date (Howard Hinnant's algorithm).
    let (y, mo) = if month <= 2 {
        (year - 1, month + 9)
    } else {
        (year, month - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(SystemTime::UNIX_EPOCH + Duration::from_secs(days * 86_400 + h * 3600 + m * 60 + sec))
}

/// The wait before attempt `attempt + 1` when the registry names none:
/// doubling from [`BACKOFF_BASE`] up to [`BACKOFF_CAP`], plus up to a quarter
/// more so that threads do not retry in step.
pub(super) fn backoff(attempt: u32) -> Duration {
    let base = BACKOFF_BASE
        .saturating_mul(1 << attempt.min(16))
        .min(BACKOFF_CAP);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    base + base / 4 * (nanos % 1000) / 1000
}

/// Whether a retry fits in `limit` (the idle timeout, or an upload's own
/// budget): the time since the first attempt (`elapsed`), the wait before
/// the retry and the last attempt's time (`took`, the retry's likely cost)
/// together within it.
pub(super) fn retry_fits(
    elapsed: Duration,
    wait: Duration,
    took: Duration,
    limit: Duration,
) -> bool {
    elapsed.saturating_add(wait).saturating_add(took) <= limit
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retry_fits_only_with_the_last_attempts_time_again() {
        let s = Duration::from_millis;
        let idle = Duration::from_secs(3);
        // Quick failures: several retries fit.
        assert!(retry_fits(s(10), s(200), s(10), idle));
        assert!(retry_fits(s(1_500), s(800), s(10), idle));
        // An answer after 2.5 s: a second one would end past the timeout.
        assert!(!retry_fits(s(2_500), s(200), s(2_500), idle));
        // A registry's Retry-After past the timeout is not waited for.
        assert!(!retry_fits(s(10), s(5_000), s(10), idle));
        assert!(retry_fits(s(1_000), s(1_000), s(1_000), idle));
    }

    #[test]
    fn reads_retry_after_as_seconds_or_an_http_date() {
        let mut h = HeaderMap::new();
        assert_eq!(retry_after(&h), None);
        h.insert("retry-after", "7".parse().unwrap());
        assert_eq!(retry_after(&h), Some(Duration::from_secs(7)));
        h.insert(
            "retry-after",
            "Sun, 06 Nov 1994 08:49:37 GMT".parse().unwrap(),
        );
        assert_eq!(retry_after(&h), Some(Duration::ZERO));
        h.insert("retry-after", "soon".parse().unwrap());
        assert_eq!(retry_after(&h), None);
        assert_eq!(
            parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777))
        );
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(SystemTime::UNIX_EPOCH)
        );
        assert_eq!(
            parse_http_date("Tue, 29 Feb 2028 23:59:59 GMT"),
            Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_835_481_599))
        );
        for bad in [
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 25:49:37 GMT",
        ] {
            assert_eq!(parse_http_date(bad), None, "{bad}");
        }
    }

    #[test]
    fn retries_throttling_and_passing_failures_only() {
        for s in [429, 500, 502, 503, 504] {
            assert!(retryable(s), "{s}");
        }
        for s in [200, 201, 202, 400, 401, 403, 404, 405, 501, 505] {
            assert!(!retryable(s), "{s}");
        }
    }

    #[test]
    fn the_floor_wants_its_bytes_in_every_period() {
        let t = Timeouts::new(2, 100);
        let ago = |f: &mut Floor, secs: u64| {
            f.since = Instant::now()
                .checked_sub(Duration::from_secs(secs))
                .expect("an instant 3 s ago");
        };
        let mut f = Floor::new(&t);
        assert!(f.note(10), "within its first period");
        ago(&mut f, 3);
        assert!(!f.note(10), "20 bytes in 3 s is below 100 a second");
        let mut f = Floor::new(&t);
        ago(&mut f, 3);
        assert!(f.note(400), "400 bytes in 3 s is above it");
        assert_eq!(f.bytes, 0, "a new period starts");
        ago(&mut f, 3);
        assert!(f.note(0), "the end of a body is never too slow");
        let mut none = Floor::new(&Timeouts::new(2, 0));
        ago(&mut none, 60);
        assert!(none.note(1), "no floor");
        assert_eq!(
            Timeouts::new(30, 1024).upload_budget(2 << 20),
            Some(Duration::from_secs(30 + 2048))
        );
        assert_eq!(Timeouts::new(30, 0).upload_budget(2 << 20), None);
        assert_eq!(Timeouts::new(60, 1).connect, Timeouts::DEFAULT_CONNECT);
        assert_eq!(Timeouts::new(5, 1).connect, Duration::from_secs(5));
    }

    #[test]
    fn backoff_doubles_up_to_its_cap() {
        let first = backoff(0);
        assert!(first >= BACKOFF_BASE && first <= BACKOFF_BASE + BACKOFF_BASE / 4);
        let third = backoff(2);
        assert!(third >= BACKOFF_BASE * 4 && third <= BACKOFF_BASE * 5);
        let late = backoff(30);
        assert!(late >= BACKOFF_CAP && late <= BACKOFF_CAP + BACKOFF_CAP / 4);
    }
}
