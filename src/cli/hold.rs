//! The `stage --hold` protocol: stage, report, then wait for one line on
//! standard input (or its end, or a termination signal) before discarding
//! the view and reporting that too.
//!
//! The line [`SPARE_LINE`] keeps the view as a spare; any other line, a read
//! error or the end of input (the caller died) remove it, as a signal does.
//! The Python package writes these lines (`HeldStage.release`), and its tests
//! check them against this binary.

use std::io::{self, Write};
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};

use super::output::{emit, Output};
use crate::cmd;
use crate::error::{Error, Result};
use crate::interrupt::{Interrupts, Signal, Waited};

/// The line that releases a held stage and keeps its view as a spare.
pub const SPARE_LINE: &str = "discard --spare";

/// How a held stage ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Its caller released it: with [`SPARE_LINE`] (`spare`), with
    /// `discard` or any other line, or by the end of its input (it died).
    Released {
        /// Keep the view as a spare.
        spare: bool,
    },
    /// A termination signal came first.
    Signalled(Signal),
}

/// Catches the termination signals for a held stage, from before it makes
/// its view: one that comes while the view is made is acted on once it is
/// made, so that no signal leaves a view behind.
fn catch_signals() -> Result<Interrupts> {
    Interrupts::catch().map_err(|e| Error::io("catch the termination signals", "<signals>", e))
}

/// Waits for what ends a held stage: the line that releases it, the end of
/// its input, or a termination signal, whichever comes first. At most a
/// short line is read.
pub fn wait_for_release(input: BorrowedFd<'_>, interrupts: &mut Interrupts) -> Ending {
    match interrupts.read_line(input, 64) {
        Waited::Line(line) => Ending::Released {
            spare: line.trim() == SPARE_LINE,
        },
        Waited::Signal(signal) => Ending::Signalled(signal),
    }
}

/// Runs a held stage: reports the stage, waits for its release, discards
/// the view and reports that. Returns the exit code of the last report.
pub fn held_stage(
    output: Output,
    root: &Path,
    opts: &cmd::stage::StageOptions<'_>,
    out: &mut dyn Write,
) -> Result<u8> {
    let mut interrupts = catch_signals()?;
    let staged = cmd::stage::stage(root, opts)?;
    if let Some(ingest) = &staged.ingest {
        super::warn_of_secrets(ingest);
    }
    let shown = emit(output, out, &staged).and_then(|code| {
        out.flush()
            .map_err(|e| Error::io("write the report", "<stdout>", e))?;
        Ok(code)
    });
    // No CE arm, no view: nothing to hold.
    let Some(view) = staged.view.as_deref().map(PathBuf::from) else {
        return shown;
    };
    // A caller that cannot read the report (it died) gets no view left behind.
    let ending = match shown {
        Ok(_) => wait_for_release(io::stdin().as_fd(), &mut interrupts),
        Err(_) => Ending::Released { spare: false },
    };
    let spare = matches!(ending, Ending::Released { spare: true });
    let released = cmd::stage::release(root, &view, spare, || match ending {
        Ending::Signalled(signal) => Some(signal),
        Ending::Released { .. } => interrupts.caught(),
    });
    shown?;
    emit(output, out, &released?)
}
