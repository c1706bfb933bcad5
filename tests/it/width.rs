//! Human output fits the terminal: on a terminal (a pseudo-terminal of a
//! chosen size, opened here), `list`, `log`, `audit`, `show` and `find`
//! print no line wider than it, with digests shortened to unique prefixes
//! when it is narrow; piped, they print the text they always printed;
//! `--short` gives prefixes every command takes back.

use std::collections::BTreeSet;
use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;

use serde_json::Value;

use crate::git::{commit_all, git, init};
use crate::util::{self, assert_exit, minimal_plugin, os, parse_json, write, TestEnv};

/// A long version, as release candidates with build metadata have.
const LONG: &str = "3.0.0-rc.1+build.20250101.0123456789abcdef";

/// The tag of the commit that holds the release.
const TAG: &str = "compound-engineering-v3.0.0-rc.1+build.20250101";

/// A store with several snapshots whose lines run long, and a results file
/// whose audit finds problems.
struct Scene {
    env: TestEnv,
    /// The snapshot of the committed release (ingested from its work tree
    /// and with `--git`), one elsewhere at 1.0.0, and the release changed.
    digests: [String; 3],
    /// A results file: known digests, a wrong version, an unknown digest,
    /// rows that break the arm rule, a malformed digest and a line that is
    /// no JSON.
    results: PathBuf,
}

fn scene() -> Scene {
    let env = TestEnv::new();
    let repo = env.path("repo");
    init(&repo);
    let plugin = repo.join("plugins/compound-engineering");
    minimal_plugin(&plugin, LONG);
    commit_all(&repo, "release");
    git(&repo, &["tag", TAG]);
    let released = env.ingest_digest(&plugin, LONG);
    let out = env.run([
        os("ingest"),
        os("--git"),
        repo.as_os_str(),
        os("--rev"),
        os(TAG),
        os("--subdir"),
        os("plugins/compound-engineering"),
        os("--version"),
        os(LONG),
        os("--json"),
    ]);
    assert_eq!(util::digest_of(&parse_json(&out)), released);
    let elsewhere = env.plugin(
        "releases/a-rather-long-directory-for-one-more-release/plugin",
        "1.0.0",
    );
    let other = env.ingest_digest(&elsewhere, "1.0.0");
    write(&plugin.join("skills/ce-plan/notes.md"), "changed since\n");
    let changed = env.ingest_digest(&plugin, LONG);
    let unknown = "ab".repeat(32);
    let row = |arm: &str, digest: &str, version: &str| {
        format!(
            r#"{{"arm": "{arm}", "ce_plugin_manifest_digest": "{digest}", "ce_plugin_version": "{version}"}}"#
        )
    };
    let rows = [
        row("ce_workflow", &released, LONG),
        row("ce_review", &released, LONG),
        row("ce_workflow_direct", &other, "1.0.1"),
        row("ce_workflow", &changed, LONG),
        row("ce_workflow", &unknown, "9.9.9"),
        row("control", &other, "1.0.0"),
        r#"{"arm": "ce_review"}"#.to_string(),
        row("ce_review", "XYZ", "1"),
        "not json at all".to_string(),
    ];
    let results = env.path("results.jsonl");
    write(&results, rows.join("\n") + "\n");
    Scene {
        env,
        digests: [released, other, changed],
        results,
    }
}

impl Scene {
    /// The commands whose text is laid out, each with the exit code it
    /// gives here.
    fn commands(&self) -> Vec<(Vec<String>, i32)> {
        let results = util::s(&self.results);
        vec![
            (vec!["list".into()], 0),
            (vec!["log".into()], 0),
            (vec!["audit".into(), results.clone()], 1),
            (vec!["audit".into(), "--markdown".into(), results], 1),
            (
                vec!["show".into(), self.digests[0].clone(), "--files".into()],
                0,
            ),
            (
                vec!["find".into(), "--path".into(), "skills/ce-plan".into()],
                0,
            ),
        ]
    }

    /// `cestore ARGS` with stdout to a pipe, `COLUMNS` as given (unset
    /// when `None`): its exit code and stdout.
    fn piped(&self, args: &[String], columns: Option<&str>) -> (i32, String) {
        let mut cmd = self.env.cmd(args);
        cmd.env_remove("COLUMNS");
        if let Some(c) = columns {
            cmd.env("COLUMNS", c);
        }
        let out = cmd.output().expect("run cestore");
        let code = out.status.code().expect("an exit code");
        (code, String::from_utf8(out.stdout).expect("UTF-8 text"))
    }

    /// `cestore ARGS` with stdout on a new pseudo-terminal `cols` columns
    /// wide (0: one that tells no width), `COLUMNS` as given (unset when
    /// `None`): its exit code and what the terminal received, `\r\n` read
    /// as `\n`. `None` when no pseudo-terminal can be opened here.
    fn in_terminal(
        &self,
        args: &[String],
        cols: u16,
        columns: Option<&str>,
    ) -> Option<(i32, String)> {
        use rustix::fs::{Mode, OFlags};
        use rustix::pty::{grantpt, openpt, ptsname, unlockpt, OpenptFlags};
        let master = openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY).ok()?;
        grantpt(&master).ok()?;
        unlockpt(&master).ok()?;
        let name = ptsname(&master, Vec::new()).ok()?;
        let slave = rustix::fs::open(
            name.as_c_str(),
            OFlags::RDWR | OFlags::NOCTTY,
            Mode::empty(),
        )
        .ok()?;
        let size = rustix::termios::Winsize {
            ws_row: 50,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        rustix::termios::tcsetwinsize(&slave, size).expect("set the terminal's size");
        let mut cmd = self.env.cmd(args);
        cmd.env_remove("COLUMNS");
        if let Some(c) = columns {
            cmd.env("COLUMNS", c);
        }
        cmd.stdin(Stdio::null())
            .stdout(Stdio::from(slave))
            .stderr(Stdio::piped());
        let child = cmd.spawn().expect("spawn cestore");
        // The terminal's far end stays open only in the child.
        drop(cmd);
        let reader = std::thread::spawn(move || {
            let mut master = File::from(master);
            let mut got = Vec::new();
            let mut chunk = [0u8; 4096];
            loop {
                match master.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(n) => got.extend_from_slice(&chunk[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                    // EIO: the child closed the terminal's far end.
                    Err(_) => break,
                }
            }
            got
        });
        let out = util::finish(child, std::time::Duration::from_secs(60), "cestore");
        util::assert_sane(&out, "cestore");
        let text = String::from_utf8(reader.join().expect("the terminal's reader"))
            .expect("UTF-8 text")
            .replace("\r\n", "\n");
        Some((out.status.code().expect("an exit code"), text))
    }
}

/// The widest line's length in characters, and that line.
fn widest(text: &str) -> (usize, &str) {
    text.lines()
        .map(|l| (l.chars().count(), l))
        .max()
        .unwrap_or((0, ""))
}

/// The text with all whitespace taken out: what wrapping cannot change.
fn ink(text: &str) -> String {
    text.chars().filter(|c| !c.is_whitespace()).collect()
}

/// The test skips, saying why, when no pseudo-terminal can be opened.
fn no_terminal(test: &str) {
    util::skip(test, "no pseudo-terminal can be opened here (/dev/ptmx)");
}

#[test]
fn list_log_audit_show_and_find_fit_an_80_column_terminal() {
    let s = scene();
    for (args, code) in s.commands() {
        let (piped_code, piped) = s.piped(&args, None);
        assert_eq!(piped_code, code, "{args:?}: {piped}");
        let markdown = args.iter().any(|a| a == "--markdown");
        if ["list", "log", "audit"].contains(&args[0].as_str()) && !markdown {
            // Piped, the same lines run long: the terminal's text is fitted.
            assert!(widest(&piped).0 > 100, "{args:?}:\n{piped}");
        }
        let Some((tty_code, tty)) = s.in_terminal(&args, 80, None) else {
            return no_terminal("width::list_log_audit_show_and_find_fit_an_80_column_terminal");
        };
        assert_eq!(tty_code, code, "{args:?}: {tty}");
        if !markdown {
            let (n, line) = widest(&tty);
            assert!(
                n <= 80,
                "{args:?}: a line of {n} characters: {line:?}\n{tty}"
            );
        }
        // Short digests: no full one, and each its own prefix.
        for d in &s.digests {
            assert!(
                !tty.contains(d.as_str()),
                "{args:?} names {d} in full:\n{tty}"
            );
        }
        for d in &s.digests[..2] {
            if args[0] != "show" {
                assert!(
                    tty.contains(&d[..12]),
                    "{args:?} lacks {}:\n{tty}",
                    &d[..12]
                );
            }
        }
        // Wrapped, nothing is lost or moved: the text `--short` prints
        // piped, but for where lines break (the audit's table folds its
        // columns under each row, so there only each cell is found).
        let mut short_args = vec!["--short".to_string()];
        short_args.extend(args.iter().cloned());
        let (_, short) = s.piped(&short_args, None);
        if args[0] == "audit" && !markdown {
            for word in short.split_whitespace() {
                assert!(tty.contains(word), "{args:?}: {word:?} is lost:\n{tty}");
            }
        } else {
            assert_eq!(ink(&tty), ink(&short), "{args:?}:\n{tty}");
        }
    }
}

#[test]
fn a_wide_terminal_keeps_full_digests_and_columns_stands_in_for_a_silent_one() {
    let s = scene();
    let list = vec!["list".to_string()];
    let Some((_, wide)) = s.in_terminal(&list, 250, None) else {
        return no_terminal(
            "width::a_wide_terminal_keeps_full_digests_and_columns_stands_in_for_a_silent_one",
        );
    };
    for d in &s.digests {
        assert!(wide.contains(d.as_str()), "{d}:\n{wide}");
    }
    let (n, line) = widest(&wide);
    assert!(n <= 250 && n > 160, "{n}: {line:?}");
    // A terminal that tells no width: $COLUMNS, which a pipe ignores.
    let log = vec!["log".to_string()];
    let (_, narrow) = s.in_terminal(&log, 0, Some("60")).expect("a terminal");
    let (n, line) = widest(&narrow);
    assert!(n <= 60, "{n}: {line:?}\n{narrow}");
    assert!(narrow.contains(&s.digests[0][..12]) && !narrow.contains(&s.digests[0]));
    // The terminal's own width wins over $COLUMNS.
    let (_, told) = s.in_terminal(&log, 100, Some("60")).expect("a terminal");
    let (n, _) = widest(&told);
    assert!(n > 60 && n <= 100, "{n}:\n{told}");
    // --json on a terminal is the JSON a pipe gets: full digests.
    for (args, _) in s.commands() {
        if args.iter().any(|a| a == "--markdown") {
            continue;
        }
        let mut json = args.clone();
        json.push("--json".into());
        let (_, tty) = s.in_terminal(&json, 80, None).expect("a terminal");
        let (_, piped) = s.piped(&json, None);
        assert_eq!(tty, piped, "{json:?}");
        let mut short = vec!["--short".to_string()];
        short.extend(json);
        assert_eq!(s.piped(&short, None).1, piped, "{short:?}");
    }
}

/// A source summary as `list` wrote it: `COMMIT12 TAG clean`.
fn summary(s: &Value) -> String {
    let mut out = s["commit"]
        .as_str()
        .map_or("no commit".into(), |c| c[..12].to_string());
    if let Some(tag) = s["tag"].as_str() {
        out += &format!(" {tag}");
    }
    out += if s["clean"] == true {
        " clean"
    } else {
        " dirty"
    };
    if s["via"] != "ingest" {
        out += &format!(" via {}", s["via"].as_str().unwrap());
    }
    out
}

/// A source record on one line, as `log` wrote it.
fn record_line(r: &Value) -> String {
    let tag = r["tag"]
        .as_str()
        .map(|t| format!(" (tag {t})"))
        .unwrap_or_default();
    let at = match r["path"].as_str().unwrap() {
        "" => "the root",
        p => p,
    };
    let state = if r["clean"] == true {
        "clean".to_string()
    } else {
        let c = &r["changes"];
        let mut counts = Vec::new();
        let mut paths = Vec::new();
        for what in ["changed", "added", "removed"] {
            let list = c[what].as_array().unwrap();
            if !list.is_empty() {
                counts.push(format!("{} {what}", list.len()));
            }
            paths.extend(list.iter().map(|p| p.as_str().unwrap().to_string()));
        }
        let more = paths.len() > 3;
        paths.truncate(3);
        if more {
            paths.push("…".into());
        }
        format!("dirty: {} ({})", counts.join(", "), paths.join(", "))
    };
    format!(
        "{} {}{tag} at {at} of {}, {state}",
        r["read_from"].as_str().unwrap(),
        r["commit"].as_str().map_or("no commit", |c| &c[..12]),
        r["repository"].as_str().unwrap()
    )
}

/// `N file` or `N files`.
fn counted(n: &Value, one: &str, many: &str) -> String {
    let n = n.as_i64().unwrap();
    format!("{n} {}", if n == 1 { one } else { many })
}

#[test]
fn piped_output_is_the_text_it_always_was() {
    let s = scene();
    // Piped, $COLUMNS changes nothing.
    for (args, _) in s.commands() {
        let (_, plain) = s.piped(&args, None);
        assert_eq!(s.piped(&args, Some("40")).1, plain, "{args:?}");
        assert!(plain.contains(&s.digests[0]), "{args:?}:\n{plain}");
    }
    let run = |args: &[&str]| {
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        let mut json = args.clone();
        json.push("--json".into());
        let out = s.env.run(&json);
        (s.piped(&args, None).1, parse_json(&out))
    };
    // Each line, byte for byte, as the JSON's fields made it before.
    let (text, json) = run(&["list"]);
    let want: String = crate::util::array(&json["snapshots"])
        .iter()
        .map(|l| {
            let source = source_part(&l["source"], summary);
            format!(
                "{}  {} {}  {}  {}  {}{source}\n",
                l["manifest_digest"].as_str().unwrap(),
                l["name"].as_str().unwrap(),
                l["version"].as_str().unwrap(),
                counted(&l["file_count"], "file", "files"),
                counted(&l["total_bytes"], "byte", "bytes"),
                l["first_ingested_at"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(text, want);
    assert_eq!(json["snapshots"].as_array().unwrap().len(), 3);
    let (text, json) = run(&["log"]);
    let want: String = crate::util::array(&json["ingests"])
        .iter()
        .map(|e| {
            let source = source_part(&e["source_record"], record_line);
            let text = |k: &str| e[k].as_str().unwrap().to_string();
            format!(
                "{}  {}  {}  {}  {}@{}  {}  new {} reused {}{source}\n",
                text("at"),
                text("manifest_digest"),
                text("event"),
                text("source"),
                text("user"),
                text("host"),
                text("tool_version"),
                e["new_objects"],
                e["reused_objects"]
            )
        })
        .collect();
    assert_eq!(text, want);
    assert!(
        text.contains("dirty: 1 added (skills/ce-plan/notes.md)"),
        "{text}"
    );
    let (text, json) = run(&["find", "--path", "skills/ce-plan"]);
    let want: String = crate::util::array(&json["matches"])
        .iter()
        .map(|h| {
            format!(
                "{}  {}  {} {} {:>8} {}\n",
                h["manifest_digest"].as_str().unwrap(),
                h["version"].as_str().unwrap(),
                h["sha256"].as_str().unwrap(),
                if h["executable"] == true { "x" } else { "-" },
                h["size"].as_i64().unwrap(),
                h["path"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(text, want);
    // The audit's table, its head and a row in full.
    let (text, _) = run(&["audit", &util::s(&s.results)]);
    let first = text.lines().next().unwrap();
    assert!(
        first.starts_with(&format!("digest{}  status", " ".repeat(58)))
            && first.ends_with("lines  source"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with(&format!("{}  version-mismatch  1.0.0", s.digests[1]))),
        "{text}"
    );
}

#[test]
fn short_digests_are_unique_prefixes_every_command_takes_back() {
    let s = scene();
    let short = |args: &[&str]| {
        let mut all = vec!["--short"];
        all.extend_from_slice(args);
        let out = s.env.run(&all);
        String::from_utf8(out.stdout).unwrap()
    };
    let listed: Vec<String> = short(&["list"])
        .lines()
        .map(|l| l.split_whitespace().next().unwrap().to_string())
        .collect();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed.iter().collect::<BTreeSet<_>>().len(), 3);
    for (prefix, full) in listed.iter().zip(&s.digests) {
        assert!(prefix.len() >= 12 && prefix.len() < 64, "{prefix}");
        assert!(full.starts_with(prefix.as_str()), "{prefix} of {full}");
        // Every command takes the prefix back.
        let shown = s.env.json(["show", prefix.as_str(), "--json"]);
        assert_eq!(shown["provenance"]["manifest_digest"], full.as_str());
        let logged = s.env.json(["log", prefix.as_str(), "--json"]);
        assert!(crate::util::array(&logged["ingests"])
            .iter()
            .all(|e| e["manifest_digest"] == full.as_str()));
        let dest = s.env.path(&format!("view-{prefix}"));
        assert_eq!(
            s.env.checkout_ok(prefix, &dest, &[])["manifest_digest"],
            full.as_str()
        );
        let text = short(&["show", prefix]);
        assert!(
            text.contains(&format!("manifest_digest:         {prefix}\n")),
            "{text}"
        );
    }
    let diff = s
        .env
        .run(["diff", listed[0].as_str(), listed[2].as_str(), "--json"]);
    assert_exit(&diff, 0);
    // The audit names each digest, the one the store lacks too, by a
    // prefix; `show` finds the stored ones and knows the other is unknown.
    let audit = short(&["audit", &util::s(&s.results)]);
    for (prefix, full) in listed.iter().zip(&s.digests) {
        assert!(
            audit.lines().any(|l| l.starts_with(&format!("{prefix}  "))),
            "{full}:\n{audit}"
        );
    }
    let unknown = "ab".repeat(6);
    assert!(
        audit
            .lines()
            .any(|l| l.starts_with(&format!("{unknown}  unknown"))),
        "{audit}"
    );
    assert_exit(&s.env.run(["show", unknown.as_str()]), 4);
    // File contents too: `find --object` takes back what `show --files` and
    // `find` print.
    let files = short(&["show", &listed[0], "--files"]);
    let objects: Vec<&str> = files
        .lines()
        .skip_while(|l| *l != "files:")
        .skip(1)
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(objects.len(), 4, "{files}");
    for o in objects {
        assert!(o.len() >= 12 && o.len() < 64, "{o}");
        let found = util::find_matches(&s.env, &["--object", o]);
        assert!(found
            .iter()
            .all(|h| h["sha256"].as_str().unwrap().starts_with(o)));
        assert!(!found.is_empty());
    }
    let found = short(&["find", "--path", "skills/ce-plan/SKILL.md"]);
    for line in found.lines() {
        let object = line.split_whitespace().nth(2).unwrap();
        assert!(
            !util::find_matches(&s.env, &["--object", object]).is_empty(),
            "{line}"
        );
    }
}

/// A line's `  source ...` part: empty where the row has no source, else
/// the source as `line` writes it.
fn source_part(source: &Value, line: fn(&Value) -> String) -> String {
    match source {
        Value::Null => String::new(),
        s => format!("  source {}", line(s)),
    }
}
