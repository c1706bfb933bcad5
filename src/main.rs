//! The `cestore` binary: parse, run, and decide the exit code in one place.

use std::io::Write;
use std::process::ExitCode;

use cestore::cli::{self, Cli};
use clap::Parser;

fn main() -> ExitCode {
    let args = Cli::parse();
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => report(&args, err),
    }
}

fn run(args: &Cli) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    Ok(cli::execute(args, &mut out)?)
}

/// Prints an error with its context chain and returns its exit code.
fn report(args: &Cli, err: anyhow::Error) -> ExitCode {
    if is_broken_pipe(&err) {
        return ExitCode::SUCCESS;
    }
    let code = err
        .downcast_ref::<cestore::Error>()
        .map_or(7, cestore::Error::exit_code);
    if args.json {
        if let Some(e) = err.downcast_ref::<cestore::Error>() {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{}", cli::error_json(e));
        }
    }
    let message = match err.downcast_ref::<cestore::Error>() {
        Some(e) => cli::error_chain(e),
        None => format!("{err:#}"),
    };
    let _ = writeln!(std::io::stderr().lock(), "cestore: error: {message}");
    ExitCode::from(code)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
