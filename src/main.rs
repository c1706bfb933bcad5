//! The `cestore` binary: parse, run, and decide the exit code in one place.

use std::ffi::OsString;
use std::io::Write;
use std::os::fd::AsFd;
use std::process::ExitCode;

use cestore::cli::{self, Cli};
use clap::error::ErrorKind;
use clap::Parser;

fn main() -> ExitCode {
    let argv: Vec<OsString> = cli::args::route_profile_ingest(std::env::args_os().collect());
    // `--json` anywhere on the command line asks for JSON, even when the
    // rest of the line cannot be parsed.
    let json = argv.iter().skip(1).any(|a| a == "--json");
    let args = match Cli::try_parse_from(&argv) {
        Ok(args) => args,
        Err(err) => return usage(&err, json, &argv),
    };
    // A bus error (a memory-mapped file the full disk cannot back) is
    // reported like any other failure of the store, and never kills.
    let (store, json, shown) = (args.store.clone(), args.json, argv.clone());
    let _ = cestore::interrupt::exit_on_bus_error(move || {
        let store = cestore::store::locate(store.as_deref()).unwrap_or_default();
        let err = cestore::Error::bus_error(store).into();
        // The faulting thread may hold the standard streams' locks: this
        // thread writes through handles of its own.
        let own =
            |fd: std::os::fd::BorrowedFd<'_>| fd.try_clone_to_owned().map(std::fs::File::from);
        match (
            own(std::io::stdout().as_fd()),
            own(std::io::stderr().as_fd()),
        ) {
            (Ok(mut out), Ok(mut errout)) => report(json, err, &shown, &mut out, &mut errout),
            _ => report(
                json,
                err,
                &shown,
                &mut std::io::sink(),
                &mut std::io::sink(),
            ),
        }
    });
    match run(&args) {
        Ok(code) => ExitCode::from(code),
        Err(err) => ExitCode::from(report(
            args.json,
            err,
            &argv,
            &mut std::io::stdout().lock(),
            &mut std::io::stderr().lock(),
        )),
    }
}

fn run(args: &Cli) -> anyhow::Result<u8> {
    let mut out = std::io::stdout().lock();
    Ok(cli::execute(args, &mut out)?)
}

/// Handles a command line the parser refused: `--help` and `--version` print
/// and succeed; anything else is a usage error, reported like every other
/// error, with every URL of `argv` that holds a credential redacted.
fn usage(err: &clap::Error, json: bool, argv: &[OsString]) -> ExitCode {
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
    // A URL holding a credential is redacted there too (at the cost of the
    // text's colours).
    let text = err.render().to_string();
    let scrubbed = cli::urls::scrub(&text, argv);
    if scrubbed == text {
        let _ = err.print();
    } else {
        let _ = write!(std::io::stderr().lock(), "{scrubbed}");
    }
    // clap's own words, shown and exited with: nothing matches them.
    let usage = cestore::Error::Usage(cli::urls::scrub(&cli::usage_message(err), argv));
    if json {
        let _ = writeln!(std::io::stdout().lock(), "{}", cli::error_json(&usage));
    }
    ExitCode::from(usage.exit_code())
}

/// Prints an error with its context chain on `errout` (and with `json`, its
/// JSON object on `out`) and returns its exit code; every URL of `argv` that
/// holds a credential is shown redacted.
fn report(
    json: bool,
    err: anyhow::Error,
    argv: &[OsString],
    out: &mut dyn Write,
    errout: &mut dyn Write,
) -> u8 {
    if is_broken_pipe(&err) {
        return 0;
    }
    // An error from outside the library (none is expected) counts as the
    // store's failure.
    let code = err.downcast_ref::<cestore::Error>().map_or(
        cestore::ErrorKind::Io.exit_code(),
        cestore::Error::exit_code,
    );
    if json {
        if let Some(e) = err.downcast_ref::<cestore::Error>() {
            let mut object = cli::error_json(e);
            cli::urls::scrub_json(&mut object, argv);
            let _ = writeln!(out, "{object}");
            let _ = out.flush();
        }
    }
    let (message, hint) = match err.downcast_ref::<cestore::Error>() {
        Some(e) => (cli::error_message(e), cli::hint(e)),
        None => (format!("{err:#}"), None),
    };
    let _ = writeln!(
        errout,
        "cestore: error: {}",
        cli::urls::scrub(&message, argv)
    );
    if let Some(hint) = hint {
        let _ = writeln!(errout, "hint: {}", cli::urls::scrub(&hint, argv));
    }
    let _ = errout.flush();
    code
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}
