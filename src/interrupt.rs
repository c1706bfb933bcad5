//! Termination signals caught instead of obeyed, for a process that must
//! take back what it holds before it exits.
//!
//! [`Interrupts::catch`] replaces the default action of SIGHUP, SIGINT and
//! SIGTERM (ending the process on the spot) by a note of which arrived. The
//! process then decides when to act on it: [`Interrupts::caught`] says
//! whether one came, and [`Interrupts::read_line`] waits for a line of input
//! or a signal, whichever comes first. A signal arriving while the process
//! acts on the first one (a second Ctrl-C, say) is noted and changes
//! nothing; SIGKILL still ends it at once.
//!
//! The handlers only store a flag and write one byte to a socket the
//! process reads (the self-pipe pattern of `signal-hook`), so a signal that
//! comes just before the wait still ends it.

use std::io::{self, Read};
use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use rustix::event::{PollFd, PollFlags};
use rustix::io::Errno;
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::SigId;

/// A termination signal that arrived.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Signal(i32);

impl Signal {
    /// SIGHUP: the terminal or the session went away.
    pub const HUP: Signal = Signal(SIGHUP);
    /// SIGINT: Ctrl-C.
    pub const INT: Signal = Signal(SIGINT);
    /// SIGTERM: asked to stop.
    pub const TERM: Signal = Signal(SIGTERM);

    /// The signals caught, in the order they are looked at.
    const ALL: [Signal; 3] = [Signal::TERM, Signal::INT, Signal::HUP];

    /// The signal's number.
    pub fn number(self) -> i32 {
        self.0
    }

    /// The signal's name, as `SIGTERM`.
    pub fn name(self) -> &'static str {
        match self.0 {
            SIGHUP => "SIGHUP",
            SIGINT => "SIGINT",
            _ => "SIGTERM",
        }
    }

    /// The exit code of a process ended by the signal, as a shell gives it:
    /// 128 + its number (129, 130, 143).
    pub fn exit_code(self) -> u8 {
        128 + self.0 as u8
    }
}

impl serde::Serialize for Signal {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The termination signals, caught from [`Interrupts::catch`] on.
pub struct Interrupts {
    /// Readable once a signal came: each handler writes one byte to its peer.
    wake: UnixStream,
    /// One flag per signal of [`Signal::ALL`], set by its handler.
    flags: [Arc<AtomicBool>; 3],
    /// The first signal noticed, which later ones do not replace.
    first: Option<Signal>,
    ids: Vec<SigId>,
}

/// What [`Interrupts::read_line`] found first.
#[derive(Debug, PartialEq, Eq)]
pub enum Waited {
    /// A line (without its end), or what the input held before it ended,
    /// failed or gave `max` bytes without one.
    Line(String),
    /// A signal came first.
    Signal(Signal),
}

impl Interrupts {
    /// Catches SIGHUP, SIGINT and SIGTERM from now on: each is noted instead
    /// of ending the process, until this is dropped.
    pub fn catch() -> io::Result<Interrupts> {
        let (wake, write) = UnixStream::pair()?;
        wake.set_nonblocking(true)?;
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if live.is_none() {
            // Registered once, before any note, so that it runs first: with
            // no `Interrupts` alive, a signal ends the process as it would
            // have without handlers.
            for signal in Signal::ALL {
                signal_hook::flag::register_conditional_default(signal.0, &OBEY)?;
            }
            *live = Some(0);
        }
        let flags = [(); 3].map(|()| Arc::new(AtomicBool::new(false)));
        let mut ids = Vec::new();
        let registered = Signal::ALL
            .iter()
            .zip(&flags)
            .try_for_each(|(signal, flag)| {
                // The flag before the byte, so that the reader woken by the byte
                // finds the flag set.
                ids.push(signal_hook::flag::register(signal.0, Arc::clone(flag))?);
                let write = write.try_clone()?;
                ids.push(signal_hook::low_level::pipe::register(signal.0, write)?);
                Ok::<(), io::Error>(())
            });
        if let Err(e) = registered {
            for id in ids {
                signal_hook::low_level::unregister(id);
            }
            return Err(e);
        }
        *live = live.map(|n| n + 1);
        OBEY.store(false, Ordering::SeqCst);
        Ok(Interrupts {
            wake,
            flags,
            first: None,
            ids,
        })
    }

    /// The first signal caught so far, if any.
    pub fn caught(&mut self) -> Option<Signal> {
        // Empty the socket before looking at the flags: a signal that comes
        // in between is then seen now or wakes the next wait.
        let mut buf = [0u8; 64];
        while matches!((&self.wake).read(&mut buf), Ok(n) if n > 0) {}
        if self.first.is_none() {
            self.first = Signal::ALL
                .iter()
                .zip(&self.flags)
                .find(|(_, flag)| flag.load(Ordering::SeqCst))
                .map(|(signal, _)| *signal);
        }
        self.first
    }

    /// Reads one line of at most `max` bytes from `input`, unless a signal
    /// comes first (or came already). The line's end, the input's end, a
    /// read error or `max` bytes end the line.
    pub fn read_line(&mut self, input: BorrowedFd<'_>, max: usize) -> Waited {
        let mut line = Vec::new();
        loop {
            if let Some(signal) = self.caught() {
                return Waited::Signal(signal);
            }
            let mut fds = [
                PollFd::new(&self.wake, PollFlags::IN),
                PollFd::new(&input, PollFlags::IN),
            ];
            match rustix::event::poll(&mut fds, None) {
                Ok(_) | Err(Errno::INTR) => {}
                Err(_) => break,
            }
            let woken = !fds[0].revents().is_empty();
            let ready = !fds[1].revents().is_empty();
            if woken || !ready {
                continue;
            }
            let mut buf = [0u8; 64];
            let room = (max - line.len()).min(buf.len());
            match rustix::io::read(input, &mut buf[..room]) {
                Ok(0) => break,
                Ok(n) => match buf[..n].iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        line.extend_from_slice(&buf[..end]);
                        break;
                    }
                    None => line.extend_from_slice(&buf[..n]),
                },
                Err(Errno::INTR | Errno::AGAIN) => {}
                Err(_) => break,
            }
            if line.len() >= max {
                break;
            }
        }
        Waited::Line(String::from_utf8_lossy(&line).into_owned())
    }
}

impl Drop for Interrupts {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
        *live = live.map(|n| n.saturating_sub(1));
        if *live == Some(0) {
            OBEY.store(true, Ordering::SeqCst);
        }
    }
}

/// Turns a bus error into an orderly exit: from now on, SIGBUS runs
/// `report` (which prints the error) on a thread of its own, and the process
/// exits with the code it returns.
///
/// The kernel sends SIGBUS when a page of a memory-mapped file cannot be
/// backed: SQLite's shared-memory index (`catalogue.sqlite-shm`) on a full
/// filesystem whose blocks are smaller than a page, where SQLite allocates
/// only a page's last block before it writes the rest. The faulting thread
/// stops where it is (each retry of the access is caught again, never
/// obeyed), as it would under `kill -9`, so the store is left as a crash
/// leaves it, and nothing is ever half-reported: the command exits with a
/// message instead of dying of the signal.
pub fn exit_on_bus_error(report: impl FnOnce() -> u8 + Send + 'static) -> io::Result<()> {
    // The standard library's own SIGBUS handler (it looks for stack
    // overflows) would restore the default action at the first fault it does
    // not recognise, and the retried access would then kill the process:
    // the default action goes back first, so that the handler below runs
    // alone.
    //
    // SAFETY: `signal` with `SIG_DFL` installs no code of ours; it runs
    // before the handler below exists, and nothing else sets SIGBUS.
    #[allow(unsafe_code)]
    let previous = unsafe { libc::signal(libc::SIGBUS, libc::SIG_DFL) };
    if previous == libc::SIG_ERR {
        return Err(io::Error::last_os_error());
    }
    let (mut wake, write) = UnixStream::pair()?;
    signal_hook::low_level::pipe::register(signal_hook::consts::SIGBUS, write)?;
    std::thread::Builder::new()
        .name("sigbus".into())
        .spawn(move || {
            let mut byte = [0u8; 1];
            if matches!(wake.read(&mut byte), Ok(1)) {
                std::process::exit(i32::from(report()));
            }
        })?;
    Ok(())
}

/// How many [`Interrupts`] are alive; `None` until the first is made.
static LIVE: Mutex<Option<usize>> = Mutex::new(None);
/// Whether the signals take their default action: no `Interrupts` is alive.
static OBEY: AtomicBool = AtomicBool::new(true);

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsFd;

    #[test]
    fn a_line_or_a_signal_ends_the_wait_and_the_first_signal_is_kept() {
        let mut interrupts = Interrupts::catch().unwrap();
        let (mut tx, rx) = UnixStream::pair().unwrap();
        tx.write_all(b"discard --spare\nmore").unwrap();
        assert_eq!(
            interrupts.read_line(rx.as_fd(), 64),
            Waited::Line("discard --spare".into())
        );
        let (mut tx, rx) = UnixStream::pair().unwrap();
        tx.write_all(&[b'x'; 100]).unwrap();
        assert_eq!(
            interrupts.read_line(rx.as_fd(), 64),
            Waited::Line("x".repeat(64))
        );
        // The input's end without a line.
        let (tx, rx) = UnixStream::pair().unwrap();
        drop(tx);
        assert_eq!(
            interrupts.read_line(rx.as_fd(), 64),
            Waited::Line("".into())
        );
        assert_eq!(interrupts.caught(), None);

        // (In the same test: a signal is seen by every live `Interrupts`.)
        let (_tx, rx) = UnixStream::pair().unwrap();
        // Raised before the wait begins: still seen, and the process lives.
        signal_hook::low_level::raise(SIGHUP).unwrap();
        assert_eq!(
            interrupts.read_line(rx.as_fd(), 64),
            Waited::Signal(Signal::HUP)
        );
        signal_hook::low_level::raise(SIGINT).unwrap();
        assert_eq!(interrupts.caught(), Some(Signal::HUP));
        assert_eq!(
            interrupts.read_line(rx.as_fd(), 64),
            Waited::Signal(Signal::HUP)
        );
        assert_eq!(
            (
                Signal::HUP.exit_code(),
                Signal::INT.exit_code(),
                Signal::TERM.exit_code()
            ),
            (129, 130, 143)
        );
    }
}
