//! The audit's human forms: a plain table, or a Markdown one to paste into
//! a report; both name digests as their [`Layout`] says, and the table fits
//! its width.

use std::io::{self, Write};

use super::layout::{columns, Fitted, Layout, Named};
use crate::audit::{DigestAudit, FieldCount, RowAt, TreeDigestAudit};
use crate::cli::output::{Output, Report};
use crate::cmd::audit::AuditReport;
use crate::error::counted;
use crate::store::trust::signed::Signature;

/// The audit's report, with the form people see.
#[derive(Debug, serde::Serialize)]
pub struct AuditOutput {
    /// The report.
    #[serde(flatten)]
    pub report: AuditReport,
    /// The form asked for: a Markdown table, else a plain one.
    #[serde(skip)]
    pub style: Output,
}

impl Report for AuditOutput {
    fn exit_code(&self) -> u8 {
        super::found_problems(!self.report.passed)
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.fitted(&Layout::plain(), w)
    }
}

impl Fitted for AuditOutput {
    /// Every digest audited: those the store lacks too.
    fn named(&self) -> Named {
        Named {
            snapshots: self
                .report
                .digests
                .iter()
                .map(|d| d.manifest_digest)
                .chain(self.report.tree_digests.iter().filter_map(|d| d.snapshot))
                .collect(),
            objects: Vec::new(),
        }
    }

    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
        match self.style {
            Output::Markdown => markdown(&self.report, layout, w),
            _ => table(&self.report, layout, w),
        }
    }
}

/// `line N`, or `FILE:N` when several inputs were read.
fn at(r: &AuditReport, p: &crate::audit::Place<'_>) -> String {
    if r.inputs.len() > 1 {
        format!("{}:{}", p.file, p.line)
    } else {
        p.line.to_string()
    }
}

/// The claimed values, `a (n)` each, and the rest counted.
fn claims(cs: &[crate::audit::Claimed<'_>], unlisted: u64) -> String {
    let mut parts: Vec<String> = cs
        .iter()
        .map(|c| format!("{} ({})", c.value, c.rows))
        .collect();
    if unlisted > 0 {
        parts.push(format!("+{unlisted} more rows"));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// One row of the digest table, cell by cell; with keys trusted, the key
/// that signed each digest last.
fn cells(r: &AuditReport, layout: &Layout, d: &DigestAudit<'_>) -> Vec<String> {
    let mut cells = vec![
        layout.digest(&d.manifest_digest),
        d.status.as_str().to_string(),
        d.version.unwrap_or("-").to_string(),
        claims(&d.claimed_versions, d.claimed_versions_unlisted),
        d.rows.to_string(),
        claims(&d.arms, d.arms_unlisted),
        format!("{}-{}", at(r, &d.first), at(r, &d.last)),
        d.source.map_or_else(|| "-".into(), super::source::short),
    ];
    if !r.trusted_keys.is_empty() {
        cells.push(match d.signature {
            Some(Signature::Signed { keyid }) => keyid.to_hex(),
            _ => "unsigned".into(),
        });
    }
    cells
}

/// The column of the key that signed a digest, with `--trusted-key`.
const SIGNED_BY: &str = "signed by";

/// The table's heads: with keys trusted, [`SIGNED_BY`] last.
fn heads(r: &AuditReport) -> Vec<&'static str> {
    let mut heads = HEADS.to_vec();
    if !r.trusted_keys.is_empty() {
        heads.push(SIGNED_BY);
    }
    heads
}

const HEADS: [&str; 8] = [
    "digest",
    "status",
    "store version",
    "claimed versions (rows)",
    "rows",
    "arms (rows)",
    "lines",
    "source",
];

/// The notes under a digest: damaged objects, a failed pull, the first row
/// of each wrong version, a source that does not re-derive it, the want of
/// a clean source.
fn notes(r: &AuditReport, d: &DigestAudit<'_>) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(v) = &d.version {
        for c in d.claimed_versions.iter().filter(|c| c.value != *v) {
            out.push(format!(
                "claims version {} in {} from line {}",
                c.value,
                counted(c.rows, "row", "rows"),
                at(r, &c.first)
            ));
        }
    }
    for o in d.damaged {
        out.push(format!("damaged: {} {}: {}", o.kind, o.path, o.detail));
    }
    if let Some(e) = &d.pull_error {
        out.push(format!("not pulled: {e}"));
    }
    if let Some(line) = d.source_check.and_then(super::source::check_line) {
        out.push(line);
    }
    if d.status == crate::audit::Status::NoCleanSource {
        out.push("no source record is clean and names a commit".into());
    }
    if let (Some(Signature::Unsigned { why }), Some(_)) = (d.signature, d.version) {
        out.push(format!("signature: {why}"));
    }
    out
}

/// The columns a table of these widths keeps within `fit` columns: all when
/// they fit (or nothing is fitted); else the digest and its status, then
/// each further column, in order, that still fits. The others fold: their
/// cells are written under the row, each on lines of its own.
fn kept(width: &[usize], fit: Option<usize>) -> Vec<bool> {
    let all = width.iter().sum::<usize>() + 2 * width.len().saturating_sub(1);
    let Some(fit) = fit.filter(|&f| all > f) else {
        return vec![true; width.len()];
    };
    let mut used = 0;
    width
        .iter()
        .enumerate()
        .map(|(i, &w)| {
            let gap = if i == 0 { 0 } else { 2 };
            let keep = i < 2 || used + gap + w <= fit;
            if keep {
                used += gap + w;
            }
            keep
        })
        .collect()
}

/// The table: the cells of each digest are made twice, once to size the
/// columns and once to print them, so that a million digests are never held
/// as text. Fitted, the columns that do not fit fold under each row, and
/// every other line wraps.
fn table(r: &AuditReport, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
    let heads = heads(r);
    let mut width: Vec<usize> = heads.iter().map(|h| h.len()).collect();
    for d in r.digests.iter() {
        for (i, c) in cells(r, layout, &d).iter().enumerate() {
            width[i] = width[i].max(columns(c));
        }
    }
    let kept = kept(&width, layout.width());
    let line = |w: &mut dyn Write, cs: &[String]| -> io::Result<()> {
        let padded: Vec<String> = cs
            .iter()
            .enumerate()
            .filter(|(i, _)| kept[*i])
            .map(|(i, c)| format!("{c:<width$}", width = width[i]))
            .collect();
        writeln!(w, "{}", padded.join("  ").trim_end())
    };
    if !r.digests.is_empty() {
        let heads: Vec<String> = heads.iter().map(|h| h.to_string()).collect();
        line(w, &heads)?;
        for d in r.digests.iter() {
            let cells = cells(r, layout, &d);
            line(w, &cells)?;
            for (i, c) in cells.iter().enumerate().filter(|(i, _)| !kept[*i]) {
                layout.line(w, &format!("  {}: {c}", heads[i]), 4)?;
            }
            for n in notes(r, &d) {
                layout.line(w, &format!("  {n}"), 4)?;
            }
        }
    }
    for d in &r.tree_digests {
        layout.line(w, &tree_line(r, layout, d), 2)?;
        for n in tree_notes(d) {
            layout.line(w, &format!("  {n}"), 4)?;
        }
    }
    for f in shown_fields(r) {
        layout.line(w, &field_line(f), 2)?;
    }
    for (place, kind, detail) in problems(r) {
        layout.line(w, &format!("{place}: {kind}: {detail}"), 2)?;
    }
    if r.row_problem_count > r.row_problems.len() as u64 {
        let more = format!(
            "… and {} more row problems (the first {} are listed)",
            r.row_problem_count - r.row_problems.len() as u64,
            r.listed_at_most
        );
        layout.line(w, &more, 2)?;
    }
    for i in r
        .inputs
        .iter()
        .filter(|i| i.malformed_count > i.malformed.len() as u64)
    {
        let more = format!(
            "… and {} more malformed lines in {} (the first {} are listed)",
            i.malformed_count - i.malformed.len() as u64,
            i.file,
            r.listed_at_most
        );
        layout.line(w, &more, 2)?;
    }
    layout.line(w, &r.verdict, 2)
}

/// A tree digest as the text lists it: its field, the digest (a content
/// digest always in full: only a full one finds its dependency list), its
/// status, the profile the store holds, the rows and their lines, and why
/// it is unsigned when so.
fn tree_line(r: &AuditReport, layout: &Layout, d: &TreeDigestAudit) -> String {
    let digest = if d.snapshot == Some(d.digest) {
        layout.digest(&d.digest)
    } else {
        d.digest.to_hex()
    };
    let mut line = format!(
        "{}  {digest}  {}  profile {}  {}  lines {}-{}",
        d.field,
        d.status.as_str(),
        match &d.profile {
            Some(p) if p != d.expected_profile => {
                format!("{p} (the field names {})", d.expected_profile)
            }
            Some(p) => p.clone(),
            None => "-".into(),
        },
        counted(d.rows, "row", "rows"),
        tree_at(r, &d.first),
        tree_at(r, &d.last),
    );
    if let (Some(Signature::Unsigned { why }), Some(_)) = (&d.signature, &d.profile) {
        line.push_str(&format!("  signature: {why}"));
    }
    line
}

/// The digest fields whose counts the human forms give: when rows carry a
/// field of the table, each field rows carry (the digest field's too);
/// else none, and the CE digests' table says it all.
fn shown_fields(r: &AuditReport) -> Vec<&FieldCount> {
    if r.field_counts.iter().skip(1).all(|f| f.rows == 0) {
        return Vec::new();
    }
    r.field_counts.iter().filter(|f| f.rows > 0).collect()
}

/// A digest field's counts as the text gives them, and, when a row names
/// a digest the store does not answer for, the field and the first such
/// row.
fn field_line(f: &FieldCount) -> String {
    let mut line = format!(
        "field {} ({}): {}, {}, {} answered for, {} not",
        f.field,
        f.kind.as_str(),
        counted(f.rows, "row", "rows"),
        counted(f.digests, "digest", "digests"),
        f.rows_answered,
        f.rows_unanswered
    );
    if f.rows_malformed > 0 {
        line.push_str(&format!(" ({} malformed)", f.rows_malformed));
    }
    if let Some(u) = &f.first_unanswered {
        line.push_str(&format!(
            "; FAIL {}: {} line {} names {} ({})",
            f.field,
            u.file,
            u.line,
            u.digest.to_hex(),
            u.status
        ));
    }
    line
}

/// The notes under a tree digest: its damaged objects (`--verify`), why
/// `--registry` could not give it.
fn tree_notes(d: &TreeDigestAudit) -> Vec<String> {
    let mut out: Vec<String> = d
        .damaged
        .iter()
        .map(|o| format!("damaged: {} {}: {}", o.kind, o.path, o.detail))
        .collect();
    if let Some(e) = &d.pull_error {
        out.push(format!("not pulled: {e}"));
    }
    for m in &d.failing_members {
        out.push(format!("member {} {}: {}", m.role, m.digest, m.status));
    }
    out
}

/// `N`, or `FILE:N` when several inputs were read.
fn tree_at(r: &AuditReport, p: &RowAt) -> String {
    if r.inputs.len() > 1 {
        format!("{}:{}", p.file, p.line)
    } else {
        p.line.to_string()
    }
}

/// `line N`, or `FILE:N` when several inputs were read.
fn place(r: &AuditReport, file: &str, line: u64) -> String {
    if r.inputs.len() > 1 {
        format!("{file}:{line}")
    } else {
        format!("line {line}")
    }
}

/// The row problems and malformed lines listed, in input and line order:
/// where, what, and the detail.
fn problems(r: &AuditReport) -> Vec<(String, &'static str, String)> {
    let index = |file: &str| r.inputs.iter().position(|i| i.file == file).unwrap_or(0);
    let mut all: Vec<(usize, u64, &'static str, &str, &str)> = r
        .row_problems
        .iter()
        .map(|p| {
            (
                index(&p.file),
                p.line,
                p.kind,
                p.file.as_str(),
                p.detail.as_str(),
            )
        })
        .collect();
    for (n, i) in r.inputs.iter().enumerate() {
        all.extend(i.malformed.iter().map(|m| {
            (
                n,
                m.line,
                "malformed-line",
                i.file.as_str(),
                m.reason.as_str(),
            )
        }));
    }
    all.sort_by_key(|(n, line, ..)| (*n, *line));
    all.into_iter()
        .map(|(_, line, kind, file, detail)| (place(r, file, line), kind, detail.to_string()))
        .collect()
}

/// A Markdown table cell: pipes escaped, no line breaks.
fn md(cell: &str) -> String {
    cell.replace('\\', "\\\\")
        .replace('|', "\\|")
        .replace(['\n', '\r'], " ")
}

/// The Markdown tables: digests as `layout` names them, lines never
/// wrapped (a table row is one line).
fn markdown(r: &AuditReport, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
    let heads = heads(r);
    writeln!(w, "| {} |", heads.join(" | "))?;
    writeln!(w, "|{}", "---|".repeat(heads.len()))?;
    for d in r.digests.iter() {
        let mut c: Vec<String> = cells(r, layout, &d).iter().map(|c| md(c)).collect();
        c[0] = format!("`{}`", c[0]);
        let notes = notes(r, &d);
        if !notes.is_empty() {
            c[1] = format!("{}: {}", c[1], md(&notes.join("; ")));
        }
        writeln!(w, "| {} |", c.join(" | "))?;
    }
    if !r.tree_digests.is_empty() {
        writeln!(w)?;
        writeln!(
            w,
            "| tree field | digest | status | profile | rows | lines |"
        )?;
        writeln!(w, "|---|---|---|---|---|---|")?;
        for d in &r.tree_digests {
            let profile = d.profile.as_deref().unwrap_or("-");
            let notes = tree_notes(d);
            let status = if notes.is_empty() {
                d.status.as_str().to_string()
            } else {
                format!("{}: {}", d.status.as_str(), md(&notes.join("; ")))
            };
            writeln!(
                w,
                "| {} | `{}` | {} | {} | {} | {}-{} |",
                d.field,
                d.digest.to_hex(),
                status,
                md(profile),
                d.rows,
                tree_at(r, &d.first),
                tree_at(r, &d.last)
            )?;
        }
    }
    let shown = shown_fields(r);
    if !shown.is_empty() {
        writeln!(w)?;
        writeln!(
            w,
            "| field | kind | rows | digests | answered | unanswered | first unanswered |"
        )?;
        writeln!(w, "|---|---|---|---|---|---|---|")?;
        for f in shown {
            let first = f.first_unanswered.as_ref().map_or_else(
                || "-".to_string(),
                |u| {
                    format!(
                        "{} line {}: `{}` {}",
                        u.file,
                        u.line,
                        u.digest.to_hex(),
                        u.status
                    )
                },
            );
            writeln!(
                w,
                "| {} | {} | {} | {} | {} | {} | {} |",
                md(&f.field),
                f.kind.as_str(),
                f.rows,
                f.digests,
                f.rows_answered,
                f.rows_unanswered,
                md(&first)
            )?;
        }
    }
    let problems = problems(r);
    if !problems.is_empty() {
        writeln!(w)?;
        writeln!(w, "| where | problem | detail |")?;
        writeln!(w, "|---|---|---|")?;
        for (p, kind, detail) in problems {
            writeln!(w, "| {} | {kind} | {} |", md(&p), md(&detail))?;
        }
    }
    let listed = r.row_problems.len() as u64
        + r.inputs
            .iter()
            .map(|i| i.malformed.len() as u64)
            .sum::<u64>();
    if r.row_problem_count + r.malformed_count > listed {
        writeln!(
            w,
            "\n{} more problems are not listed (at most {} of each list are).",
            r.row_problem_count + r.malformed_count - listed,
            r.listed_at_most
        )?;
    }
    writeln!(w)?;
    writeln!(w, "**{}**", r.verdict)
}
