//! The `cestore` binary: parse, run, and decide the exit code in one place.

use std::ffi::OsString;
use std::io::Write;
use std::process::ExitCode;

use cestore::cli::{self, Cli};
use clap::error::ErrorKind;
use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<OsString> = std::env::args_os().collect();
    // `--json` anywhere on the command line asks for JSON, even when the
    // rest of the line cannot be parsed.
    let json = argv.iter().skip(1).any(|a| a == "--json");
    let args = match Cli::try_parse_from(&argv) {
        Ok(args) => args,
        Err(err) => return usage(&err, json),
    };
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => report(args.json, err),
    }
}

fn run(args: &Cli) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    Ok(cli::execute(args, &mut out)?)
}

/// Handles a command line the parser refused: `--help` and `--version` print
/// and succeed; anything else is a usage error, reported like every other error.
fn usage(err: &clap::Error, json: bool) -> ExitCode {
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) {
        return match err.print() {
            Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                ExitCode::from(cestore::ErrorKind::Io.exit_code())
            }
            _ => ExitCode::SUCCESS,
        };
    }
    // The parser's own text (with its usage line and tips) is the human message.
    let _ = err.print();
    let usage = cestore::Error::Usage(cli::usage_message(err));
    if json {
        let _ = writeln!(std::io::stdout().lock(), "{}", cli::error_json(&usage));
    }
    ExitCode::from(usage.exit_code())
}

/// Prints an error with its context chain and returns its exit code.
fn report(json: bool, err: anyhow::Error) -> ExitCode {
    if is_broken_pipe(&err) {
        return ExitCode::SUCCESS;
    }
    // An error from outside the library (none is expected) counts as the
    // store's failure.
    let code = err.downcast_ref::<cestore::Error>().map_or(
        cestore::ErrorKind::Io.exit_code(),
        cestore::Error::exit_code,
    );
    if json {
        if let Some(e) = err.downcast_ref::<cestore::Error>() {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", cli::error_json(e));
        }
    }
    let (message, hint) = match err.downcast_ref::<cestore::Error>() {
        Some(e) => (cli::error_message(e), cli::hint(e)),
        None => (format!("{err:#}"), None),
    };
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "cestore: error: {message}");
    if let Some(hint) = hint {
        let _ = writeln!(stderr, "hint: {hint}");
    }
    ExitCode::from(code)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
