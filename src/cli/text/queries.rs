//! The text of the catalogue's queries, `list`, `log`, `find` and `show`:
//! one writer each, laid out by a [`Layout`] (piped: [`Layout::plain`]).

use std::io::{self, Write};

use super::layout::{Fitted, Layout, Named};
use super::source;
use crate::catalogue::Provenance;
use crate::cli::output::Report;
use crate::cmd::list::{FindReport, ListReport, LogReport};
use crate::cmd::show::ShowReport;
use crate::error::counted;
use crate::store::core::query::ShownView;

/// How far a line's further lines are indented: two spaces past its own
/// indentation.
fn hanging(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len() + 2
}

/// Writes a line of `show`, wrapped under itself.
fn shown(layout: &Layout, w: &mut dyn Write, line: &str) -> io::Result<()> {
    layout.line(w, line, hanging(line))
}

/// Writes the six provenance fields, one per line.
fn provenance(p: &Provenance, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
    shown(layout, w, &format!("name:                    {}", p.name))?;
    shown(
        layout,
        w,
        &format!("version:                 {}", p.version),
    )?;
    shown(
        layout,
        w,
        &format!("manifest_schema_version: {}", p.manifest_schema_version),
    )?;
    shown(
        layout,
        w,
        &format!(
            "manifest_digest:         {}",
            layout.digest(&p.manifest_digest)
        ),
    )?;
    shown(
        layout,
        w,
        &format!("file_count:              {}", p.file_count),
    )?;
    shown(
        layout,
        w,
        &format!("total_bytes:             {}", p.total_bytes),
    )
}

impl Report for ShowReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.fitted(&Layout::plain(), w)
    }
}

impl Fitted for ShowReport {
    fn named(&self) -> Named {
        Named {
            snapshots: vec![self.provenance.manifest_digest],
            objects: self.files.iter().flatten().map(|f| f.sha256).collect(),
        }
    }

    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
        provenance(&self.provenance, layout, w)?;
        let none = "-".to_string();
        let line = |w: &mut dyn Write, line: String| shown(layout, w, &line);
        if self.profile != "ce" {
            line(w, format!("profile:                 {}", self.profile))?;
            for (name, digest) in self.harness_digests.iter().flat_map(|h| h.named()) {
                line(w, format!("  {name}: {digest}"))?;
            }
        }
        if let Some(members) = &self.members {
            line(w, format!("members:                 {}", members.len()))?;
            for m in members {
                let name = m.name.as_deref().unwrap_or("(not in the store)");
                line(w, format!("  {}: {} {} {name}", m.role, m.kind, m.digest))?;
            }
        }
        if !self.environments.is_empty() {
            line(
                w,
                format!("environments:            {}", self.environments.len()),
            )?;
            for d in &self.environments {
                line(w, format!("  {d}"))?;
            }
        }
        line(
            w,
            format!(
                "first_ingested_at:       {}",
                self.first_ingested_at.as_ref().unwrap_or(&none)
            ),
        )?;
        line(
            w,
            format!(
                "last_ingested_at:        {}",
                self.last_ingested_at.as_ref().unwrap_or(&none)
            ),
        )?;
        line(w, format!("ingest_count:            {}", self.ingest_count))?;
        if let Some(c) = &self.came_from {
            line(
                w,
                format!("came_from:               {} {}", c.how, c.source),
            )?;
        }
        line(w, format!("views:                   {}", self.views.len()))?;
        for ShownView { row: v, on_disk } in &self.views {
            let gone = if *on_disk { "" } else { " gone from disk" };
            line(
                w,
                format!(
                    "  {} ({}, {}, {}){gone}",
                    v.path, v.kind, v.method, v.created_at
                ),
            )?;
        }
        line(
            w,
            format!("sources:                 {}", self.sources.len()),
        )?;
        for e in &self.sources {
            line(
                w,
                format!(
                    "  {} {}: {}",
                    e.at,
                    e.via.as_str(),
                    source::record_line(&e.record)
                ),
            )?;
        }
        line(
            w,
            format!("signed by:               {}", self.attestations.len()),
        )?;
        for a in &self.attestations {
            line(
                w,
                format!("  key {} at {} (attestation {})", a.keyid, a.at, a.id),
            )?;
        }
        if let Some(files) = &self.files {
            line(w, "files:".into())?;
            for f in files {
                let file = format!(
                    "{} {} {:>8} {}",
                    layout.object(&f.sha256),
                    if f.executable { "x" } else { "-" },
                    f.size,
                    f.path
                );
                layout.fields(w, &[String::new(), file], 4)?;
            }
        }
        Ok(())
    }
}

impl Report for ListReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.fitted(&Layout::plain(), w)
    }
}

impl Fitted for ListReport {
    fn named(&self) -> Named {
        Named {
            snapshots: self.snapshots.iter().map(|l| l.row.digest).collect(),
            objects: Vec::new(),
        }
    }

    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
        for l in &self.snapshots {
            let s = &l.row;
            let mut fields = vec![
                layout.digest(&s.digest),
                format!("{} {}", s.name, s.version),
                counted(s.file_count, "file", "files"),
                counted(s.total_bytes, "byte", "bytes"),
                s.first_ingested_at.clone(),
            ];
            if let Some(s) = &l.source {
                fields.push(format!("source {}", source::short(s)));
            }
            layout.fields(w, &fields, 2)?;
        }
        Ok(())
    }
}

impl Report for LogReport {
    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.fitted(&Layout::plain(), w)
    }
}

impl Fitted for LogReport {
    fn named(&self) -> Named {
        Named {
            snapshots: self.ingests.iter().map(|l| l.event.digest).collect(),
            objects: Vec::new(),
        }
    }

    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
        for l in &self.ingests {
            let e = &l.event;
            let mut fields = vec![
                e.at.clone(),
                layout.digest(&e.digest),
                e.event.clone(),
                e.source.clone(),
                format!("{}@{}", e.user, e.host),
                e.tool_version.clone(),
                format!("new {} reused {}", e.new_objects, e.reused_objects),
            ];
            if let Some(r) = &l.source_record {
                fields.push(format!("source {}", source::record_line(r)));
            }
            layout.fields(w, &fields, 2)?;
        }
        Ok(())
    }
}

impl Report for FindReport {
    /// 1 when nothing matched, as `grep` exits.
    fn exit_code(&self) -> u8 {
        super::found_problems(self.matches.is_empty())
    }

    fn human(&self, w: &mut dyn Write) -> io::Result<()> {
        self.fitted(&Layout::plain(), w)
    }
}

impl Fitted for FindReport {
    fn named(&self) -> Named {
        Named {
            snapshots: self.matches.iter().map(|h| h.manifest_digest).collect(),
            objects: self.matches.iter().map(|h| h.sha256).collect(),
        }
    }

    fn fitted(&self, layout: &Layout, w: &mut dyn Write) -> io::Result<()> {
        for h in &self.matches {
            let file = format!(
                "{} {} {:>8} {}",
                layout.object(&h.sha256),
                if h.executable { "x" } else { "-" },
                h.size,
                h.path
            );
            let fields = [layout.digest(&h.manifest_digest), h.version.clone(), file];
            layout.fields(w, &fields, 2)?;
        }
        Ok(())
    }
}
